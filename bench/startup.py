"""Start-up of `shardc-opt` against `mlir-opt` 22.1.8, per process, on a one-function
file (examples/mlp.mlir with --sharding-propagation --shard-partition, as a lit RUN line
would run it; mlir-opt takes them as a pipeline on func.func): cold (the result cache
off, SHARDC_CACHE=0) and answered by the result cache (a hit, primed first: not the
same claim as a cold start), `--help`, and the floors under a cold run: the interpreter
alone, the interpreter importing xDSL's builtin dialect, parser and printer, and
importing the dialects this file uses (xDSL's func, arith, tensor, linalg and shardc's
shard), which any cold run of it must; the floors end as shardc-opt does (collector
off, no interpreter teardown: `os._exit`), so they count the imports alone. Runs are
interleaved (order alternating); each case reports median wall and CPU seconds and its
least CPU (the figure to compare on a shared machine: load only adds to it). Bytecode
is compiled first (`compileall`), as an installed package has it even where
PYTHONDONTWRITEBYTECODE is set. `--parts` adds cold runs with each part of
`shardc.tools.fast_start` left out in turn (and both), to give each part's share.

    python bench/startup.py [--runs 15] [--compare-with DIR] [--parts]
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_compile import paired, shardc_opt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# A shardc tree other than the installed (editable) one: the editable install's finder
# comes before sys.path, so it is taken off sys.meta_path first.
_OTHER_TREE = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]; "
    "sys.path.insert(0, {root!r}); from shardc.tools.opt import main; sys.exit(main())"
)

# shardc-opt with only some parts of its start-up help: the first `install` call decides.
_PARTS = (
    "import sys; from shardc.tools import fast_start; fast_start.install(reuse_code={code}, lazy={lazy}); "
    "from shardc.tools.opt import main; sys.exit(main())"
)


def main() -> int:
    from shardc.testing.oracle import _env, find_mlir_opt  # pyright: ignore[reportPrivateUsage]

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--compare-with", metavar="DIR", help="a shardc source tree (say `git archive OLD shardc | tar -x -C DIR`) timed cold side by side")
    p.add_argument("--parts", action="store_true", help="also time cold runs with each part of shardc.tools.fast_start off")
    a = p.parse_args()
    compileall.compile_dir(str(ROOT / "shardc"), quiet=1)
    src = str(ROOT / "examples" / "mlp.mlir")
    flags = ["--sharding-propagation", "--shard-partition", "-o", "/dev/null"]
    ours = shardc_opt()
    py = sys.executable
    cold = {**os.environ, "SHARDC_CACHE": "0"}
    scratch = tempfile.TemporaryDirectory(prefix="shardc-startup-")
    hit = {**os.environ, "SHARDC_CACHE": "1", "SHARDC_CACHE_DIR": scratch.name}
    subprocess.run([*ours, src, *flags], env=hit, check=True)  # prime the cache
    dialects = "import xdsl.dialects.builtin, xdsl.parser, xdsl.printer, xdsl.dialects.func, xdsl.dialects.arith, xdsl.dialects.tensor, xdsl.dialects.linalg, shardc.dialects.shard"
    floor = "import gc, os; gc.disable(); {}; os._exit(0)"
    cases: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "shardc-opt mlp.mlir, cold": ([*ours, src, *flags], cold),
        "shardc-opt mlp.mlir, result cache hit": ([*ours, src, *flags], hit),
        "shardc-opt --help": ([*ours, "--help"], cold),
        "python -c pass": ([py, "-c", "pass"], None),
        "python importing xDSL builtin+parser+printer": ([py, "-c", floor.format("import xdsl.dialects.builtin, xdsl.parser, xdsl.printer")], None),
        "python importing the dialects mlp.mlir uses": ([py, "-c", floor.format(dialects)], None),
    }
    if a.parts:
        for label, code, lazy in (("all parts", True, "fast_start.LAZY"), ("no code reuse", False, "fast_start.LAZY"), ("no lazy math", True, "frozenset()"), ("neither", False, "frozenset()")):
            cases[f"(parts) cold, {label}"] = ([py, "-c", _PARTS.format(code=code, lazy=lazy), src, *flags], cold)
    if a.compare_with:
        other = str(Path(a.compare_with).resolve())
        compileall.compile_dir(other, quiet=1)
        cases["(compared tree) shardc-opt mlp.mlir, cold"] = ([py, "-c", _OTHER_TREE.format(root=other), src, *flags], cold)
    mlir_opt = find_mlir_opt()
    if mlir_opt:
        pipeline = "--pass-pipeline=builtin.module(func.func(sharding-propagation,shard-partition))"
        cases["mlir-opt mlp.mlir (propagate+partition)"] = ([mlir_opt, src, pipeline, "-o", "/dev/null"], _env(mlir_opt))
    times = paired(cases, a.runs)
    print(f"{a.runs} interleaved runs each; median wall / CPU seconds per process, least CPU")
    med: dict[str, tuple[float, float]] = {}
    least: dict[str, float] = {}
    for name, t in times.items():
        wall, cpu = statistics.median(w for _, w in t), statistics.median(c for c, _ in t)
        med[name] = (wall, cpu)
        least[name] = min(c for c, _ in t)
        print(f"  {name:46s} {wall:6.3f} / {cpu:6.3f}   {least[name]:6.3f}")
    if mlir_opt:
        (w2, c2) = med["mlir-opt mlp.mlir (propagate+partition)"]
        for key in ("shardc-opt mlp.mlir, cold", "shardc-opt mlp.mlir, result cache hit"):
            w1, c1 = med[key]
            print(f"ratio {key} / mlir-opt: {w1 / w2:.1f}x wall, {c1 / c2:.1f}x CPU")
    if a.compare_with:
        (w1, c1), (w2, c2) = med["shardc-opt mlp.mlir, cold"], med["(compared tree) shardc-opt mlp.mlir, cold"]
        l1, l2 = least["shardc-opt mlp.mlir, cold"], least["(compared tree) shardc-opt mlp.mlir, cold"]
        print(f"this tree / compared tree, cold: {w1 / w2:.2f}x wall, {c1 / c2:.2f}x CPU (median), {l1 / l2:.2f}x least CPU")
    if a.parts:
        for key in ("no code reuse", "no lazy math", "neither"):
            pairs = [o / b for (o, _), (b, _) in zip(times[f"(parts) cold, {key}"], times["(parts) cold, all parts"])]
            print(f"(parts) {key} / all parts, CPU, per round: median {statistics.median(pairs):.3f}x (range {min(pairs):.3f}-{max(pairs):.3f})")
    scratch.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
