"""A few arith / scf / tensor ops built directly, as their xDSL constructors build them.

xDSL's constructors go through `IRDLOperation`'s generic builder (argument-list checks,
segment handling) and build fresh attributes (`IntegerAttr(0, IndexType())`, the
predicate, `i1`) each time. shard-partition and convert-shard-to-mpi make several of
these per partitioned op. Each function here makes the op its xDSL constructor makes:
the same class, operands, result types, properties (in the same order) and regions; the
attributes are shared objects equal to the fresh ones. Arguments outside the common
case go to the xDSL constructor itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from xdsl.dialects import arith, tensor
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Block, Region, SSAValue

from shardc.ir.op_init import create_op

if TYPE_CHECKING:
    from xdsl.dialects import scf

_I1 = IntegerType(1)
_INDEX = IndexType()

_CMPI_PREDICATES = {
    "eq": 0, "ne": 1, "slt": 2, "sle": 3, "sgt": 4, "sge": 5, "ult": 6, "ule": 7, "ugt": 8, "uge": 9,
}


@lru_cache(maxsize=64)
def _predicate(value: int) -> IntegerAttr:
    return IntegerAttr(value, 64)


@lru_cache(maxsize=4096)
def index_attr(value: int) -> IntegerAttr:
    """`IntegerAttr(value, IndexType())`, one object per value."""
    return IntegerAttr(value, _INDEX)


def cmpi(lhs: SSAValue, rhs: SSAValue, predicate: str) -> arith.CmpiOp:
    """`arith.CmpiOp(lhs, rhs, predicate)`."""
    code = _CMPI_PREDICATES.get(predicate)
    if code is None or lhs.type != rhs.type:
        return arith.CmpiOp(lhs, rhs, predicate)  # xDSL's checks and messages
    return create_op(arith.CmpiOp, operands=(lhs, rhs), result_types=(_I1,), properties={"predicate": _predicate(code)})


def index_constant(value: int) -> arith.ConstantOp:
    """`arith.ConstantOp(IntegerAttr(value, IndexType()))`."""
    attr = index_attr(value)
    return create_op(arith.ConstantOp, result_types=(attr.type,), properties={"value": attr})


def scf_yield(*values: SSAValue) -> scf.YieldOp:
    """`scf.YieldOp(*values)`."""
    from xdsl.dialects import scf  # imported by the first scf op built (3 ms at start-up)

    return create_op(scf.YieldOp, operands=values)


def scf_if(cond: SSAValue, result_types: Sequence[Attribute], then_block: Block, else_block: Block) -> scf.IfOp:
    """`scf.IfOp(cond, result_types, [then_block], [else_block])`."""
    from xdsl.dialects import scf

    return create_op(
        scf.IfOp, operands=(cond,), result_types=tuple(result_types), regions=(Region(then_block), Region(else_block))
    )


def tensor_empty(dynamic_sizes: Sequence[SSAValue], tensor_type: Attribute) -> tensor.EmptyOp:
    """`tensor.EmptyOp(dynamic_sizes, tensor_type)`."""
    return create_op(tensor.EmptyOp, operands=tuple(dynamic_sizes), result_types=(tensor_type,))
