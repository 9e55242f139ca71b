"""Compile time of `shard-to-mpi-pipeline` on a 2,000-op program against mlir-opt
22.1.8 running the stages it has (sharding-propagation, shard-partition, canonicalize,
cse, convert-shard-to-mpi, canonicalize; mlir-opt has no shard-simplify pass), both as
command lines reading and printing the same file (startup included), median of
repeats. Prints the shardc-opt/mlir-opt ratio and the per-stage split of ours.

    python bench/pipeline_compile.py [--ops 2000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
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


def timed(cmd: list[str], repeats: int) -> tuple[float, subprocess.CompletedProcess]:
    times, last = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        last = subprocess.run(cmd, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if last.returncode != 0:
            sys.exit(f"{cmd[0]} failed:\n{last.stderr[-2000:]}")
    assert last is not None
    return statistics.median(times), last


def stage_times(text: str) -> list[tuple[str, float]]:
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.passes.pipelines import ShardToMPIPipelinePass

    ctx = make_context()
    module = LocatingParser(ctx, text, "bench.mlir").parse_module()
    out = []
    for stage in ShardToMPIPipelinePass().stages():
        t0 = time.perf_counter()
        stage.apply(ctx, module)
        out.append((stage.name, time.perf_counter() - t0))
    return out


def main() -> int:
    from shardc.testing.oracle import find_mlir_opt

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    text = program(a.ops)
    mlir_opt = find_mlir_opt()
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "chain.mlir"
        src.write_text(text)
        n_ops = text.count(" = ") + 1
        ours, _ = timed(["shardc-opt", str(src), "--shard-to-mpi-pipeline", "-o", str(Path(d) / "ours.mlir")], a.repeats)
        print(f"program: {n_ops} ops; shardc-opt --shard-to-mpi-pipeline: {ours:.2f} s")
        for name, s in stage_times(text):
            print(f"  {name:22s} {s * 1e3:8.1f} ms")
        if mlir_opt is None:
            print("mlir-opt not found: no ratio")
            return 0
        from shardc.testing.oracle import run_mlir_opt

        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            r = run_mlir_opt(str(src), f"--pass-pipeline={MLIR_STAGES}", "-o", str(Path(d) / "theirs.mlir"), timeout=600)
            times.append(time.perf_counter() - t0)
            if r.returncode != 0:
                sys.exit(f"mlir-opt failed:\n{r.stderr[-2000:]}")
        theirs = statistics.median(times)
        print(f"mlir-opt (same stages but shard-simplify): {theirs:.3f} s")
        print(f"ratio shardc-opt / mlir-opt: {ours / theirs:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
