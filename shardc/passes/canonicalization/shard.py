"""The shard dialect's `materializeConstant` (MLIR's gives `arith.constant`), for the
folds of shard ops under the greedy driver."""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, IntegerType
from xdsl.ir import Attribute, Operation

from shardc.passes.fold_registry import register_materializer


def _materialize(value: Attribute, type: Attribute) -> Operation | None:
    if isinstance(value, IntegerAttr) and isinstance(type, IntegerType | IndexType):
        return arith.ConstantOp(value, type)
    return None


register_materializer("shard", _materialize)
