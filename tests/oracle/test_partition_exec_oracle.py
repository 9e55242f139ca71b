"""mlir-opt 22.1.8's partition, executed: the generated programs of the execution test
(`gen_exec_programs`) go through `mlir-opt --sharding-propagation --shard-partition`; its
output runs on shardc's runtime on simulated ranks and must agree with the unsharded run,
as shardc's own partition must.

22.1.8 reshards only on 1-D grids (it asserts otherwise) and handles few halo changes, so
the programs here are on 1-D grids, half of them without halos. Where mlir-opt fails (an
assertion of one of its known limits), the program is counted and skipped; any other
failure of mlir-opt, and any disagreement, fails the test.

SHARDC_ORACLE_EXEC_PROGRAMS sets the number of programs (default 120).
"""

from __future__ import annotations

import collections
import os
from dataclasses import dataclass, field

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from shardc.testing.gen_exec_programs import GRIDS_1D, generate_exec_program
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt
from shardc.tools.verification import verify

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found: pip install -e '.[oracle]' or set SHARDC_MLIR_OPT"),
]

NUM_PROGRAMS = int(os.environ.get("SHARDC_ORACLE_EXEC_PROGRAMS", "120"))
PIPELINE = "--pass-pipeline=builtin.module(func.func(sharding-propagation,shard-partition))"

# Assertions of 22.1.8 where trunk (and shardc's resharding planner) go further.
KNOWN_LIMITS = (
    "Only 1D grides are currently supported",
    "Did not find any pattern to apply",
    "srcHaloSizes.empty() || srcHaloSizes.size() == tgtHaloSizes.size()",
)


@dataclass(frozen=True)
class UseText(ModulePass):
    """Replaces the module by a parsed text (mlir-opt's output) inside verify's pipeline."""

    name = "test-use-mlir-opt-output"
    text: str = field(default="")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from xdsl.parser import Parser

        from shardc.context import make_context

        new = Parser(make_context(), self.text, "mlir-opt-output").parse_module()
        for old in list(op.body.block.ops):
            old.detach()
            old.erase(safe_erase=False)
        for moved in list(new.body.block.ops):
            moved.detach()
            op.body.block.add_op(moved)


def _program(seed: int) -> str:
    return generate_exec_program(seed, grids=GRIDS_1D, halos=seed % 2 == 1)


def _limit(stderr: str) -> str | None:
    return next((limit for limit in KNOWN_LIMITS if limit in stderr), None)


@pytest.mark.slow
def test_mlir_opt_partition_runs_and_agrees() -> None:
    counts: collections.Counter[str] = collections.Counter()
    problems: list[str] = []
    for seed in range(NUM_PROGRAMS):
        text = _program(seed)
        result = run_mlir_opt(PIPELINE, stdin=text)
        if result.returncode:
            limit = _limit(result.stderr)
            if limit is None:
                problems.append(f"seed {seed}: mlir-opt failed outside its known limits:\n{result.stderr[:2000]}\n{text}")
            counts[f"mlir-opt limit: {limit}"] += 1
            continue
        report = verify(text, seed=seed, pipeline=[UseText(text=result.stdout)], name=f"seed{seed}.mlir")
        counts[report.status] += 1
        if not report.ok:
            problems.append(f"seed {seed}: {report.summary()}\nprogram:\n{text}\nmlir-opt's partition:\n{result.stdout}")
    print(f"mlir-opt partition executed: {dict(counts)}")
    assert not problems, "\n\n".join(problems)
    assert counts["ok"] >= NUM_PROGRAMS // 2, dict(counts)


@pytest.mark.slow
def test_shardc_partition_agrees_where_mlir_opt_hits_its_limits() -> None:
    """The programs 22.1.8 cannot partition (multi-axis grids, halo changes): shardc's
    partition runs them correctly."""
    seen = 0
    for seed in range(40):
        text = generate_exec_program(seed)
        result = run_mlir_opt(PIPELINE, stdin=text)
        if result.returncode == 0 or _limit(result.stderr) is None:
            continue
        seen += 1
        report = verify(text, seed=seed)
        assert report.ok, f"seed {seed}: {report.summary()}"
    assert seen >= 10
