"""What the compile cache saves when it holds the whole compile (parse, pipeline, code
generation), cold against warm, side by side: each round runs a cold case (an empty
cache directory of its own) and a warm one (a directory the first round filled), the
order alternating so neither always goes first; reported are the median and best
seconds of each and the cold/warm ratio. The machine may be shared: figures are as
measured, under that load.

    python bench/pipeline_cache.py                  # every case, 3 rounds
    python bench/pipeline_cache.py --cases gpt --rounds 5

Cases: `mlp` and `grid` run `shardc-run` (a process each, wall time) on
examples/mlp.mlir (`--simulate 4 --pipeline shard-to-mpi-pipeline`) and
examples/grid_and_collectives.mlir (`--entry row_sums --simulate 8`, the default
partitioning); `gpt` on the committed torch-mlir GPT (tests/data/torch_mlir/gpt.mlir
`--inputs`, replicated on one rank: parse and code generation, no pipeline; gpt.npz keys
its arrays by name, shardc-run by %argN, so the bench writes them as arg0, arg1, ...);
`mpi` the mlp case on a grid of 2 under `mpiexec -n 2`; `torch` the torch trainer's
`TorchStepProgram.build` of examples/torch_gpt.py's GPT (its defaults; tp=2, batch 4,
block 16), in this process, the torch-mlir export done once beforehand.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = [sys.executable, "-m", "shardc.tools.run"]
MLP_IN = ["--input", "x=random:seed=1", "--input", "w1=random:seed=2", "--input", "w2=random:seed=3"]
CASES: dict[str, list[str]] = {
    "mlp": [*RUN, "examples/mlp.mlir", "--simulate", "4", "--pipeline", "shard-to-mpi-pipeline", *MLP_IN, "-q"],
    "grid": [*RUN, "examples/grid_and_collectives.mlir", "--entry", "row_sums", "--simulate", "8", "--input", "x=random", "-q"],
    "gpt": [*RUN, "tests/data/torch_mlir/gpt.mlir", "--inputs", "{gpt_npz}", "-q"],
    "mpi": [shutil.which("mpiexec") or "mpiexec", "-n", "2", *RUN, "{mlp2}", "--pipeline", "shard-to-mpi-pipeline", *MLP_IN, "-q"],
}


def _process(cmd: list[str]) -> Callable[[str], float]:
    def once(cache: str) -> float:
        env = {k: v for k, v in os.environ.items() if k != "SHARDC_CACHE"}
        env.update(SHARDC_CACHE_DIR=cache, SHARDC_CACHE_DEBUG="1")
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
        once.sources.append("cache" if ": hit " in p.stderr else "compiled")  # type: ignore[attr-defined]
        return dt

    once.sources = []  # type: ignore[attr-defined]
    return once


def _mlp2(scratch: Path) -> str:
    """examples/mlp.mlir on a grid of 2 (for 2 ranks)."""
    out = scratch / "mlp2.mlir"
    out.write_text((ROOT / "examples" / "mlp.mlir").read_text().replace("shard.grid @grid(shape = 4)", "shard.grid @grid(shape = 2)"))
    return str(out)


def _gpt_npz(scratch: Path) -> str:
    """gpt.npz's arguments (in the function's order) keyed arg0, arg1, ..."""
    import numpy as np

    with np.load(ROOT / "tests" / "data" / "torch_mlir" / "gpt.npz") as d:
        arrays = [d[k] for k in d.files if k != "result"]
    out = scratch / "gpt_args.npz"
    np.savez(out, **{f"arg{i}": a for i, a in enumerate(arrays)})
    return str(out)


def _torch() -> Callable[[str], float]:
    import torch

    from shardc.frontends.torch_train import TorchStepProgram, export_train_step, load_task
    from shardc.training.axis import ShardingPolicy
    from shardc.training.mesh import Grid

    task = load_task(str(ROOT / "examples" / "torch_gpt.py") + ":make")
    idx = torch.randint(0, 64, (4, 16))
    exported = export_train_step(task.model, (idx,), (idx,), task.loss_fn)

    def once(cache: str) -> float:
        os.environ["SHARDC_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        prog = TorchStepProgram.build(exported, task.axes, task.plan, ShardingPolicy(tp=2, zero=False), Grid(1, 2), no_decay=task.no_decay)
        dt = time.perf_counter() - t0
        once.sources.append(prog.cached)  # type: ignore[attr-defined]
        return dt

    once.sources = []  # type: ignore[attr-defined]
    return once


def measure(name: str, once: Callable[[str], float], rounds: int, scratch: Path) -> tuple[list[float], list[float]]:
    warm_dir = str(scratch / f"{name}-warm")
    once(warm_dir)  # fills the warm directory
    cold: list[float] = []
    warm: list[float] = []
    sources: list[str] = once.sources  # type: ignore[attr-defined]
    for k in range(rounds):
        cold_dir = str(scratch / f"{name}-cold-{k}")
        pair = ((cold, cold_dir), (warm, warm_dir))
        for times, d in pair if k % 2 else pair[::-1]:
            for _ in range(3):  # a warm run that missed: shardc's sources changed (the key covers them); it refilled the directory
                t = once(d)
                if d == cold_dir or sources[-1] == "cache":
                    break
            times.append(t)
    return cold, warm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="mlp,grid,gpt,mpi,torch")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.environ.pop("SHARDC_CACHE", None)
    scratch = Path(tempfile.mkdtemp(prefix="shardc-bench-cache-"))
    try:
        print(f"{'case':<6} {'cold median':>12} {'warm median':>12} {'cold best':>10} {'warm best':>10} {'ratio (median)':>15}")
        for name in a.cases.split(","):
            cmd = [{"{gpt_npz}": _gpt_npz, "{mlp2}": _mlp2}[x](scratch) if x.startswith("{") else x for x in CASES.get(name, [])]
            once = _torch() if name == "torch" else _process(cmd)
            cold, warm = measure(name, once, a.rounds, scratch)
            srcs = once.sources  # type: ignore[attr-defined]
            if srcs.count("cache") != a.rounds:  # shardc's sources kept changing while measuring
                print(f"{name}: warm runs missed ({srcs}); shardc's source changed while measuring, run again", flush=True)
                continue
            mc, mw = statistics.median(cold), statistics.median(warm)
            print(f"{name:<6} {mc:>11.3f}s {mw:>11.3f}s {min(cold):>9.3f}s {min(warm):>9.3f}s {mc / mw:>14.1f}x", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
