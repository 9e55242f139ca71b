"""The training step of a PyTorch module imported through torch-mlir and compiled by
shardc (`examples/torch_gpt.py`), against PyTorch eager training the same module with
`torch.optim.AdamW`, in the same run: tokens/s and the ratio shardc / PyTorch.

  1 rank        vs PyTorch on 1 thread (interleaved steps)
  dp=2, tp=2    under `mpiexec -n 2`, vs PyTorch on 2 threads (rounds alternating)

Also the import (torch-mlir) and compile (shardc's pipeline + code generation) times.
Not a test; needs the [torch] extra.

    python bench/torch_train_step.py [--n-layer 4 --n-embd 256 --n-head 4 --block 128
                                      --batch 8 --vocab 512 --steps 6] [--configs 1,dp2,tp2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# One BLAS thread per process (set before numpy loads): the 1-rank row compares with
# PyTorch on 1 thread, and the two MPI ranks share the machine's two cores.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))


def _args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--batch", type=int, default=8, help="sequences per step (global)")
    p.add_argument("--vocab", type=int, default=512)
    p.add_argument("--steps", type=int, default=6, help="timed steps per measurement")
    p.add_argument("--configs", default="1,dp2,tp2")
    p.add_argument("--kernels", choices=("auto", "numpy"), default="auto",
                   help="numpy: the elementwise bodies on numpy (SHARDC_KERNELS=numpy), not numba")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def _task(a: argparse.Namespace):
    import torch_gpt

    return torch_gpt.task(vocab_size=a.vocab, block_size=a.block, seed=0, n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd)


def _batch(a: argparse.Namespace, k: int):
    import torch

    g = torch.Generator().manual_seed(k)
    idx = torch.randint(0, a.vocab, (a.batch, a.block + 1), generator=g)
    return idx[:, :-1].contiguous(), idx[:, 1:].contiguous()


def _program(a: argparse.Namespace, world: int, tp: int):
    """(compiled step program, import seconds, compile seconds)."""
    from shardc.frontends.torch_train import TorchStepProgram, export_train_step
    from shardc.training.axis import ShardingPolicy
    from shardc.training.mesh import make_grid

    task = _task(a)
    x, y = _batch(a, 0)
    t0 = time.perf_counter()
    exported = export_train_step(task.model, (x,), (y,), task.loss_fn)
    t_import = time.perf_counter() - t0
    policy = ShardingPolicy(tp=tp, zero=True)
    prog = TorchStepProgram.build(exported, task.axes, task.plan, policy, make_grid(world, tp))
    return task, prog, t_import, prog.compile_seconds


def _torch_step(task, lr: float = 1e-3):
    import torch

    model = task.model
    opt = torch.optim.AdamW(model.parameters(), lr=lr)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = task.loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def one_rank(a: argparse.Namespace) -> None:
    import torch

    from shardc.frontends.torch_train import _Rank  # pyright: ignore[reportPrivateUsage]

    torch.set_num_threads(1)
    task, prog, t_import, t_compile = _program(a, 1, 1)
    state = _Rank(prog, 0, {n: p.detach().numpy().copy() for n, p in task.model.named_parameters()})
    torch_step = _torch_step(_task(a))
    batches = [_batch(a, k) for k in range(a.steps + 1)]
    ours: list[float] = []
    theirs: list[float] = []
    for k, (x, y) in enumerate(batches):
        pair = (("ours", lambda: state.train_step([[x.numpy(), y.numpy()]], 1e-3)), ("theirs", lambda: torch_step(x, y)))
        for name, fn in pair if k % 2 else pair[::-1]:
            t0 = time.perf_counter()
            fn()
            if k:  # the first step warms both up
                (ours if name == "ours" else theirs).append(time.perf_counter() - t0)
    print(f"import (torch-mlir) {t_import:.1f} s, compile (shardc) {t_compile:.1f} s")
    _row("1 rank vs PyTorch eager, 1 thread", a, statistics.median(ours), statistics.median(theirs))


def _row(what: str, a: argparse.Namespace, t_ours: float, t_theirs: float) -> None:
    tokens = a.batch * a.block
    print(
        f"{what}: shardc {tokens / t_ours:,.0f} tokens/s ({t_ours * 1e3:.0f} ms), PyTorch {tokens / t_theirs:,.0f} "
        f"tokens/s ({t_theirs * 1e3:.0f} ms) -> {t_theirs / t_ours:.2f}x PyTorch's speed"
    )


def worker(a: argparse.Namespace) -> None:
    """One rank of `mpiexec -n 2`: compile the step for the policy, time the steps; rank 0
    prints the median step time of the slowest rank."""
    from mpi4py import MPI

    from shardc.frontends.torch_train import _Rank  # pyright: ignore[reportPrivateUsage]
    from shardc.runtime.execute.comm import MPIComm, use_comm

    world = MPI.COMM_WORLD
    tp = 2 if a.worker == "tp2" else 1
    task, prog, _, _ = _program(a, world.size, tp)
    state = _Rank(prog, world.rank, {n: p.detach().numpy().copy() for n, p in task.model.named_parameters()})
    times = []
    with use_comm(MPIComm(world)):
        for k in range(a.steps + 1):
            x, y = _batch(a, k)
            world.Barrier()
            t0 = time.perf_counter()
            state.train_step([[x.numpy(), y.numpy()]], 1e-3)
            world.Barrier()
            if k:
                times.append(time.perf_counter() - t0)
    median = world.allreduce(statistics.median(times), op=MPI.MAX)
    if world.rank == 0:
        print(median)


def two_ranks(a: argparse.Namespace, config: str) -> None:
    import torch

    torch.set_num_threads(2)
    torch_step = _torch_step(_task(a))
    ours: list[float] = []
    theirs: list[float] = []
    argv = [f"--n-layer={a.n_layer}", f"--n-embd={a.n_embd}", f"--n-head={a.n_head}", f"--block={a.block}",
            f"--batch={a.batch}", f"--vocab={a.vocab}", f"--steps={a.steps}", f"--worker={config}"]
    for _ in range(2):
        out = subprocess.run(["mpiexec", "-n", "2", sys.executable, os.path.abspath(__file__), *argv],
                             capture_output=True, text=True, check=True).stdout
        ours.append(float(out.split()[-1]))
        times = []
        for k in range(a.steps + 1):
            x, y = _batch(a, k)
            t0 = time.perf_counter()
            torch_step(x, y)
            if k:
                times.append(time.perf_counter() - t0)
        theirs.append(statistics.median(times))
    _row(f"{config} (2 ranks) vs PyTorch eager, 2 threads", a, min(ours), min(theirs))


def main() -> None:
    from shardc.runtime.codegen.kernels.fused import active_path

    a = _args()
    if a.kernels == "numpy":
        os.environ["SHARDC_KERNELS"] = "numpy"  # read when kernels are built; workers inherit it
    if a.worker:
        worker(a)
        return
    print(f"examples/torch_gpt.py: n_layer {a.n_layer}, n_embd {a.n_embd}, n_head {a.n_head}, block {a.block}, batch {a.batch}, vocab {a.vocab}")
    configs = a.configs.split(",")
    print(f"elementwise bodies: {active_path()}")
    if "1" in configs:
        one_rank(a)
    for c in ("dp2", "tp2"):
        if c in configs:
            two_ranks(a, c)


if __name__ == "__main__":
    main()
