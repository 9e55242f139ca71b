"""The per-class isinstance memo and the one-op insert give xDSL's answers."""

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    Float16Type,
    IntegerAttr,
    IntegerType,
    MemRefType,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    UnregisteredOp,
    f32,
    i32,
)
from xdsl.ir import Block, Operation
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.transforms.common_subexpression_elimination import OperationInfo

from shardc.ir.insert import insert_op
from shardc.ir.traits import is_instance, is_unregistered
from shardc.passes.cse import _Info  # pyright: ignore[reportPrivateUsage]


def _constant(value: int) -> Operation:
    return arith.ConstantOp(IntegerAttr(value, i32))


def test_is_instance_equals_isinstance_for_each_pair_asked_twice() -> None:
    unregistered = UnregisteredOp.with_name("foo.bar").create()
    objects = [_constant(1), unregistered, f32, Float16Type(), i32, TensorType(f32, [2]), MemRefType(f32, [2]),
               StringAttr("g"), SymbolRefAttr("g"), "g", (1,), [], None]
    classes = [Operation, UnregisteredOp, arith.ConstantOp, SymbolRefAttr, MemRefType | TensorType, AnyFloat | IntegerType]
    for _ in range(2):  # the second round answers from the memo
        for obj in objects:
            for cls in classes:
                assert is_instance(obj, cls) is isinstance(obj, cls), (obj, cls)
    assert is_unregistered(unregistered) and not is_unregistered(_constant(1))


def test_cse_info_name_equals_xdsl_operation_info_name() -> None:
    unregistered = UnregisteredOp.with_name("foo.bar").create()
    for op in (_constant(1), unregistered):
        assert _Info(op).name == OperationInfo(op).name


def test_insert_op_places_ops_where_rewriter_insert_op_does() -> None:
    ours, xdsls = Block(), Block()
    for block, insert in ((ours, insert_op), (xdsls, Rewriter.insert_op)):
        first, last = _constant(0), _constant(9)
        insert(first, InsertPoint.at_end(block))  # an empty block
        insert(last, InsertPoint.at_end(block))
        insert(_constant(5), InsertPoint.before(last))
        insert(_constant(-1), InsertPoint.at_start(block))
        insert(_constant(7), InsertPoint.after(last))
    values = [[op.value.value.data for op in block.ops] for block in (ours, xdsls)]  # type: ignore[attr-defined]
    assert values[0] == values[1] == [-1, 0, 5, 9, 7]
    for block in (ours, xdsls):
        assert all(op.parent is block for op in block.ops)
        assert block.first_op is not None and block.first_op.prev_op is None
