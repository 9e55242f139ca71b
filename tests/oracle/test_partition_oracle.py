"""Differential test of shard-partition against mlir-opt 22.1.8.

Random annotated programs go through `sharding-propagation{traversal=X}` and then
`shard-partition`, in mlir-opt and in shardc (in-process); where mlir-opt accepts a
program, the outputs must be equal after renaming SSA values. The programs come from the
propagation oracle's generator (`shardc.testing.gen_programs`), in a variant whose
arguments are annotated and whose splits divide evenly (`generate_partitionable`), so that
most of them can be partitioned at all.

A fix-up sits between the two passes, the same on both sides (`fix_annotations`): trunk's
partition wants every op fully annotated (tensor operands from `shard.shard ...
annotate_for_users`, results used by one `shard.shard` for the producer, also for
`func.return`), which propagation does not guarantee; 22.1.8 does not check it. The fix-up
adds the missing annotations with the sharding already there (replicated where there is
none) and erases dead ops, which changes nothing in 22.1.8's output.

Where mlir-opt fails, shardc must fail with a diagnostic too, unless mlir-opt hit one of
22.1.8's limits that trunk and our resharding planner go beyond (`LIMITS_OF_22_1_8`).

SHARDC_ORACLE_PROGRAMS sets the number of programs (default 340: about 110 are
compared; three minutes on two cores).
"""

from __future__ import annotations

import math
import os
import random
from io import StringIO

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.parser import Parser
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import ConstantLike

from shardc.context import make_context
from shardc.dialects.shard import GridOp, ShardingOp, ShardOp
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine, DiagnosticError
from shardc.ir.printer import module_to_string
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_programs import (
    ProgramBuilder,
    _type,
    _Value,
    generate_program,
    traversal_for,
)
from shardc.testing.normalize import normalize_ssa_names
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found"),
]

NUM_PROGRAMS = int(os.environ.get("SHARDC_ORACLE_PROGRAMS", "340"))

class PartitionableBuilder(ProgramBuilder):
    """The generator's programs, made for partitioning: every function argument is
    annotated for its producer (so it has a single use, a `shard.shard`), and annotations
    only split dimensions that divide evenly."""

    shape: tuple[int, ...] = ()

    def annotate(self, value: _Value, for_users: bool) -> _Value:
        self.shape = value.shape
        return super().annotate(value, for_users)

    def random_split_axes(self, rank: int) -> list[list[int]]:
        split = super().random_split_axes(rank)
        for dim, axes in enumerate(split):
            size = self.shape[dim] if dim < len(self.shape) else 1
            while axes and size % math.prod(self.grid_shape[a] for a in axes):
                axes.pop()
        return split

    def new_leaf(self, shape: tuple[int, ...]) -> _Value:
        kind = self.rng.random()
        if kind < 0.22:
            name = self.fresh("c")
            if kind < 0.15:
                self.lines.append(f"{name} = arith.constant dense<1.000000e+00> : {_type(shape)}")
            else:
                self.lines.append(f"{name} = tensor.splat {self.scalar()} : {_type(shape)}")
            return self.produced(_Value(name, shape))
        arg = _Value(f"%arg{len(self.args)}", shape)
        self.args.append(arg)
        value = self.annotate(arg, for_users=False)
        self.values.append(value)
        return value


def generate_partitionable(seed: int) -> str:
    """A random program on a grid of size-2 axes (so that the sizes 4 and 8 mostly
    split evenly), every argument annotated."""
    rng = random.Random(seed)
    grid_shape = (2,) * rng.choice((1, 1, 1, 2, 3))
    builder = PartitionableBuilder(
        rng, annotate_p=rng.choice((0.15, 0.3, 0.5)), grid_shape=grid_shape
    )
    body = builder.function("f", rng.randint(2, 8))
    grid = "x".join(map(str, grid_shape))
    return f"module {{\n  shard.grid @grid(shape = {grid})\n{body}\n}}\n"


def fix_annotations(module: ModuleOp) -> None:
    """Make propagation's output fully annotated as trunk's partition requires, without
    changing what 22.1.8 makes of it: dead ops (whose results propagation cannot annotate)
    are erased; tensor results propagation left without annotation (no annotation reached
    them) are annotated as replicated; returned tensors, operands defined by an annotation for the producer and
    results used only by an annotation for users get the missing annotation, with the same
    sharding."""
    erase_dead_ops(module)
    replicate_unannotated_results(module)
    annotate_returns_for_users(module)
    for op in list(module.walk()):
        if isinstance(op, ShardOp | func.ReturnOp) or op.has_trait(ConstantLike):
            continue
        for index, operand in enumerate(op.operands):
            owner = operand.owner
            if isinstance(owner, ShardOp) and not owner.for_users:
                for_users = ShardOp(operand, owner.sharding, annotate_for_users=True)
                Rewriter.insert_op(for_users, InsertPoint.before(op))
                op.operands[index] = for_users.result
    for op in list(module.walk()):
        if isinstance(op, ShardOp):
            continue
        for result in op.results:
            uses = list(result.uses)
            if len(uses) != 1 or not isinstance(result.type, TensorType):
                continue
            user = uses[0].operation
            if isinstance(user, ShardOp) and user.for_users:
                producer = ShardOp(result, user.sharding)
                Rewriter.insert_op(producer, InsertPoint.before(user))
                user.operands[0] = producer.result


def erase_dead_ops(module: ModuleOp) -> None:
    changed = True
    while changed:
        changed = False
        for op in reversed(list(module.walk())):
            if not op.results or any(r.uses for r in op.results):
                continue
            if isinstance(op, ShardOp) and not op.for_users:
                continue
            if op.parent_op() is None or not isinstance(op.parent_op(), func.FuncOp):
                continue
            Rewriter.erase_op(op)
            changed = True


def replicate_unannotated_results(module: ModuleOp) -> None:
    grid = next(op for op in module.walk() if isinstance(op, GridOp))
    for op in list(module.walk()):
        if isinstance(op, ShardOp) or not isinstance(op.parent_op(), func.FuncOp):
            continue
        for result in op.results:
            if not isinstance(result.type, TensorType) or not result.type.get_shape():
                continue
            uses = list(result.uses)
            if len(uses) == 1 and isinstance(uses[0].operation, ShardOp):
                continue
            sharding = ShardingOp(grid.sym_name.data, [[]])
            shard = ShardOp(result, sharding.result)
            Rewriter.insert_op([sharding, shard], InsertPoint.after(op))
            for use in uses:
                use.operation.operands[use.index] = shard.result


def annotate_returns_for_users(module: ModuleOp) -> None:
    """Give every returned tensor a `shard.shard` for users with its producer's sharding."""
    for op in module.walk():
        if not isinstance(op, func.ReturnOp):
            continue
        for index, value in enumerate(op.operands):
            owner = value.owner
            if not isinstance(value.type, TensorType) or not isinstance(owner, ShardOp):
                continue
            if owner.for_users or not value.type.get_shape():
                continue
            shard = ShardOp(value, owner.sharding, annotate_for_users=True)
            Rewriter.insert_op(shard, InsertPoint.before(op))
            op.operands[index] = shard.result


def _parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def shardc_pipeline(text: str, traversal: str, fix_returns: bool) -> str | None:
    """Our propagation, the return fix-up, our partition; None on a diagnostic."""
    engine = DiagnosticEngine(stream=StringIO())
    with diagnostics.engine_scope(engine):
        module = _parse(text)
        try:
            ShardingPropagationPass(traversal=traversal, complete=False).apply(make_context(), module)  # type: ignore[arg-type]
            if fix_returns:
                fix_annotations(module)
            ShardPartitionPass().apply(make_context(), module)
        except DiagnosticError:
            return None
        except Exception as e:  # noqa: BLE001 - any other exception is a bug
            raise AssertionError(f"shardc raised {type(e).__name__}: {e}") from e
        module.verify()
        return module_to_string(module)


def _mlir_opt(text: str | None, *args: str) -> tuple[str | None, str]:
    """mlir-opt's output (None when it fails) and its stderr."""
    if text is None:
        return None, ""
    result = run_mlir_opt(*args, stdin=text)
    return (result.stdout if result.returncode == 0 else None), result.stderr


def _fixed_up(text: str | None) -> str | None:
    if text is None:
        return None
    module = _parse(text)
    fix_annotations(module)
    return module_to_string(module)


def mlir_opt_pipeline(text: str, traversal: str) -> tuple[str | None, str]:
    """mlir-opt's propagation, our fix-up, mlir-opt's partition: output and stderr."""
    propagate = (
        f"--pass-pipeline=builtin.module(func.func(sharding-propagation{{traversal={traversal}}}))"
    )
    propagated, err = _mlir_opt(text, propagate)
    if propagated is None:
        return None, err
    return _mlir_opt(_fixed_up(propagated), PARTITION)


PARTITION = "--pass-pipeline=builtin.module(func.func(shard-partition))"

# mlir-opt 22.1.8 assertions where trunk (and shardc's planner) go further: resharding
# on grids of more than one axis, halo changes on other than the first dimension or
# from no halo to halos of another count.
LIMITS_OF_22_1_8 = (
    "Only 1D grides are currently supported",
    "srcHaloSizes.empty() || srcHaloSizes.size() == tgtHaloSizes.size()",
    "Index < Length",
    "Did not find any pattern to apply",
)


def compare(seeds: list[int], generate, fix: bool = True) -> tuple[int, list[str]]:
    """Number of programs both tools partitioned, and the disagreements."""
    compared = 0
    mismatches: list[str] = []
    for seed in seeds:
        traversal = traversal_for(seed)
        text = generate(seed)
        expected, stderr = mlir_opt_pipeline(text, traversal)
        got = shardc_pipeline(text, traversal, fix_returns=fix)
        if expected is None:
            if got is not None and not any(limit in stderr for limit in LIMITS_OF_22_1_8):
                mismatches.append(f"seed {seed}: mlir-opt failed, shardc succeeded")
            continue
        if got is None:
            mismatches.append(f"seed {seed}: shardc failed, mlir-opt succeeded")
            continue
        compared += 1
        if normalize_ssa_names(expected) != normalize_ssa_names(got):
            mismatches.append(f"seed {seed}: outputs differ")
    return compared, mismatches


@pytest.mark.slow
def test_partition_matches_mlir_opt() -> None:
    """Partitionable programs: equal outputs, and at least 100 programs compared."""
    compared, mismatches = compare(list(range(NUM_PROGRAMS)), generate_partitionable)
    assert not mismatches, "\n".join(mismatches)
    if NUM_PROGRAMS >= 340:
        assert compared >= 100, f"only {compared} of {NUM_PROGRAMS} programs compared"


@pytest.mark.slow
def test_generated_programs_fail_where_mlir_opt_fails() -> None:
    """The propagation oracle's own programs (many cannot be partitioned: dimensions
    that do not divide, arguments used twice): no Python exception, failure where
    mlir-opt fails, equal outputs elsewhere."""
    _, mismatches = compare(list(range(NUM_PROGRAMS // 5)), generate_program)
    assert not mismatches, "\n".join(mismatches)


def test_unannotated_returns_partition_as_22_1_8() -> None:
    """A returned tensor annotated only by its producer (as propagation leaves it): trunk
    fails, 22.1.8 accepts it, and so do we (see `partition._returns_in_own_sharding`),
    with 22.1.8's output."""
    text = """
shard.grid @g(shape = 2)
func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<4x6xf32>
  %r = tosa.abs %a : (tensor<4x6xf32>) -> tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
"""
    expected, _ = _mlir_opt(text, PROPAGATE_THEN_PARTITION)
    assert expected is not None
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = _parse(text)
        ShardingPropagationPass().apply(make_context(), module)
        ShardPartitionPass().apply(make_context(), module)
    assert "tensor<2x6xf32>" in module_to_string(module)
    assert normalize_ssa_names(module_to_string(module)) == normalize_ssa_names(expected)


PROPAGATE_THEN_PARTITION = (
    "--pass-pipeline=builtin.module(func.func(sharding-propagation,shard-partition))"
)
