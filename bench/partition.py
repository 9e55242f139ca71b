"""shard-partition: speed against mlir-opt, and the bytes the resharding planner moves.

1. Time. A generated fully annotated program of about 2,000 ops (`gen_exec_programs`,
   1-D grids and no halos, which mlir-opt 22.1.8 partitions) is partitioned by shardc
   in-process (shard-partition, then shard-simplify, each timed; parsing is outside the
   timing) and by `mlir-opt --pass-pipeline=builtin.module(func.func(shard-partition))`
   on the same file, timed by its own `--mlir-timing` report (the Partition pass alone).
   mlir-opt has no shard-simplify, so the ratio compares shard-partition alone.

2. Bytes moved per rank (`resharding.bytes_moved`, f32). On every resharding upstream
   does in one pattern (1-D grids: split, unsplit or move the split axis), upstream's
   cost is computed here from its collective (all_slice 0, all_gather (n-1) x local,
   all_to_all (n-1)/n x local) and must equal the cost of `plan_resharding`'s plan. On
   reshardings only shardc does (grids of several axes), the planner's plans are set
   against the plan "gather to replicated, then slice".

    python bench/partition.py [--ops 2000] [--runs 3] [--pairs 3000]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import tempfile
import time
from math import prod

from xdsl.parser import Parser

from shardc.context import make_context
from shardc.dialects.shard import Sharding
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.resharding import bytes_moved, plan_resharding
from shardc.passes.simplify import ShardSimplifyPass
from shardc.testing.gen_exec_programs import GRIDS_1D, count_ops, generate_exec_program
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

PIPELINE = "--pass-pipeline=builtin.module(func.func(shard-partition))"
F32 = 4

# ---- 1. time ----------------------------------------------------------------------------


def program(target_ops: int) -> str:
    """The smallest generated program (seed 5, 1-D grids, no halos) with >= target ops."""
    n = max(1, target_ops // 8)
    while True:
        text = generate_exec_program(5, num_ops=n, grids=GRIDS_1D, halos=False)
        if count_ops(text) >= target_ops:
            return text
        n += max(1, (target_ops - count_ops(text)) // 8)


def shardc_seconds(text: str, runs: int) -> tuple[float, float]:
    partition, simplify = [], []
    for _ in range(runs):
        ctx = make_context()
        module = Parser(ctx, text).parse_module()
        t0 = time.perf_counter()
        ShardPartitionPass().apply(ctx, module)
        t1 = time.perf_counter()
        ShardSimplifyPass().apply(ctx, module)
        t2 = time.perf_counter()
        partition.append(t1 - t0)
        simplify.append(t2 - t1)
    return statistics.median(partition), statistics.median(simplify)


def mlir_opt_seconds(text: str, runs: int) -> float:
    """The wall time of mlir-opt's Partition pass, from its own `--mlir-timing` report."""
    times = []
    with tempfile.NamedTemporaryFile("w", suffix=".mlir") as f:
        f.write(text)
        f.flush()
        for _ in range(runs):
            result = run_mlir_opt(PIPELINE, "--mlir-timing", "--mlir-timing-display=list", "-o", "/dev/null", f.name)
            assert result.returncode == 0, result.stderr[:2000]
            line = next(ln for ln in result.stderr.splitlines() if ln.strip().endswith("  Partition"))
            times.append(float(line.split()[0]))
    return max(statistics.median(times), 1e-6)


# ---- 2. bytes ---------------------------------------------------------------------------

Axes = tuple[tuple[int, ...], ...]


def layouts(rank: int, num_axes: int) -> list[Axes]:
    """Every split-axes assignment of a rank-`rank` tensor on a grid of `num_axes` axes."""
    out: set[Axes] = set()
    for where in itertools.product(range(-1, rank), repeat=num_axes):
        for order in itertools.permutations(range(num_axes)):
            dims: list[list[int]] = [[] for _ in range(rank)]
            for axis in order:
                if where[axis] >= 0:
                    dims[where[axis]].append(axis)
            out.add(tuple(tuple(d) for d in dims))
    return sorted(out)


def local_elements(shape: tuple[int, ...], axes: Axes, grid: tuple[int, ...]) -> int:
    return prod(s // prod(grid[a] for a in sub) for s, sub in zip(shape, axes))


def upstream_bytes(shape: tuple[int, ...], src: Axes, tgt: Axes, n: int) -> float:
    """Upstream's one collective on a 1-D grid of n devices."""
    local = local_elements(shape, src, (n,))
    split_src = [d for d, a in enumerate(src) if a]
    split_tgt = [d for d, a in enumerate(tgt) if a]
    if not split_src:
        return 0.0  # all_slice
    if not split_tgt:
        return float(local * (n - 1) * F32)  # all_gather
    return local * (n - 1) / n * F32  # all_to_all


def common_pairs() -> tuple[int, float, float, list[str]]:
    count, ours_total, theirs_total, unequal = 0, 0.0, 0.0, []
    for n in (2, 4, 8):
        for rank in (1, 2, 3):
            shape = (16,) * rank
            for src, tgt in itertools.permutations(layouts(rank, 1), 2):
                plan = plan_resharding(Sharding("g", src), Sharding("g", tgt), shape, (n,))
                ours = bytes_moved(plan, "float32")
                theirs = upstream_bytes(shape, src, tgt, n)
                count += 1
                ours_total += ours
                theirs_total += theirs
                if ours != theirs or len(plan) != 1:
                    unequal.append(f"grid {n}, {src} -> {tgt}: shardc {ours} B in {len(plan)} steps, upstream {theirs} B")
    return count, ours_total, theirs_total, unequal


def shardc_only_pairs(max_pairs: int, rng: random.Random) -> list[tuple[str, int, float, float, float]]:
    rows = []
    for grid in ((2, 2), (2, 4), (4, 2), (2, 2, 2)):
        for rank in (2, 3):
            shape = (16,) * rank
            all_layouts = layouts(rank, len(grid))
            pairs = list(itertools.permutations(all_layouts, 2))
            rng.shuffle(pairs)
            pairs = pairs[:max_pairs]
            ours = naive = steps = 0.0
            for src, tgt in pairs:
                plan = plan_resharding(Sharding("g", src), Sharding("g", tgt), shape, grid)
                ours += bytes_moved(plan, "float32")
                steps += len(plan)
                naive += (prod(shape) - local_elements(shape, src, grid)) * F32
            label = f"grid {'x'.join(map(str, grid))}, rank {rank}"
            rows.append((label, len(pairs), ours / len(pairs), naive / len(pairs), steps / len(pairs)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3000, help="reshardings sampled per grid and rank")
    args = parser.parse_args()

    text = program(args.ops)
    part, simp = shardc_seconds(text, args.runs)
    print(f"program of {count_ops(text)} ops: shardc shard-partition {part * 1e3:.1f} ms, shard-simplify {simp * 1e3:.1f} ms", end="")
    if find_mlir_opt() is not None:
        theirs = mlir_opt_seconds(text, args.runs)
        print(f"; mlir-opt shard-partition {theirs * 1e3:.1f} ms; ratio shardc/mlir-opt (partition) {part / theirs:.1f}x, (partition+simplify) {(part + simp) / theirs:.1f}x")
    else:
        print(" (mlir-opt not found)")

    count, ours, theirs, unequal = common_pairs()
    verdict = "equal on every pair" if not unequal else f"{len(unequal)} DIFFER"
    print(f"reshardings upstream does in one pattern: {count} pairs, bytes/rank shardc {ours:.0f} vs upstream {theirs:.0f} ({verdict})")
    for line in unequal[:10]:
        print("  " + line)

    print("reshardings only shardc does (mean bytes received per rank, f32, dims of 16):")
    print(f"  {'case':22s} {'pairs':>6s} {'planner':>10s} {'gather+slice':>13s} {'ratio':>6s} {'steps':>6s}")
    for label, n, mine, naive, steps in shardc_only_pairs(args.pairs, random.Random(0)):
        ratio = mine / naive if naive else 1.0
        print(f"  {label:22s} {n:6d} {mine:10.1f} {naive:13.1f} {ratio:6.2f} {steps:6.2f}")


if __name__ == "__main__":
    main()
