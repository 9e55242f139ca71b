"""MLIR's scf.if and scf.for canonicalization patterns (SCF.cpp), in MLIR's order. They
replace xDSL's own patterns for these ops: those run in another order and include one
MLIR does not have (constants hoisted out of loops, which MLIR's driver does itself).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, scf
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.rewriter import InsertPoint

from shardc.passes.canonicalization.common import constant_int, signed
from shardc.passes.fold_registry import register_patterns


def replace_op_with_region(
    rewriter: PatternRewriter, op: Operation, region: Region, args: Sequence[SSAValue] = ()
) -> None:
    """MLIR's `replaceOpWithRegion`: inline the single block before `op`, replace `op`
    by the terminator's operands, erase the terminator."""
    block = region.blocks.first
    assert block is not None and block.last_op is not None
    terminator = block.last_op
    results = list(terminator.operands)
    rewriter.inline_block(block, InsertPoint.before(op), args)
    rewriter.replace(op, [], results)
    rewriter.erase(terminator)


def _yield(region: Region) -> Operation:
    block = region.blocks.first
    assert block is not None and block.last_op is not None
    return block.last_op


def _defined_in(value: SSAValue, region: Region) -> bool:
    """Whether `value` is defined directly in `region` (MLIR's `getParentRegion() ==`)."""
    block = value.owner if isinstance(value.owner, Block) else value.owner.parent
    return block is not None and block.parent is region


# =========================================================================================
# scf.if
# =========================================================================================


class ConvertTrivialIfToSelect(RewritePattern):
    """Results whose yielded values come from outside the regions become `arith.select`
    (or the value itself when both branches yield it); the `scf.if` keeps the others."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, scf.IfOp) or not op.results or not op.false_region.blocks:
            return
        then_yield, else_yield = _yield(op.true_region), _yield(op.false_region)
        pairs = list(zip(then_yield.operands, else_yield.operands, strict=True))
        kept = [
            (t, f)
            for t, f in pairs
            if _defined_in(t, op.true_region) or _defined_in(f, op.false_region)
        ]
        if len(kept) == len(op.results):
            return
        replacement = scf.IfOp(op.cond, [t.type for t, _ in kept], Region(), Region())
        # The regions move (MLIR's takeBody), they are not copied.
        op.true_region.move_blocks(replacement.true_region)
        op.false_region.move_blocks(replacement.false_region)
        rewriter.insert(replacement, InsertPoint.before(op))
        results: list[SSAValue] = []
        next_kept = 0
        for t, f in pairs:
            if _defined_in(t, replacement.true_region) or _defined_in(f, replacement.false_region):
                results.append(replacement.results[next_kept])
                next_kept += 1
            elif t is f:
                results.append(t)
            else:
                select = arith.SelectOp(op.cond, t, f)
                rewriter.insert(select, InsertPoint.before(replacement))
                results.append(select.result)
        for region, values in (
            (replacement.true_region, [t for t, _ in kept]),
            (replacement.false_region, [f for _, f in kept]),
        ):
            rewriter.replace(_yield(region), scf.YieldOp(*values))
        rewriter.replace(op, [], results)


class RemoveEmptyElseBranch(RewritePattern):
    """An `scf.if` without results whose else block holds only its yield loses it."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, scf.IfOp) or op.results:
            return
        else_block = op.false_region.blocks.first
        if else_block is None or else_block.first_op is not else_block.last_op:
            return
        rewriter.erase(else_block.last_op)  # pyright: ignore[reportArgumentType]
        op.false_region.detach_block(else_block)
        else_block.erase()
        rewriter.notify_op_modified(op)


class RemoveStaticCondition(RewritePattern):
    """`scf.if` on a constant: the taken region inlined, or the op erased."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, scf.IfOp):
            return
        cond = constant_int(op.cond)
        if cond is None:
            return
        if cond & 1:
            replace_op_with_region(rewriter, op, op.true_region)
        elif op.false_region.blocks:
            replace_op_with_region(rewriter, op, op.false_region)
        else:
            rewriter.erase(op)


# =========================================================================================
# scf.for
# =========================================================================================


class ForOpIterArgsFolder(RewritePattern):
    """Drops iter_args that the loop does not change: yielded unchanged, yielding their
    init value, or unused both inside and after the loop; their results become the init
    values."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, scf.ForOp) or not op.iter_args:
            return
        body = op.body.block
        yield_op = body.last_op
        assert yield_op is not None
        args = body.args[1:]
        keep = [
            not (
                value is arg
                or value is init
                or (not arg.uses and not result.uses)
            )
            for arg, init, value, result in zip(
                args, op.iter_args, yield_op.operands, op.results, strict=True
            )
        ]
        if all(keep):
            return
        new = scf.ForOp(
            op.lb,
            op.ub,
            op.step,
            [v for v, k in zip(op.iter_args, keep) if k],
            Region(),
        )
        new_block = Block(arg_types=[body.args[0].type, *(a.type for a, k in zip(args, keep) if k)])
        new.body.add_block(new_block)
        rewriter.insert(new, InsertPoint.before(op))
        kept_args = iter(new_block.args[1:])
        block_args = [new_block.args[0]] + [
            next(kept_args) if k else init for init, k in zip(op.iter_args, keep)
        ]
        yielded = [v for v, k in zip(yield_op.operands, keep) if k]
        rewriter.inline_block(body, InsertPoint.at_end(new_block), block_args)
        rewriter.replace(yield_op, scf.YieldOp(*yielded))
        new_results = iter(new.results)
        rewriter.replace(
            op, [], [next(new_results) if k else init for init, k in zip(op.iter_args, keep)]
        )


def _trip_count(op: scf.ForOp) -> int | None:
    """The static trip count (signed comparison, as for `index`), None if unknown."""
    if op.lb is op.ub:
        return 0
    lb, ub, step = constant_int(op.lb), constant_int(op.ub), constant_int(op.step)
    if lb is None or ub is None:
        return None
    lb, ub = signed(lb, 64), signed(ub, 64)
    if ub <= lb:
        return 0
    if step is None or signed(step, 64) <= 0:
        return None
    step = signed(step, 64)
    return (ub - lb + step - 1) // step


class SimplifyTrivialLoops(RewritePattern):
    """Loops of zero trips become their init values, of one trip their body; a loop of
    more trips whose body only yields values from outside becomes those values."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, scf.ForOp):
            return
        trips = _trip_count(op)
        if trips is None:
            return
        if trips == 0:
            rewriter.replace(op, [], list(op.iter_args))
            return
        if trips == 1:
            replace_op_with_region(rewriter, op, op.body, [op.lb, *op.iter_args])
            return
        body = op.body.block
        terminator = body.last_op
        if body.first_op is not terminator or terminator is None:
            return
        if any(_defined_in(v, op.body) for v in terminator.operands):
            return
        rewriter.replace(op, [], list(terminator.operands))


register_patterns(
    scf.IfOp,
    ConvertTrivialIfToSelect(),
    RemoveEmptyElseBranch(),
    RemoveStaticCondition(),
    replace_native=True,
)
register_patterns(scf.ForOp, ForOpIterArgsFolder(), SimplifyTrivialLoops(), replace_native=True)
