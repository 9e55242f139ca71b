"""cf: assertions, and branches between the blocks of a function.

`cf.assert` raises when its condition is false (convert-shard-to-mpi emits it around
communicator sizes and MPI return codes; torch-mlir around the indices of a gather, in
linalg bodies, where the condition is an array and must hold everywhere).

A function of several blocks compiles to a dispatch loop (`compile_function`): a
variable holds the number of the block to run, each block is one arm of an `if` chain
inside `while True`, and a branch assigns the successor's arguments (all at once, as a
parallel copy) and its number, then `continue`s. Values keep one Python name each, so a
value defined in one block is visible in the blocks it dominates. `cf.switch` is not
supported (a compile error names it).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import cf, func
from xdsl.ir import Block, Operation, SSAValue

from shardc.runtime.codegen.builder import FunctionBuilder, ModuleCodegen, compile_error, describe, register
from shardc.runtime.execute.kernels.cf_run import assert_all, assert_failed  # noqa: F401  (the run time, re-exported)

_BLOCK = "_block"
"""The dispatch loop's variable: the number of the block to run next."""


@register(cf.AssertOp)
def _assert(op: Operation, g: FunctionBuilder) -> None:
    """The message and location reach the generated code as bound objects, never as
    source text."""
    assert isinstance(op, cf.AssertOp)
    msg, where = g.const(op.msg.data, "msg"), g.const(describe(op), "where")
    if g.is_arr(op.arg):
        g.emit(f"{g.const(assert_all, 'assert_all')}({g.v(op.arg)}, {msg}, {where})")
    else:
        g.emit(f"if not {g.v(op.arg)}: {g.const(assert_failed, 'assert_failed')}({msg}, {where})")


def _block_numbers(op: Operation, g: FunctionBuilder) -> dict[Block, int]:
    numbers: dict[Block, int] | None = getattr(g, "cf_blocks", None)
    if numbers is None or op.parent_block() not in numbers:
        raise compile_error(op, "branches are only supported between the blocks of a function body")
    return numbers


def _jump(g: FunctionBuilder, numbers: dict[Block, int], block: Block, args: Sequence[SSAValue]) -> None:
    if block.args:
        targets = [g.v(a) for a in block.args]
        values = g.vs(args)
        g.emit(f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {', '.join(values)}{',' if len(values) == 1 else ''}")
    g.emit(f"{_BLOCK} = {numbers[block]}")
    g.emit("continue")


@register(cf.BranchOp)
def _br(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, cf.BranchOp)
    _jump(g, _block_numbers(op, g), op.successor, op.arguments)


@register(cf.ConditionalBranchOp)
def _cond_br(op: Operation, g: FunctionBuilder) -> None:
    assert isinstance(op, cf.ConditionalBranchOp)
    numbers = _block_numbers(op, g)
    g.emit(f"if {g.v(op.cond)}:")
    with g.indented():
        _jump(g, numbers, op.then_block, op.then_arguments)
    _jump(g, numbers, op.else_block, op.else_arguments)


@register(cf.SwitchOp)
def _switch(op: Operation, g: FunctionBuilder) -> None:
    raise compile_error(op, "operation is not supported by the numpy runtime (use cf.cond_br)")


def compile_function(cg: ModuleCodegen, f: func.FuncOp, pyname: str) -> str:
    """The Python source of a function of any number of blocks (a dispatch loop when
    it has more than one)."""
    from shardc.runtime.codegen.builder import docstring, free_dead_values

    g = FunctionBuilder(cg)
    blocks = list(f.body.blocks)
    args = g.bind_block_args(blocks[0])
    g.depth = 1
    if len(blocks) == 1:
        g.emit_ops(blocks[0].ops)
    else:
        g.cf_blocks = {b: k for k, b in enumerate(blocks)}  # type: ignore[attr-defined]
        for b in blocks[1:]:
            g.bind_block_args(b)
        g.emit(f"{_BLOCK} = 0")
        g.emit("while True:")
        with g.indented():
            for k, b in enumerate(blocks):
                g.emit(f"{'if' if k == 0 else 'elif'} {_BLOCK} == {k}:")
                with g.indented():
                    g.emit_ops(b.ops)
    header = f"def {pyname}({', '.join(args)}):"
    return free_dead_values("\n".join([header, docstring(f), *g.lines]) + "\n")
