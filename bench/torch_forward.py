"""A GPT forward exported from PyTorch by torch-mlir, run by shardc's runtime against
PyTorch eager on the same module, in the same run (interleaved; medians and ratios).

  1 rank:  shardc's runtime on the imported forward vs PyTorch eager on 1 thread;
  2 ranks: the same program with the tokens' batch split over a grid of 2 (data
           parallel, shard-partition), run under `mpiexec -n 2`, vs PyTorch on 2 threads.

Not a test. Needs the [torch] extra.

    python bench/torch_forward.py [--n-layer 4 --n-embd 256 --n-head 4 --block 128
                                   --batch 8 --vocab 512 --repeats 10] [--ranks 1,2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# One BLAS thread per process: the 1-rank row compares with PyTorch on 1 thread, and
# under mpiexec the two ranks share the machine's cores (set before numpy loads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--ranks", default="1,2", help="comma-separated: 1 and/or 2")
    p.add_argument("--kernels", choices=("auto", "numpy"), default="auto",
                   help="numpy: the elementwise bodies on numpy (SHARDC_KERNELS=numpy), not numba")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _export(a: argparse.Namespace):
    from shardc.testing import torch_models as tm

    config = tm.GPTConfig(vocab_size=a.vocab, block_size=a.block, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd)
    t0 = time.perf_counter()
    model, inputs, exported = tm.gpt_export(config, batch=a.batch)
    return model, inputs, exported, time.perf_counter() - t0


def _interleaved(ours, theirs, repeats: int) -> tuple[float, float]:
    t_ours: list[float] = []
    t_theirs: list[float] = []
    for k in range(repeats):
        pair = ((t_ours, ours), (t_theirs, theirs))
        for times, fn in pair if k % 2 else pair[::-1]:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(t_ours), statistics.median(t_theirs)


def one_rank(a: argparse.Namespace) -> None:
    import torch

    from shardc.runtime import compile_text

    torch.set_num_threads(1)
    model, inputs, exported, t_export = _export(a)
    t0 = time.perf_counter()
    compiled = compile_text(exported.text, "gpt")
    t_compile = time.perf_counter() - t0
    args = list(exported.arguments(model, inputs).values())
    with torch.no_grad():
        want = model(*inputs).numpy()
        got = compiled.call("gpt", *args)
        diff = float(np.abs(np.asarray(got) - want).max())

        def theirs():
            model(*inputs)

        def ours():
            compiled.call("gpt", *args)

        ours()
        theirs()
        t_ours, t_theirs = _interleaved(ours, theirs, a.repeats)
    ops = exported.text.count(" = ")
    print(f"export {t_export:.2f} s, parse + compile {t_compile:.2f} s ({ops} ops); max abs diff vs PyTorch {diff:.2e}")
    tokens = a.batch * a.block
    print(
        f"1 rank vs PyTorch eager (1 thread): shardc {t_ours * 1e3:.1f} ms, PyTorch {t_theirs * 1e3:.1f} ms "
        f"-> {t_ours / t_theirs:.2f}x ({tokens / t_ours:,.0f} vs {tokens / t_theirs:,.0f} tokens/s)"
    )


def two_ranks(a: argparse.Namespace) -> None:
    """Export + annotate here, then time the data-parallel program under mpiexec -n 2 and
    PyTorch on 2 threads (one after the other, interleaved by rounds)."""
    import torch

    from shardc.frontends.annotate import annotate_arguments

    model, inputs, exported, _ = _export(a)
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "gpt_dp2.mlir"
        program.write_text(annotate_arguments(exported.text, (2,), {"idx": [[0]]}, names=exported.arg_names))
        np.savez(Path(tmp) / "args.npz", **exported.arguments(model, inputs))
        rounds = 3
        ours: list[float] = []
        theirs: list[float] = []
        torch.set_num_threads(2)
        for _ in range(rounds):
            out = subprocess.run(
                ["mpiexec", "-n", "2", sys.executable, os.path.abspath(__file__), "--worker", tmp,
                 "--repeats", str(a.repeats)],
                capture_output=True, text=True, check=True,
            ).stdout
            ours.append(float(out.split()[-1]))
            with torch.no_grad():
                model(*inputs)
                times = []
                for _ in range(a.repeats):
                    t0 = time.perf_counter()
                    model(*inputs)
                    times.append(time.perf_counter() - t0)
            theirs.append(statistics.median(times))
    t_ours, t_theirs = statistics.median(ours), statistics.median(theirs)
    tokens = a.batch * a.block
    print(
        f"2 ranks data-parallel vs PyTorch eager (2 threads): shardc {t_ours * 1e3:.1f} ms, PyTorch "
        f"{t_theirs * 1e3:.1f} ms -> {t_ours / t_theirs:.2f}x ({tokens / t_ours:,.0f} vs {tokens / t_theirs:,.0f} tokens/s)"
    )


def worker(tmp: str, repeats: int) -> None:
    """One MPI rank: partition, compile, run the forward `repeats` times; rank 0 prints the
    median of the slowest rank's times."""
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.tools import run as run_tool

    world = MPI.COMM_WORLD
    args = run_tool._arg_parser().parse_args([str(Path(tmp) / "gpt_dp2.mlir"), "--inputs", str(Path(tmp) / "args.npz")])
    prog = run_tool.prepare(args)
    local = run_tool.local_inputs(prog, run_tool.input_specs(prog, [], world.size, args.inputs), world.rank, world.size)
    times = []
    with use_comm(MPIComm(world)):
        for k in range(repeats + 1):
            world.Barrier()
            t0 = time.perf_counter()
            prog.compiled.call(prog.entry, *local)
            world.Barrier()
            if k:
                times.append(time.perf_counter() - t0)
    median = world.allreduce(statistics.median(times), op=MPI.MAX)
    if world.rank == 0:
        print(median)


def main() -> None:
    from shardc.runtime.codegen.kernels.fused import active_path

    a = _args()
    if a.kernels == "numpy":
        os.environ["SHARDC_KERNELS"] = "numpy"  # read when kernels are built; workers inherit it
    if a.worker:
        worker(a.worker, a.repeats)
        return
    ranks = {int(r) for r in a.ranks.split(",")}
    print(f"elementwise bodies: {active_path()}")
    print(f"GPT n_layer {a.n_layer}, n_embd {a.n_embd}, n_head {a.n_head}, block {a.block}, batch {a.batch}, vocab {a.vocab}")
    if 1 in ranks:
        one_rank(a)
    if 2 in ranks:
        two_ranks(a)


if __name__ == "__main__":
    main()
