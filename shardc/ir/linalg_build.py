"""`linalg.fill` and `linalg.copy` built without xDSL's `Builder.implicit_region`.

Their constructors build the hidden body (`^bb0(%in, %out): linalg.yield %in`) through
the builder's implicit-insertion context, most of the cost of making one; the passes
make one per partitioned reduction and per lowered collective. The op is the same:
the same body block, operands, results and segment sizes."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.linalg.ops import CopyOp, FillOp, YieldOp
from xdsl.ir import Attribute, Block, Region, SSAValue


def _yield_first(types: Sequence[Attribute]) -> Region:
    block = Block(arg_types=types)
    block.add_op(YieldOp(block.args[0]))
    return Region(block)


def fill_op(inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], res: Sequence[Attribute]) -> FillOp:
    """`FillOp(inputs, outputs, res)`."""
    body = _yield_first(FillOp.body_arg_types((*inputs, *outputs)))
    return FillOp.build(operands=[inputs, outputs], result_types=[list(res)], regions=[body])


def copy_op(inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], res: Sequence[Attribute]) -> CopyOp:
    """`CopyOp(inputs, outputs, res=res)`."""
    body = _yield_first(CopyOp.body_arg_types((*inputs, *outputs)))
    return CopyOp.build(operands=[inputs, outputs], result_types=[list(res)], regions=[body])
