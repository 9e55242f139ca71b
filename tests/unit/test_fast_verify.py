"""shardc.ir.fast_verify: the memoized verifier accepts and rejects exactly what xDSL's
own `verify_` / `verify` do, with the same messages, on first and repeated calls."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, f32, i32
from xdsl.ir import Block, Operation, Region
from xdsl.traits import IsolatedFromAbove, OpTrait

from shardc.context import make_context
from shardc.ir import fast_verify
from shardc.ir.fast_verify import verify_op, verify_operation
from shardc.ir.isolation import verify_isolated_from_above
from shardc.ir.locations import LocatingParser

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [
    ROOT / "examples" / "mlp.mlir",
    ROOT / "tests" / "data" / "torch_mlir" / "gpt.mlir",
    ROOT / "tests" / "data" / "torch_mlir" / "mlp_baked.mlir",
]


def _outcome(fn, op) -> str | None:  # type: ignore[no-untyped-def]
    try:
        fn(op)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_same_outcome_as_xdsl_on_real_programs(path: Path) -> None:
    module = LocatingParser(make_context(), path.read_text(), str(path)).parse_module()
    ops = list(module.walk())
    assert len(ops) > 5
    for _ in range(2):  # the second round hits the memo
        for op in ops:
            assert _outcome(verify_op, op) == _outcome(lambda o: o.verify_(), op), op.name


def test_memo_is_used_and_covers_shard_and_linalg_ops() -> None:
    text = (ROOT / "examples" / "mlp.mlir").read_text()
    module = LocatingParser(make_context(), text, "mlp.mlir").parse_module()
    for op in module.walk():
        verify_op(op)
    names = {op.name: type(op) for op in module.walk()}
    for name in ("shard.shard", "shard.sharding", "linalg.matmul", "arith.constant"):
        plan = fast_verify._PLANS[names[name]]  # pyright: ignore[reportPrivateUsage]
        assert plan is not None, name
        assert any(memo for _, memo, _traits in plan[1]), name
    matmul_plan = fast_verify._PLANS[names["linalg.matmul"]]  # pyright: ignore[reportPrivateUsage]
    assert matmul_plan is not None and matmul_plan[3], "linalg's own verifier is memoized"


def test_traits_still_checked_on_a_memo_hit() -> None:
    """func.return passes inside a function (memoized), then the same op shape outside
    one must still fail: traits (HasParent) are not memoized."""
    t = TensorType(f32, [4])
    block = Block(arg_types=[t])
    ret = func.ReturnOp(block.args[0])
    block.add_op(ret)
    f = func.FuncOp("f", ((t,), (t,)), Region(block))
    ModuleOp([f])
    verify_op(ret)
    stray = func.ReturnOp(Block(arg_types=[t]).args[0])
    ModuleOp([stray])
    expected = _outcome(lambda o: o.verify_(), stray)
    assert expected is not None
    assert _outcome(verify_op, stray) == expected


def test_failures_are_never_memoized() -> None:
    """A constraint failure raises xDSL's message every time, also after a valid op of the
    same class filled the memo."""
    ctx = make_context()
    good = LocatingParser(ctx, "%0 = arith.constant 1 : i32\n", "t.mlir").parse_module()
    for op in good.walk():
        verify_op(op)
    const = next(op for op in good.walk() if op.name == "arith.constant")
    const.results[0]._type = f32  # type: ignore[attr-defined]  # value i32, result f32
    expected = _outcome(lambda o: o.verify_(), const)
    assert expected is not None
    for _ in range(3):
        assert _outcome(verify_op, const) == expected
    const.results[0]._type = i32  # type: ignore[attr-defined]
    assert _outcome(verify_op, const) is None


def test_verify_operation_matches_xdsl_verify() -> None:
    t = TensorType(f32, [4])
    block = Block(arg_types=[t])
    ret = func.ReturnOp(block.args[0])
    block.add_op(ret)
    f = func.FuncOp("f", ((t,), (t,)), Region(block))
    ModuleOp([f])
    assert _outcome(verify_operation, ret) is None
    assert _outcome(lambda o: verify_operation(o, verify_nested_ops=False), f) is None
    wrong = func.FuncOp("h", ((t,), (i32,)), Region(Block([func.ReturnOp(Block(arg_types=[t]).args[0])])))
    ModuleOp([wrong])
    inner = next(iter(wrong.body.block.ops))
    expected = _outcome(lambda o: o.verify(), inner)
    assert expected is not None
    assert _outcome(verify_operation, inner) == expected


def _isolated_cases() -> list[tuple[Operation, IsolatedFromAbove]]:
    """Ops with IsolatedFromAbove, valid and not: a parsed program (functions with
    linalg bodies reading function arguments), a function reading a value of another
    function, and one reading its own result through a nested op."""
    text = (ROOT / "examples" / "mlp.mlir").read_text()
    module = LocatingParser(make_context(), text, "mlp.mlir").parse_module()
    t = TensorType(f32, [4])
    outer = Block(arg_types=[t])
    leaking = func.FuncOp("leak", ((t,), (t,)), Region(Block([func.ReturnOp(outer.args[0])], arg_types=[t])))
    ModuleOp([leaking])
    nested_leak = ModuleOp([func.FuncOp("g", ((), ()), Region(Block([func.ReturnOp()])))])
    inner_func = next(iter(nested_leak.ops))
    assert isinstance(inner_func, func.FuncOp)
    inner_block = inner_func.body.block
    inner_block.insert_arg(t, 0)
    inner_block.first_op.detach()  # type: ignore[union-attr]
    inner_block.add_op(func.ReturnOp(Block(arg_types=[t]).args[0]))
    cases = [op for op in module.walk() if op.has_trait(IsolatedFromAbove)]
    cases += [leaking, nested_leak, inner_func]
    return [(op, op.get_trait(IsolatedFromAbove)) for op in cases]  # type: ignore[misc]


def test_isolated_from_above_check_matches_xdsl() -> None:
    """`verify_isolated_from_above` raises exactly what xDSL's trait raises, and nothing
    where it raises nothing (also for values defined in nested isolated ops)."""
    outcomes = []
    for op, trait in _isolated_cases():
        expected = _outcome(trait.verify, op)
        assert _outcome(lambda o: verify_isolated_from_above(trait, o), op) == expected
        outcomes.append(expected is None)
    assert True in outcomes and False in outcomes


def test_trait_checks_skip_only_traits_that_check_nothing() -> None:
    """A memo hit runs every trait whose `verify` checks something (IsolatedFromAbove's
    through the fast check), and skips `OpTrait.verify`'s no-ops."""
    for op, _ in _isolated_cases():
        traits = type(op).get_irdl_definition().traits.traits
        checks = fast_verify._trait_checks(traits)  # pyright: ignore[reportPrivateUsage]
        doing = [t for t in traits if type(t).verify is not OpTrait.verify]
        assert len(checks) == len(doing)
        isolated = [c for c in checks if isinstance(c, partial)]
        assert len(isolated) == 1 and isolated[0].func is verify_isolated_from_above
    leaking = _isolated_cases()[-3][0]
    for _ in range(2):  # the second round is a memo hit: the fast trait checks
        assert _outcome(verify_op, leaking) == _outcome(lambda o: o.verify_(), leaking)


def test_id_key_changes_with_everything_the_constraints_read() -> None:
    """The memo's first key: equal for the same objects, different when a type, a
    property, an attribute or a region's argument types change."""
    text = (ROOT / "examples" / "mlp.mlir").read_text()
    module = LocatingParser(make_context(), text, "mlp.mlir").parse_module()
    id_key = fast_verify._id_key  # pyright: ignore[reportPrivateUsage]
    ops = list(module.walk())
    assert [id_key(op) for op in ops] == [id_key(op) for op in ops]
    op = next(o for o in ops if o.name == "linalg.matmul")
    before = id_key(op)
    op.attributes["x"] = op.properties["operandSegmentSizes"]
    assert id_key(op) != before
    del op.attributes["x"]
    assert id_key(op) == before
    op.results[0]._type = TensorType(f32, [1, 1])  # type: ignore[attr-defined]
    assert id_key(op) != before
    func_op = next(o for o in ops if isinstance(o, func.FuncOp) and o.body.blocks)
    before = id_key(func_op)
    func_op.body.block.args[0]._type = TensorType(f32, [3])  # type: ignore[attr-defined]
    assert id_key(func_op) != before
