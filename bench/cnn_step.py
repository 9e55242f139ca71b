"""A ResNet-style CNN's forward + backward (loss and parameter gradients, no optimizer):
shardc on 2 MPI ranks with the batch split (dp=2) and with the image height split
(convolutions keep the split, neighbours' rows come by `shard.update_halo`), against
PyTorch eager on 2 threads (and on 1, a steadier anchor on a loaded machine), in the
same run; plus the bytes the height split's halos move per step against what gathering
those activations would move.

    python bench/cnn_step.py            # batch 16, 3x64x64 images, widths 16/32/64
    python bench/cnn_step.py --small    # batch 4, 3x16x16, widths 4/8/8: a smoke run

The model (`ResNet`, written here as a PyTorch user writes one): a 3x3 stem conv, then
three stages of one residual block each (two 3x3 convs and a skip; stages 2 and 3 halve
the image with a stride-2 conv and a stride-2 1x1 projection on the skip), global average
pool, a linear head, cross-entropy against 10 classes. No normalisation layers: train-mode
BatchNorm updates its running buffers, which the training import refuses, and the step
should be all convolutions, so there are none (not GroupNorm either).

shardc's side is the step torch-mlir imports (`export_train_step`: loss and gradients)
with its input annotated (`annotate_arguments`: dimension 0 or 2 split over a grid of 2),
compiled through the training pipeline (`pipeline.PIPELINE`) and called on each rank's
shard; its loss (and each gradient a rank holds whole) is checked against PyTorch's.
PyTorch's side: `loss.backward()` of the same model on the same batch. Each figure is the
median step of the slowest rank after one untimed step, the best of `--rounds` rounds.
Peak memory as in bench/hf_train_step.py: VmHWM over the timed steps, and what the
process held resident before them.

Bytes are counted on the partitioned program (before lowering), per step, for the rank
that receives most: what its `shard.update_halo`s bring (its low halo rows from the rank
before, its high ones from the rank after), what all-gathering those activations would
bring instead (the other ranks' cores), and what the step's own `shard.all_gather`s bring
(some backward ops have no halo plan yet and gather). A split that fails (to compile or
to run) is reported in one line and the other rows still run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from _paired import peak_rss, processor, reset_peak_rss, resident_rss  # noqa: E402  (bench/ is the script's folder)

FULL = {"batch": 16, "image": 64, "width": 16}
SMALL = {"batch": 4, "image": 16, "width": 4}
CLASSES = 10
SPLITS = {"dp2": ("batch", 0), "height2": ("height", 2)}
"""Row -> (what is split, the input's dimension split over the grid of 2)."""


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--small", action="store_true", help="batch 4, 16x16 images, width 4")
    p.add_argument("--batch", type=int, default=None, help="default 16 (4 with --small)")
    p.add_argument("--image", type=int, default=None, help="image height and width; default 64 (16 with --small)")
    p.add_argument("--width", type=int, default=None, help="the stem's channels (stages: 1x, 2x, 4x); default 16 (4 with --small)")
    p.add_argument("--repeats", type=int, default=5, help="timed steps per configuration and round (the median counts)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--configs", default="dp2,height2,torch2,torch1", help="rows: dp2, height2, torch2, torch1 (comma-separated)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per configuration's process before it counts as failed")
    p.add_argument("--worker", choices=("shardc", "torch"), help=argparse.SUPPRESS)
    p.add_argument("--split", choices=tuple(SPLITS), help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for k, v in (SMALL if a.small else FULL).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.batch % 2 or a.image % 8 or a.repeats < 1 or a.rounds < 1:
        p.error("--batch must be even, --image a multiple of 8 (two halvings, then split in two), --repeats and --rounds positive")
    return a


def _size_argv(a: argparse.Namespace) -> list[str]:
    return [f"--batch={a.batch}", f"--image={a.image}", f"--width={a.width}", f"--repeats={a.repeats}"]


def resnet(width: int):
    """The model, seeded: every process builds the same parameters."""
    import torch

    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1, stride=stride) if stride != 1 or cin != cout else None

        def forward(self, x):
            y = self.conv2(F.relu(self.conv1(x)))
            return F.relu(y + (x if self.skip is None else self.skip(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, width, 3, padding=1)
            self.stages = nn.Sequential(Block(width, width, 1), Block(width, 2 * width, 2), Block(2 * width, 4 * width, 2))
            self.head = nn.Linear(4 * width, CLASSES)

        def forward(self, x):
            x = self.stages(F.relu(self.stem(x)))
            return self.head(x.mean(dim=(2, 3)))

    torch.manual_seed(0)
    return ResNet()


def data(a: argparse.Namespace) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((a.batch, 3, a.image, a.image)).astype(np.float32), rng.integers(0, CLASSES, a.batch)


def _compile(a: argparse.Namespace, split_dim: int):
    """(the model, the step exported, compiled for a grid of 2 with the input split at
    `split_dim`, the shard collectives of the partitioned step, its `traffic`)."""
    import torch
    import torch.nn.functional as F

    from shardc.context import make_context
    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch_train import export_train_step
    from shardc.ir.locations import LocatingParser
    from shardc.runtime.codegen.compile import compile_module
    from shardc.training.pipeline import PIPELINE, count_collectives, run_pipeline

    model = resnet(a.width)
    x, y = data(a)
    step = export_train_step(model, [torch.from_numpy(x)], [torch.from_numpy(y)], F.cross_entropy)
    names = [*step.input_names, *step.target_names, *step.param_names, *step.buffer_names]
    spec = {step.input_names[0]: [[]] * split_dim + [[0]]}
    if split_dim == 0:  # data parallel: the labels follow their images
        spec[step.target_names[0]] = [[0]]
    text = annotate_arguments(step.text, (2,), spec, names=names)
    module = LocatingParser(make_context(), text, "<cnn>").parse_module()
    lower_at = PIPELINE.index("convert-shard-to-mpi")
    run_pipeline(module, PIPELINE[:lower_at])
    collectives = dict(count_collectives(module)[step.func_name])
    moved = traffic(module, 2)
    run_pipeline(module, PIPELINE[lower_at:])
    return model, step, compile_module(module, "cnn_step"), collectives, moved


def traffic(module, ranks: int) -> dict[str, int]:
    """Bytes received per step by the rank that receives most, on the partitioned
    `module`: `halo`, through every `shard.update_halo` (rank r gets its low halo rows
    from r-1 and its high ones from r+1); `halo_as_gather`, what all-gathering those
    activations instead would bring it (the other ranks' cores); `all_gather`, what the
    step's own `shard.all_gather`s bring it (the result less the rank's own part), and
    `gathered_from`: how many of those gather the result of each kind of op."""
    halo = [0] * ranks
    as_gather = gathered = 0
    producers: dict[str, int] = {}
    for op in module.walk():
        if op.name == "shard.all_gather":
            src, dst = op.operands[0].type, op.results[0].type
            gathered += (math.prod(dst.get_shape()) - math.prod(src.get_shape())) * _itemsize(dst)
            made_by = getattr(op.operands[0].owner, "name", "an argument")
            producers[made_by] = producers.get(made_by, 0) + 1
        if op.name != "shard.update_halo":
            continue
        shape = list(op.destination.type.get_shape())
        sizes = list(op.static_halo_sizes.get_values())
        split_dims = [d for d, axes in enumerate(op.split_axes.as_tuple()) if axes]
        for k, d in enumerate(split_dims):
            lo, hi = sizes[2 * k], sizes[2 * k + 1]
            slab = math.prod(n for i, n in enumerate(shape) if i != d) * _itemsize(op.destination.type)
            for r in range(ranks):
                halo[r] += ((lo if r > 0 else 0) + (hi if r < ranks - 1 else 0)) * slab
            as_gather += (ranks - 1) * (shape[d] - lo - hi) * slab
    return {"halo": max(halo), "halo_as_gather": as_gather, "all_gather": gathered, "gathered_from": producers}


def _itemsize(t) -> int:
    """Bytes per element of a tensor type (f32, i64, ...: xDSL's floats have `bitwidth`,
    its integers `width`)."""
    et = t.element_type
    bits = et.bitwidth if hasattr(et, "bitwidth") else et.width.data
    return max(1, bits // 8)


def shardc_worker(a: argparse.Namespace) -> dict:
    """One of 2 MPI ranks: compile the split step, check it against PyTorch, time it."""
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, use_comm
    from shardc.training.train import set_blas_threads

    set_blas_threads(1)
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    what, dim = SPLITS[a.split]
    try:
        t0 = time.perf_counter()
        model, step, compiled, collectives, moved = _compile(a, dim)
        compile_s = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - reported as the row's one line
        return {"error": f"compile: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"}
    x, y = data(a)
    rows = x.shape[dim] // size
    mine = [slice(None)] * x.ndim
    mine[dim] = slice(rank * rows, (rank + 1) * rows)
    labels = y[rank * rows : (rank + 1) * rows] if dim == 0 else y
    params = [p.detach().numpy().copy() for p in model.parameters()]
    args = [np.ascontiguousarray(x[tuple(mine)]), labels, *params]
    times: list[float] = []
    try:
        with use_comm(MPIComm(world)):
            for k in range(a.repeats + 1):
                world.Barrier()
                t = time.perf_counter()
                out = compiled.call(step.func_name, *args)
                world.Barrier()
                if k:
                    times.append(time.perf_counter() - t)
                else:
                    first = out
                    held = resident_rss()
                    reset_peak_rss()
    except Exception as e:  # noqa: BLE001
        return {"error": f"run: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"}
    check = _check(model, x, y, first)
    every = world.allgather({"step_s": statistics.median(times), "rss": peak_rss(), "held": held})
    return {
        "step_s": max(r["step_s"] for r in every), "rss": max(r["rss"] for r in every), "held": max(r["held"] for r in every), "compile_s": compile_s,
        "collectives": collectives, "traffic": moved, "check": check,
    }


def _check(model, x: np.ndarray, y: np.ndarray, got) -> str:
    """The loss and every gradient this rank holds whole against PyTorch's; raises where
    they differ beyond float32 rounding, else says what was compared."""
    import torch
    import torch.nn.functional as F

    loss = F.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(y))
    want = [loss, *torch.autograd.grad(loss, list(model.parameters()))]
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    whole = 0
    for i, (g, w) in enumerate(zip(got, want)):
        w = w.detach().numpy()
        g = np.asarray(g)
        if g.shape != w.shape:
            continue
        err = float(np.abs(g - w).max()) / max(float(np.abs(w).max()), 1e-30)
        if err > 1e-4:
            raise SystemExit(f"cnn_step.py: result {i} differs from PyTorch's by {err:.1e} (relative to its magnitude)")
        whole += 1
    return f"loss and {whole - 1} of {len(want) - 1} gradients equal PyTorch's"


def torch_worker(a: argparse.Namespace) -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    model = resnet(a.width)
    x, y = (torch.from_numpy(v) for v in data(a))
    times = []
    for k in range(a.repeats + 1):
        t = time.perf_counter()
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        if k:
            times.append(time.perf_counter() - t)
        else:
            held = resident_rss()
            reset_peak_rss()
    return {"step_s": statistics.median(times), "rss": peak_rss(), "held": held}


def _launch(a: argparse.Namespace, config: str) -> dict:
    script = os.path.abspath(__file__)
    if config.startswith("torch"):
        n = config[len("torch") :]
        cmd = [sys.executable, script, "--worker", "torch", f"--threads={n}", *_size_argv(a)]
        env = dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n)
    else:
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            return {"error": "mpiexec is not on PATH"}
        cmd = [mpiexec, "-n", "2", sys.executable, script, "--worker", "shardc", f"--split={config}", *_size_argv(a)]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {a.timeout} s (--timeout)"}
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if p.returncode or line is None:
        last = next((ln for ln in reversed((p.stderr + p.stdout).splitlines()) if ln.strip()), f"exit {p.returncode}")
        return {"error": f"the process failed: {last.strip()}"}
    return json.loads(line[len("RESULT ") :])


def _size(n: int) -> str:
    return f"{n / (1 << 20):,.2f} MiB" if n >= 1 << 20 else f"{n / (1 << 10):,.1f} KiB" if n >= 1 << 10 else f"{n} B"


def main() -> None:
    a = _args()
    if a.worker == "torch":
        print("RESULT " + json.dumps(torch_worker(a)), flush=True)
        return
    if a.worker == "shardc":
        res = shardc_worker(a)
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_rank() == 0:
            print("RESULT " + json.dumps(res), flush=True)
        return
    configs = [c.strip() for c in a.configs.split(",") if c.strip()]
    names = {"dp2": "shardc dp=2", "height2": "shardc height/2", "torch2": "PyTorch 2 threads", "torch1": "PyTorch 1 thread"}
    if not configs or not set(configs) <= set(names):
        raise SystemExit(f"cnn_step.py: --configs takes {', '.join(names)}")
    print(f"ResNet-style CNN: batch {a.batch}, 3x{a.image}x{a.image} images, widths {a.width}/{2 * a.width}/{4 * a.width}, "
          f"{CLASSES} classes, no normalisation; forward + backward (loss and gradients), float32")
    print(f"processor: {processor()}; figures as measured (the machine may be shared)")
    got: dict[str, list[dict]] = {c: [] for c in configs}
    for r in range(a.rounds):
        for c in configs if r % 2 == 0 else configs[::-1]:
            got[c].append(_launch(a, c))
    best = {}
    for c, runs in got.items():
        ok = [x for x in runs if "error" not in x]
        best[c] = min(ok, key=lambda x: x["step_s"]) if ok else runs[0]
    images = a.batch
    print(f"{'row':<18} {'images/s':>9} {'step ms':>9} {'peak RSS/proc':>14} {'held before':>12}")
    for c, r in best.items():
        if "error" in r:
            print(f"{names[c]:<18} failed: {r['error']}")
            continue
        print(f"{names[c]:<18} {images / r['step_s']:>9,.1f} {r['step_s'] * 1e3:>9.1f} {r['rss'] / (1 << 20):>10,.0f} MiB {r['held'] / (1 << 20):>8,.0f} MiB")
    for c in ("dp2", "height2"):
        r = best.get(c)
        if r is None or "error" in r:
            continue
        shown = ", ".join(f"{k.split('.')[-1]} {v}" for k, v in sorted(r["collectives"].items())) or "none"
        print(f"{names[c]}: compile {r['compile_s']:.1f} s; collectives {shown}; {r['check']}")
        t = r["traffic"]
        if t["halo"]:
            print(f"{names[c]}: halos bring {_size(t['halo'])} per step to the rank receiving most; all-gathering those "
                  f"activations instead would bring {_size(t['halo_as_gather'])} ({t['halo_as_gather'] / t['halo']:.1f}x the halos)")
        if t["all_gather"]:
            made = ", ".join(f"{k} {v}" for k, v in sorted(t["gathered_from"].items()))
            print(f"{names[c]}: the step's own all_gathers bring {_size(t['all_gather'])} per step to each rank (gathering the results of {made})")
    for anchor in ("torch2", "torch1"):
        theirs = best.get(anchor)
        if theirs is None or "error" in theirs:
            continue
        print(f"shardc on 2 ranks / {names[anchor]} (speed: their step / ours; memory: our peak / theirs):")
        for c in ("dp2", "height2"):
            r = best.get(c)
            if r is not None and "error" not in r:
                print(f"  {names[c]:<16} {theirs['step_s'] / r['step_s']:5.2f}x   memory {r['rss'] / theirs['rss']:4.2f}x")


if __name__ == "__main__":
    main()
