"""Compile time of `shard-to-mpi-pipeline` against mlir-opt 22.1.8 running the stages it
has (sharding-propagation, shard-partition, canonicalize, cse, convert-shard-to-mpi,
canonicalize; mlir-opt has no shard-simplify pass).

1. The ratio: `shardc-opt file --shard-to-mpi-pipeline` and `mlir-opt` on the same
   2,000-op file, both as command lines reading and printing it (start-up included),
   interleaved (the order alternating), CPU seconds of the child (user + system, so a
   busy machine skews both alike), median of the repeats.
   Both trees are byte-compiled first (`compileall`), as an installed package is: where
   PYTHONDONTWRITEBYTECODE is set, an editable tree would otherwise compile every
   module from source in every process (about 6% of a run), and two trees would differ.
2. The scaling: shardc in-process, CPU seconds of parse, verify, each stage, the final
   verify and printing at 500 to 8,000 ops, as microseconds per op (flat columns mean
   linear), with mlir-opt's process time per size for the ratio at each size.

3. With `--gpt N_LAYER`: the GPT training step's pipeline instead (the module
   `shardc.training.step.build_step_module` makes, n_embd 768, 12 heads, block 256,
   vocab 512, batch 8, a 2x1 grid with ZeRO, run through `shardc.training.spmd`'s
   PIPELINE as the trainer compiles it), CPU seconds per stage in a fresh process per
   run, medians, interleaved with `--compare-with`'s tree. All `linalg.generic`.

    python bench/pipeline_compile.py [--ops 2000] [--repeats 5] [--sizes 500,1000,2000,4000,8000]
    python bench/pipeline_compile.py --gpt 12 [--repeats 3] [--compare-with DIR]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

MLIR_STAGES = (
    "builtin.module(func.func(sharding-propagation,shard-partition),canonicalize,cse,"
    "convert-shard-to-mpi,canonicalize)"
)


def program(n_ops: int) -> str:
    """An MLP-like chain on a 4-device grid: each layer is tensor.empty + linalg.fill +
    linalg.matmul with the weight split by columns then rows (Megatron style), so the
    pipeline inserts an all_reduce every second layer."""
    lines = [
        "shard.grid @grid(shape = 4)",
        "func.func @chain(%x: tensor<16x32xf32>) -> tensor<16x32xf32> {",
        "  %cols = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding",
        "  %rows = shard.sharding @grid split_axes = [[0], []] : !shard.sharding",
        "  %repl = shard.sharding @grid split_axes = [[]] : !shard.sharding",
        "  %zero = arith.constant 0.0 : f32",
        "  %w1 = arith.constant dense<0.5> : tensor<32x64xf32>",
        "  %w2 = arith.constant dense<0.25> : tensor<64x32xf32>",
        "  %w1s = shard.shard %w1 to %cols : tensor<32x64xf32>",
        "  %w2s = shard.shard %w2 to %rows : tensor<64x32xf32>",
    ]
    prev, ops, k = "%x", 10, 0
    while ops < n_ops - 2:
        lines += [
            f"  %e{k} = tensor.empty() : tensor<16x64xf32>",
            f"  %f{k} = linalg.fill ins(%zero : f32) outs(%e{k} : tensor<16x64xf32>) -> tensor<16x64xf32>",
            f"  %h{k} = linalg.matmul ins({prev}, %w1s : tensor<16x32xf32>, tensor<32x64xf32>) outs(%f{k} : tensor<16x64xf32>) -> tensor<16x64xf32>",
            f"  %g{k} = tensor.empty() : tensor<16x32xf32>",
            f"  %i{k} = linalg.fill ins(%zero : f32) outs(%g{k} : tensor<16x32xf32>) -> tensor<16x32xf32>",
            f"  %y{k} = linalg.matmul ins(%h{k}, %w2s : tensor<16x64xf32>, tensor<64x32xf32>) outs(%i{k} : tensor<16x32xf32>) -> tensor<16x32xf32>",
            f"  %r{k} = shard.shard %y{k} to %repl : tensor<16x32xf32>",
        ]
        prev, ops, k = f"%r{k}", ops + 7, k + 1
    lines += [f"  return {prev} : tensor<16x32xf32>", "}"]
    return "\n".join(lines) + "\n"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cpu(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run of `cmd`; exits if it fails."""
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    # time compiles: shardc-opt's result cache would answer a repeat from disk, unless
    # the caller's env says what it wants (bench/startup.py times a hit on purpose)
    env = {**os.environ, "SHARDC_CACHE": "0"} if env is None else {"SHARDC_CACHE": "0", **env}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall, cpu = time.perf_counter() - wall0, _children_cpu() - cpu0
    if done.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{done.stderr[-2000:]}")
    return cpu, wall


def paired(cases: dict[str, tuple[list[str], dict[str, str] | None]], repeats: int) -> dict[str, list[tuple[float, float]]]:
    """Each case run `repeats` times, interleaved, the order reversed every other round."""
    names = list(cases)
    times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for k in range(repeats):
        for name in names if k % 2 == 0 else names[::-1]:
            times[name].append(run_cpu(*cases[name]))
    return times


def shardc_opt() -> list[str]:
    """The installed `shardc-opt` script next to this interpreter (not a version
    manager's shim, which adds its own start-up), else the module."""
    here = Path(sys.executable).parent / "shardc-opt"
    if here.is_file():
        return [str(here)]
    found = shutil.which("shardc-opt")
    return [found] if found else [sys.executable, "-m", "shardc.tools.opt"]


def stage_times(text: str) -> list[tuple[str, float]]:
    """CPU seconds of each step of one in-process compile, as shardc-opt runs them."""
    from shardc.context import make_context
    from shardc.ir import diagnostics
    from shardc.ir.diagnostics import DiagnosticEngine
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import print_module
    from shardc.ir.verifier import verify
    from shardc.passes.pipelines import ShardToMPIPipelinePass

    ctx = make_context()
    out: list[tuple[str, float]] = []
    clock = time.process_time
    with diagnostics.engine_scope(DiagnosticEngine(stream=sys.stderr)):
        t = clock()
        module = LocatingParser(ctx, text, "bench.mlir").parse_module()
        out.append(("parse", clock() - t))
        t = clock()
        assert verify(module)
        out.append(("verify", clock() - t))
        for stage in ShardToMPIPipelinePass().stages():
            t = clock()
            stage.apply(ctx, module)
            out.append((stage.name, clock() - t))
        t = clock()
        assert verify(module)
        out.append(("verify", clock() - t))
        t = clock()
        print_module(module, StringIO())
        out.append(("print", clock() - t))
    return out


def gpt_stage_times(n_layer: int) -> dict[str, float]:
    """CPU seconds of each stage of the GPT training step's pipeline (in this process)."""
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig
    from shardc.training.mesh import make_grid
    from shardc.training.optimizer import AdamWConfig
    from shardc.training.pipeline import PIPELINE, run_pipeline
    from shardc.training.step import Sharded, build_step_module

    cfg = GPTConfig(n_layer=n_layer, n_head=12, n_embd=768, block_size=256, vocab_size=512)
    sharded = Sharded(make_grid(2, 1), GPT_PLAN, ShardingPolicy(1, zero=True, fsdp=False))
    clock = time.process_time
    t = clock()
    module = build_step_module(cfg, 8, "float32", AdamWConfig(), sharded)
    out = {"build": clock() - t, "ops": float(sum(1 for _ in module.walk()))}
    for i, entry in enumerate(PIPELINE):
        t = clock()
        run_pipeline(module, (entry,))
        out[f"{i}:{entry.split('{')[0]}"] = clock() - t
    return out


def gpt_compare(n_layer: int, repeats: int, compare_with: str | None) -> None:
    """`gpt_stage_times` in a fresh process per run, this tree and `compare_with`'s
    interleaved; per-stage medians."""
    trees = {"this tree": None} | ({"compared": str(Path(compare_with).resolve())} if compare_with else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    names = list(trees)
    for k in range(repeats):
        for name in names if k % 2 == 0 else names[::-1]:
            env = dict(os.environ)
            if trees[name] is not None:
                env["PYTHONPATH"] = trees[name]  # type: ignore[assignment]
            done = subprocess.run(
                [sys.executable, __file__, "--gpt-child", str(n_layer)], capture_output=True, text=True, env=env
            )
            if done.returncode != 0:
                sys.exit(f"GPT step run failed:\n{done.stderr[-2000:]}")
            runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = runs[names[0]][0]
    stages = [k for k in first if k not in ("build", "ops")]
    print(f"GPT step pipeline: n_layer {n_layer}, {int(first['ops'])} ops, {repeats} runs each (CPU s, medians)")
    print(f"{'stage':24s}" + "".join(f"{n:>12s}" for n in names))
    med = {n: {k: statistics.median(r[k] for r in runs[n]) for k in first} for n in names}
    for k in stages:
        print(f"{k.split(':', 1)[1]:24s}" + "".join(f"{med[n][k]:12.3f}" for n in names))
    totals = {n: sum(med[n][k] for k in stages) for n in names}
    print(f"{'pipeline total':24s}" + "".join(f"{totals[n]:12.3f}" for n in names))
    print(f"{'(module build)':24s}" + "".join(f"{med[n]['build']:12.3f}" for n in names))
    if compare_with:
        print(f"this tree / compared tree: {totals['this tree'] / totals['compared']:.2f}x CPU")


def ops_of(text: str) -> int:
    return text.count(" = ") + 1


def main() -> int:
    from shardc.testing.oracle import _env, find_mlir_opt  # pyright: ignore[reportPrivateUsage]

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sizes", default="500,1000,2000,4000,8000", help="op counts of the scaling table ('' for none)")
    p.add_argument("--compare-with", metavar="DIR", help="a shardc source tree (say `git archive OLD shardc | tar -x -C DIR`) whose shardc-opt runs alongside, through PYTHONPATH")
    p.add_argument("--gpt", type=int, metavar="N_LAYER", help="time the GPT training step's pipeline instead")
    p.add_argument("--gpt-child", type=int, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.gpt_child is not None:
        print(json.dumps(gpt_stage_times(a.gpt_child)))
        return 0
    if a.gpt is not None:
        gpt_compare(a.gpt, a.repeats, a.compare_with)
        return 0
    mlir_opt = find_mlir_opt()
    ours_cmd = shardc_opt()
    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "shardc"), quiet=1)
    if a.compare_with:
        compileall.compile_dir(str(Path(a.compare_with).resolve()), quiet=1)
    with tempfile.TemporaryDirectory() as d:
        def files(n: int) -> tuple[str, str]:
            text = program(n)
            src = Path(d) / f"chain{n}.mlir"
            src.write_text(text)
            return text, str(src)

        text, src = files(a.ops)
        cases: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "shardc-opt": ([*ours_cmd, src, "--shard-to-mpi-pipeline", "-o", os.devnull], None),
        }
        if a.compare_with:
            env = {**os.environ, "PYTHONPATH": str(Path(a.compare_with).resolve())}
            cases["compared"] = ([*ours_cmd, src, "--shard-to-mpi-pipeline", "-o", os.devnull], env)
        if mlir_opt:
            cases["mlir-opt"] = ([mlir_opt, src, f"--pass-pipeline={MLIR_STAGES}", "-o", os.devnull], _env(mlir_opt))
        times = paired(cases, a.repeats)
        med = {n: (statistics.median(c for c, _ in t), statistics.median(w for _, w in t)) for n, t in times.items()}
        print(f"program: {ops_of(text)} ops, {a.repeats} interleaved runs each (CPU s / wall s, medians)")
        for name, (cpu, wall) in med.items():
            print(f"  {name:12s} {cpu:7.3f} / {wall:7.3f}")
        if mlir_opt:
            print(f"ratio shardc-opt / mlir-opt (shard-simplify is ours only): "
                  f"{med['shardc-opt'][0] / med['mlir-opt'][0]:.1f}x CPU, {med['shardc-opt'][1] / med['mlir-opt'][1]:.1f}x wall")
        else:
            print("mlir-opt not found: no ratio")
        if a.compare_with:
            print(f"this tree / compared tree: {med['shardc-opt'][0] / med['compared'][0]:.2f}x CPU")

        sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
        if not sizes:
            return 0
        rows: list[tuple[int, list[tuple[str, float]], float | None]] = []
        stage_times(program(60))  # load every dialect and pass first
        for n in sizes:
            text_n, src_n = files(n)
            steps = stage_times(text_n)
            theirs = None
            if mlir_opt:
                theirs = run_cpu([mlir_opt, src_n, f"--pass-pipeline={MLIR_STAGES}", "-o", os.devnull], _env(mlir_opt))[0]
            rows.append((ops_of(text_n), steps, theirs))
        names = [name for name, _ in rows[0][1]]
        print("\nscaling, shardc in-process: CPU microseconds per input op (flat = linear)")
        header = "".join(f"{n[:12]:>13s}" for n in names)
        print(f"{'ops':>6s}{header}{'total':>10s}{'mlir-opt':>10s}{'ratio':>7s}")
        for ops, steps, theirs in rows:
            total = sum(s for _, s in steps)
            cells = "".join(f"{s / ops * 1e6:13.1f}" for _, s in steps)
            extra = f"{theirs / ops * 1e6:10.1f}{total / theirs:6.1f}x" if theirs else ""
            print(f"{ops:6d}{cells}{total / ops * 1e6:10.1f}{extra}")
        print("(mlir-opt: its whole process per op; ratio: our in-process total over it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
