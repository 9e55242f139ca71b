"""Start-up of `shardc-opt` against `mlir-opt` 22.1.8, per process, on a one-function
file (examples/mlp.mlir with --sharding-propagation --shard-partition, as a lit RUN line
would run it; mlir-opt takes them as a pipeline on func.func), plus `shardc-opt --help` and the floor under both: the interpreter alone
and the interpreter importing xDSL's builtin dialect and parser, which every shardc-opt
run needs. Runs are interleaved (order alternating), median wall and CPU seconds.

    python bench/startup.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_compile import paired, shardc_opt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    from shardc.testing.oracle import _env, find_mlir_opt  # pyright: ignore[reportPrivateUsage]

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--compare-with", metavar="DIR", help="a shardc source tree (say `git archive OLD shardc | tar -x -C DIR`) timed side by side through PYTHONPATH")
    a = p.parse_args()
    src = str(ROOT / "examples" / "mlp.mlir")
    flags = ["--sharding-propagation", "--shard-partition", "-o", "/dev/null"]
    ours = shardc_opt()
    cases: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "shardc-opt mlp.mlir (propagate+partition)": ([*ours, src, *flags], None),
        "shardc-opt --help": ([*ours, "--help"], None),
        "python -c pass": ([sys.executable, "-c", "pass"], None),
        "python importing xDSL builtin+parser": ([sys.executable, "-c", "import xdsl.dialects.builtin, xdsl.parser"], None),
    }
    if a.compare_with:
        env = {**os.environ, "PYTHONPATH": str(Path(a.compare_with).resolve())}
        cases["(compared tree) shardc-opt mlp.mlir"] = ([*ours, src, *flags], env)
        cases["(compared tree) shardc-opt --help"] = ([*ours, "--help"], env)
    mlir_opt = find_mlir_opt()
    if mlir_opt:
        pipeline = "--pass-pipeline=builtin.module(func.func(sharding-propagation,shard-partition))"
        cases["mlir-opt mlp.mlir (propagate+partition)"] = ([mlir_opt, src, pipeline, "-o", "/dev/null"], _env(mlir_opt))
    times = paired(cases, a.runs)
    print(f"{a.runs} interleaved runs each; median wall / CPU seconds per process")
    med: dict[str, tuple[float, float]] = {}
    for name, t in times.items():
        wall, cpu = statistics.median(w for _, w in t), statistics.median(c for c, _ in t)
        med[name] = (wall, cpu)
        print(f"  {name:44s} {wall:6.3f} / {cpu:6.3f}")
    key = "shardc-opt mlp.mlir (propagate+partition)"
    if mlir_opt:
        (w1, c1), (w2, c2) = med[key], med["mlir-opt mlp.mlir (propagate+partition)"]
        print(f"ratio shardc-opt / mlir-opt per process: {w1 / w2:.1f}x wall, {c1 / c2:.1f}x CPU")
    if a.compare_with:
        (w1, c1), (w2, c2) = med[key], med["(compared tree) shardc-opt mlp.mlir"]
        print(f"this tree / compared tree: {w1 / w2:.2f}x wall, {c1 / c2:.2f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
