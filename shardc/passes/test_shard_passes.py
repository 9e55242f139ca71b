"""mlir-opt's test passes for the Shard transforms, under mlir-opt's names, so that
MLIR-style lit tests run unchanged against shardc-opt (upstream's
`mlir/test/lib/Dialect/Shard/` and `mlir/test/lib/Transforms/TestSingleFold.cpp`); those
of the op lowerings are `shardc.lowering.test_lowering_passes`, beside the patterns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import ConstantLike

from shardc.passes.folding import (
    OperationFolder,
    insertion_region,
    materialize_constant,
    try_fold,
)
from shardc.passes.greedy import apply_patterns_greedily
from shardc.passes.simplify import simplification_patterns


@dataclass(frozen=True)
class TestGridSimplificationsPass(ModulePass):
    """All-reduce endomorphisms and grid_shape folding (upstream's older
    `populateSimplificationPatterns`), under the greedy driver."""

    name = "test-grid-simplifications"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_patterns_greedily(op, simplification_patterns(), ctx=ctx)


@dataclass(frozen=True)
class TestSingleFoldPass(ModulePass):
    """Folds every op exactly once, last op first, then erases unused constants: each
    constant (found or produced) is uniqued at the entry of its isolated region."""

    name = "test-single-fold"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        constants: list[Operation] = []

        def erase(dead: Operation, values: Sequence[SSAValue]) -> None:
            for old, new in zip(dead.results, values, strict=True):
                old.replace_all_uses_with(new)
            dead.detach()
            dead.erase()

        folder = OperationFolder(erase)
        for each in reversed(list(op.walk())):
            if each is op:
                continue
            _fold_once(ctx, each, folder, constants)
        for constant in constants:
            if constant.parent is not None and all(not r.uses for r in constant.results):
                constant.detach()
                constant.erase()


def _fold_once(
    ctx: Context, op: Operation, folder: OperationFolder, constants: list[Operation]
) -> None:
    """MLIR's `OperationFolder::tryToFold` on one op."""
    block = op.parent_block()
    if block is None:
        return
    if folder.is_owned(op):
        if block.first_op is not op and not folder.is_owned(op.prev_op):
            op.detach()
            block.insert_op_before(op, block.first_op)  # pyright: ignore[reportArgumentType]
        return
    folded = try_fold(op)
    if folded is None or folded.values is None:
        return
    result = folded.values
    region = insertion_region(block)
    values: list[SSAValue] = []
    for item, res in zip(result, op.results, strict=True):
        if isinstance(item, SSAValue):
            if item.type != res.type:
                return
            values.append(item)
            continue
        constant = folder.get_or_create(
            region, item, res.type, lambda: _tracked(ctx, op, item, res.type, constants)
        )
        if constant is None:
            return
        if constant.parent_block() is block and block.first_op is not constant:
            constant.detach()
            block.insert_op_before(constant, block.first_op)  # pyright: ignore[reportArgumentType]
        values.append(constant.results[0])
    for old, new in zip(op.results, values, strict=True):
        old.replace_all_uses_with(new)
    op.detach()
    op.erase()


def _tracked(
    ctx: Context, op: Operation, value: Attribute, type: Attribute, constants: list[Operation]
) -> Operation | None:
    constant = materialize_constant(ctx, op, value, type)
    if constant is not None and constant.has_trait(ConstantLike):
        constants.append(constant)
    return constant
