"""`shardc.ir.op_init` makes the op xDSL's `Operation.create` / `Operation.__init__`
makes (issue #16): each test builds an op both ways on fresh, identical operands and
compares every field, in order, with the use lists of operands and successors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdsl.dialects import arith, cf, scf, test
from xdsl.dialects.builtin import (
    FileLineColLoc,
    IntAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnregisteredOp,
    f32,
    i1,
    i32,
)
from xdsl.ir import Block, Operation, Region

from shardc.dialects import shard
from shardc.dialects.linalg import GenericOp
from shardc.ir.op_init import create_op, init_op


def _uses(value: Any) -> list[tuple[str, int]]:
    return [(u.operation.name, u.index) for u in value.uses]


def _same(a: Operation, b: Operation, values_a: list[Any], values_b: list[Any]) -> None:
    assert type(a) is type(b)
    assert list(vars(a)) == list(vars(b))
    pos_a = {id(v): i for i, v in enumerate(values_a)}
    pos_b = {id(v): i for i, v in enumerate(values_b)}
    assert [pos_a[id(v)] for v in a.operands] == [pos_b[id(v)] for v in b.operands]
    assert [(u.index, u._prev_use is None) for u in a._operand_uses] == [
        (u.index, u._prev_use is None) for u in b._operand_uses
    ]
    for va, vb in zip(values_a, values_b, strict=True):
        assert _uses(va) == _uses(vb)
    assert [(r.type, r.index, r.op is a, list(vars(r))) for r in a.results] == [
        (r.type, r.index, r.op is b, list(vars(r))) for r in b.results
    ]
    assert type(a.results) is type(b.results) and type(a._operands) is type(b._operands)
    assert list(a.properties.items()) == list(b.properties.items())
    assert list(a.attributes.items()) == list(b.attributes.items())
    assert a.location == b.location
    assert [pos_a[id(s)] for s in a.successors] == [pos_b[id(s)] for s in b.successors]
    assert [(u.index, u.operation is a) for u in a._successor_uses] == [
        (u.index, u.operation is b) for u in b._successor_uses
    ]
    assert len(a.regions) == len(b.regions)
    assert all(r.parent is a for r in a.regions)
    assert a.parent is None and a.next_op is None and a.prev_op is None


def _fresh() -> list[Any]:
    """Values and blocks to build on: two i32, an f32 tensor, an i1 and two blocks."""
    block = Block(arg_types=[i32, i32, TensorType(f32, [4]), i1])
    # every value already has a use, so the new uses go in front of an existing one
    user = test.TestOp(operands=list(block.args))
    block.add_op(user)
    return [*block.args, Block(), Block()]


_LOC = FileLineColLoc(StringAttr("f.mlir"), IntAttr(3), IntAttr(7))

_CASES: dict[str, Callable[[list[Any]], dict[str, Any]]] = {
    "addi, default flags": lambda v: dict(operands=[v[0], v[1]], result_types=[i32]),
    "addi, shared operand": lambda v: dict(operands=[v[0], v[0]], result_types=[i32], location=_LOC),
    "constant": lambda v: dict(properties={"value": IntegerAttr(3, i32)}, result_types=[i32]),
    "cond_br": lambda v: dict(
        operands=[v[3], v[0], v[1]],
        successors=[v[4], v[5]],
        properties={"operandSegmentSizes": cf.ConditionalBranchOp(v[3], v[4], [v[0]], v[5], [v[1]]).properties["operandSegmentSizes"]},
    ),
    "if, regions": lambda v: dict(operands=[v[3]], result_types=[i32], regions=[Region(Block()), Region(Block())]),
    "sharding, defaults": lambda v: dict(
        properties={"grid": shard._symbol_ref("g"), "split_axes": shard._split_axes_attr(((0,),))},  # pyright: ignore
        result_types=[shard.ShardingType()],
    ),
    "attributes kept apart": lambda v: dict(
        operands=[v[2]], result_types=[v[2].type], attributes={"z": StringAttr("z"), "a": StringAttr("a")}
    ),
}
_CLASSES = {
    "addi, default flags": arith.AddiOp,
    "addi, shared operand": arith.AddiOp,
    "constant": arith.ConstantOp,
    "cond_br": cf.ConditionalBranchOp,
    "if, regions": scf.IfOp,
    "sharding, defaults": shard.ShardingOp,
    "attributes kept apart": UnregisteredOp.with_name("x.y"),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_create_op_is_create(case: str) -> None:
    cls = _CLASSES[case]
    values_a, values_b = _fresh(), _fresh()
    a = cls.create(**_CASES[case](values_a))
    b = create_op(cls, **_CASES[case](values_b))
    _same(a, b, values_a, values_b)


def test_init_op_is_operation_init() -> None:
    values_a, values_b = _fresh(), _fresh()
    a = shard.ShardOp.__new__(shard.ShardOp)
    Operation.__init__(a, operands=[values_a[2], values_a[2]], result_types=[values_a[2].type])
    b = shard.ShardOp.__new__(shard.ShardOp)
    init_op(b, operands=[values_b[2], values_b[2]], result_types=[values_b[2].type])
    _same(a, b, values_a, values_b)


def test_generic_defaults_follow_given_properties() -> None:
    """IRDL defaults are added after the given properties, and a given one is kept."""
    values = _fresh()
    flags = arith.IntegerOverflowAttr([arith.IntegerOverflowFlag.NSW])
    op = create_op(arith.AddiOp, operands=values[:2], result_types=[i32], properties={"overflowFlags": flags})
    assert op.properties["overflowFlags"] is flags
    sharding = create_op(
        shard.ShardingOp,
        properties={"grid": shard._symbol_ref("g"), "split_axes": shard._split_axes_attr(())},  # pyright: ignore
        result_types=[shard.ShardingType()],
    )
    assert list(sharding.properties) == list(
        shard.ShardingOp.create(
            properties={"grid": shard._symbol_ref("g"), "split_axes": shard._split_axes_attr(())},  # pyright: ignore
            result_types=[shard.ShardingType()],
        ).properties
    )


def test_attached_region_is_refused_as_xdsl_does() -> None:
    region = Region(Block())
    scf.ExecuteRegionOp.create(regions=[region])
    with pytest.raises(ValueError, match="already attached"):
        create_op(GenericOp, regions=[region])
