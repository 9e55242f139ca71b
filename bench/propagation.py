"""sharding-propagation speed: shardc (in-process) against mlir-opt on a generated chain of
linalg ops annotated once at its start, and shardc's scaling with the chain length.

Times only the pass: shardc parses once per run outside the timing; mlir-opt's time is
that of `mlir-opt --pass-pipeline=...(sharding-propagation)` minus that of a plain
`mlir-opt` parse + print of the same file. Not a test.

    python bench/propagation.py [--ops 2000] [--runs 3] [--scaling 500,1000,2000,4000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from xdsl.parser import Parser

from shardc.context import make_context
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_programs import generate_chain
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

PIPELINE = "--pass-pipeline=builtin.module(func.func(sharding-propagation))"


def shardc_seconds(text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        ctx = make_context()
        module = Parser(ctx, text).parse_module()
        start = time.perf_counter()
        ShardingPropagationPass().apply(ctx, module)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def mlir_opt_seconds(text: str, runs: int) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as f:
        f.write(text)
        f.flush()

        def timed(*args: str) -> float:
            start = time.perf_counter()
            result = run_mlir_opt(*args, f.name)
            assert result.returncode == 0, result.stderr
            return time.perf_counter() - start

        with_pass = statistics.median(timed(PIPELINE) for _ in range(runs))
        without = statistics.median(timed() for _ in range(runs))
    return max(with_pass - without, 1e-6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scaling", default="500,1000,2000,4000")
    args = parser.parse_args()

    text = generate_chain(args.ops)
    ours = shardc_seconds(text, args.runs)
    print(f"chain of {args.ops} linalg ops: shardc {ours * 1e3:.1f} ms", end="")
    if find_mlir_opt() is not None:
        theirs = mlir_opt_seconds(text, args.runs)
        print(f", mlir-opt {theirs * 1e3:.1f} ms, ratio shardc/mlir-opt {ours / theirs:.1f}x")
    else:
        print(" (mlir-opt not found)")

    print("shardc scaling (ops, ms, us/op):")
    base: tuple[int, float] | None = None
    for n in (int(v) for v in args.scaling.split(",")):
        seconds = shardc_seconds(generate_chain(n), args.runs)
        note = ""
        if base is not None:
            note = f"  x{seconds / base[1]:.2f} time for x{n / base[0]:.1f} ops"
        else:
            base = (n, seconds)
        print(f"  {n:6d} {seconds * 1e3:9.1f} {seconds / n * 1e6:8.1f}{note}")


if __name__ == "__main__":
    main()
