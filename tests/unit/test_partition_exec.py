"""Differential test of shard-partition by execution: random fully annotated programs
(`shardc.testing.gen_exec_programs`) run unsharded on one device and partitioned on
simulated ranks (every third one also MPI-lowered) on the same random inputs; every
result must agree. A program partition rejects must do so with a diagnostic (counted and
printed); a crash or a mismatch fails the test with the seed and the report.

SHARDC_EXEC_PROGRAMS sets the number of programs (default 300, well under a minute on an
idle core); SHARDC_EXEC_SEED shifts the seeds.
"""

from __future__ import annotations

import collections
import os
import random
from dataclasses import dataclass

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from shardc.testing.gen_exec_programs import GRIDS, ExecProgramBuilder, count_ops, generate_exec_program
from shardc.tools.verification import PARTITION_PIPELINE, verify

NUM_PROGRAMS = int(os.environ.get("SHARDC_EXEC_PROGRAMS", "300"))
FIRST_SEED = int(os.environ.get("SHARDC_EXEC_SEED", "0"))
BATCH = 25

COLLECTIVES: collections.Counter[str] = collections.Counter()
STATUSES: collections.Counter[str] = collections.Counter()


@dataclass(frozen=True)
class CountCollectives(ModulePass):
    """Records which shard collectives partition produced (what the programs exercise)."""

    name = "test-count-collectives"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            if o.name.startswith("shard.") and o.name not in ("shard.grid", "shard.sharding", "shard.shard"):
                COLLECTIVES[o.name] += 1


def _batches() -> list[range]:
    seeds = range(FIRST_SEED, FIRST_SEED + NUM_PROGRAMS)
    return [seeds[i : i + BATCH] for i in range(0, len(seeds), BATCH)]


@pytest.mark.slow
@pytest.mark.parametrize("seeds", _batches(), ids=lambda r: f"seeds{r.start}-{r.stop - 1}")
def test_partitioned_programs_match_unsharded(seeds: range) -> None:
    problems: list[str] = []
    rejected: list[str] = []
    for seed in seeds:
        text = generate_exec_program(seed)
        stage = "all" if seed % 3 == 0 else "partitioned"
        report = verify(text, seed=seed, stage=stage, pipeline=[*PARTITION_PIPELINE, CountCollectives()], name=f"seed{seed}.mlir")
        STATUSES[report.status] += 1
        if report.status == "rejected":
            rejected.append(f"seed {seed}: {report.message.splitlines()[0]}")
        elif report.status != "ok":
            problems.append(f"seed {seed} ({report.status}):\n{report.summary()}\n{text}")
    if rejected:
        print(f"{len(rejected)} program(s) rejected with a diagnostic:\n" + "\n".join(rejected))
    assert not problems, "\n\n".join(problems)


@pytest.mark.slow
def test_zz_coverage_of_the_generated_programs() -> None:
    """After the batches: the programs exercised every collective partition emits, and
    most of them partitioned (rejections are printed above)."""
    if sum(STATUSES.values()) < 100:
        pytest.skip("needs the batches of this module to run first (at least 100 programs)")
    print(f"statuses: {dict(STATUSES)}; collectives: {dict(COLLECTIVES)}")
    assert STATUSES["ok"] >= 0.9 * sum(STATUSES.values())
    for name in ("shard.all_reduce", "shard.all_gather", "shard.all_slice", "shard.all_to_all", "shard.update_halo"):
        assert COLLECTIVES[name] > 0, f"no {name} in {dict(COLLECTIVES)}"


# ---- the generator ---------------------------------------------------------------------


def test_generator_is_deterministic_and_varied() -> None:
    assert generate_exec_program(7) == generate_exec_program(7)
    texts = [generate_exec_program(s) for s in range(60)]
    assert len(set(texts)) == 60
    joined = "\n".join(texts)
    for needle in (
        "linalg.matmul", "linalg.batch_matmul", "linalg.reduce", "linalg.broadcast", "linalg.transpose",
        "linalg.fill", "tosa.add", "halo_sizes", "arith.mulf", "arith.maximumf", "arith.minimumf",
        "xi32>", '"reduction"', "annotate_for_users",
    ):  # fmt: skip
        assert needle in joined, needle
    grids = {line.strip() for t in texts for line in t.splitlines() if "shard.grid" in line}
    assert len(grids) >= 6


def test_every_split_divides_evenly() -> None:
    for grid in GRIDS:
        builder = ExecProgramBuilder(random.Random(0), grid)
        for axes in [(a,) for a in range(len(grid))] + [tuple(range(len(grid)))]:
            size = 1
            for a in axes:
                size *= grid[a]
            assert builder.unit % size == 0


@pytest.mark.parametrize("seed", range(8))
def test_programs_are_fully_annotated(seed: int) -> None:
    """Partition alone (no propagation) accepts them: every op is annotated as trunk's
    partition requires, and the result still matches."""
    report = verify(generate_exec_program(seed), pipeline="shard-partition", seed=seed)
    assert report.ok, report.summary()


def test_large_program_for_the_benchmark() -> None:
    text = generate_exec_program(1, num_ops=40)
    assert count_ops(text) > 300
    assert sum(1 for line in text.splitlines() if "shard.shard" in line) > 80
