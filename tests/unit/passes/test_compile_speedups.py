"""The pipeline's speed-ups (issue #16) answer exactly as the code they shortcut: the
greedy driver's skipped region simplification, the id-keyed worklist and liveness, the
nested fast verifier, the directly built linalg.fill/copy, the unwrapped named-op maps,
the capture pre-check and the memoized option annotations."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects import arith, scf, tensor
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, TensorType, f32, f64, i32
from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation
from xdsl.dialects.linalg.ops import CopyOp, FillOp
from xdsl.dialects import memref
from xdsl.ir import Block, Operation, Region
from xdsl.printer import Printer

from shardc.context import make_context
from shardc.interfaces import linalg as linalg_sharding
from shardc.interfaces.linalg import StructuredOpSharding, captured_loop_dims
from shardc.interfaces.sharding import (
    ShardingOption,
    _sharding_annotations,  # pyright: ignore[reportPrivateUsage]
    default_get_sharding_annotations,
    get_sharding_interface,
    pass_cache,
)
from shardc.ir.fast_verify import verify_operation
from shardc.ir.linalg_build import copy_op, fill_op
from shardc.ir.locations import LocatingParser
from shardc.passes import greedy
from shardc.passes.canonicalize import CanonicalizePass
from shardc.passes.folding import is_trivially_dead
from shardc.passes.greedy import Worklist, simplify_regions


def _parse(text: str):  # type: ignore[no-untyped-def]
    return LocatingParser(make_context(), text, "in.mlir").parse_module()


def _generic(op: Operation) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(op)
    return out.getvalue()


# -- greedy driver -------------------------------------------------------------------------

FOLDABLE = """
func.func @f(%x: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %dead = arith.muli %x, %x : i32
  %a = arith.addi %x, %c0 : i32
  %b = arith.muli %a, %c1 : i32
  return %b : i32
}
"""


def test_region_simplification_not_repeated_on_an_unchanged_iteration(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []

    def counting(regions):  # type: ignore[no-untyped-def]
        calls.append(simplify_regions(regions))
        return calls[-1]

    monkeypatch.setattr(greedy, "simplify_regions", counting)
    module = _parse(FOLDABLE)
    CanonicalizePass().apply(make_context(), module)
    # Iteration 1 folds and simplifies; iteration 2 changes nothing and stops there.
    assert len(calls) == 1
    # What was skipped would have found nothing: the IR is a fixed point.
    assert not simplify_regions([op.regions[0] for op in module.walk() if op.name == "func.func"])
    text = _generic(module)
    assert "arith.muli" not in text and "arith.addi" not in text


def test_region_simplification_runs_again_after_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every iteration whose worklist changed the IR is followed by it."""
    calls: list[int] = []
    real = greedy.GreedyDriver._process_worklist

    def changed_twice(self, rewriter):  # type: ignore[no-untyped-def]
        result = real(self, rewriter)
        calls.append(result)
        return result or len(calls) == 2  # report a change in iteration 2 as well

    regions: list[int] = []

    def counting(regs):  # type: ignore[no-untyped-def]
        regions.append(len(calls))
        return simplify_regions(regs)

    monkeypatch.setattr(greedy.GreedyDriver, "_process_worklist", changed_twice)
    monkeypatch.setattr(greedy, "simplify_regions", counting)
    CanonicalizePass().apply(make_context(), _parse(FOLDABLE))
    assert regions == [1, 2]  # after iterations 1 and 2, not after the unchanged 3rd
    assert len(calls) == 3


def test_worklist_set_semantics_by_identity() -> None:
    ops = [arith.ConstantOp(IntegerAttr(i, i32)) for i in range(4)]
    w = Worklist()
    for op in (*ops, ops[1]):
        w.push(op)
    assert ops[1] in w and len(w._map) == 4  # pyright: ignore[reportPrivateUsage]
    w.remove(ops[3])
    assert ops[3] not in w
    assert w.pop() is ops[2]
    w.reverse()
    assert [w.pop() for _ in range(2)] == [ops[0], ops[1]]
    assert not w


def test_is_trivially_dead_reads_uses() -> None:
    module = _parse(FOLDABLE)
    by_name = {op.results[0].name_hint: op for op in module.walk() if op.results and op.results[0].name_hint}
    assert is_trivially_dead(by_name["dead"])
    assert not is_trivially_dead(by_name["a"])  # used by %b
    assert not any(is_trivially_dead(op) for op in module.walk() if op.name == "func.return")


# -- nested fast verification --------------------------------------------------------------


def _if_with(inner: list[Operation], cond) -> scf.IfOp:  # type: ignore[no-untyped-def]
    then = Block(inner)
    return scf.IfOp(cond, [], [then], [Block([scf.YieldOp()])])


def test_nested_verify_does_not_use_xdsl_walk_when_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    cond = arith.ConstantOp(IntegerAttr(1, 1))
    op = _if_with([arith.AddiOp(cond.result, cond.result), scf.YieldOp()], cond.result)
    Block([cond, op, scf.YieldOp()])

    def refuse(self, verify_nested_ops=True):  # type: ignore[no-untyped-def]
        raise AssertionError("xDSL's verify ran on a valid op tree")

    monkeypatch.setattr(Operation, "verify", refuse)
    verify_operation(op)


@pytest.mark.parametrize("case", ["not-terminated", "bad-types", "empty-block"])
def test_nested_verify_raises_what_xdsl_raises(case: str) -> None:
    cond = arith.ConstantOp(IntegerAttr(1, 1))
    x = arith.ConstantOp(FloatAttr(1.0, f32))
    if case == "not-terminated":
        op = _if_with([arith.AddiOp(cond.result, cond.result)], cond.result)
    elif case == "bad-types":
        bad = arith.AddiOp(cond.result, cond.result)
        bad.operands = [cond.result, x.result]  # i1 + f32
        op = _if_with([bad, scf.YieldOp()], cond.result)
    else:
        op = scf.IfOp(cond.result, [], [Block()], [Block([scf.YieldOp()])])
    Block([cond, x, op, scf.YieldOp()])
    outcomes = []
    for check in (verify_operation, lambda o: o.verify()):
        try:
            check(op)
            outcomes.append(None)
        except Exception as e:  # noqa: BLE001
            outcomes.append((type(e), str(e)))
    assert outcomes[0] is not None and outcomes[0] == outcomes[1]


# -- linalg.fill / linalg.copy built directly ----------------------------------------------


@pytest.mark.parametrize("elem", [f32, f64, i32])
def test_fill_and_copy_match_xdsl_constructors(elem) -> None:  # type: ignore[no-untyped-def]
    value = arith.ConstantOp(FloatAttr(1.0, elem) if elem != i32 else IntegerAttr(1, elem))
    empty = tensor.EmptyOp([], TensorType(elem, [2, 3]))
    a = memref.AllocOp.get(elem, shape=[2, 3])
    b = memref.AllocOp.get(elem, shape=[2, 3])
    Block([value, empty, a, b])
    ours = fill_op([value.result], [empty.tensor], [empty.tensor.type])
    theirs = FillOp([value.result], [empty.tensor], [empty.tensor.type])
    assert _generic(ours) == _generic(theirs)
    assert type(ours) is type(theirs) and ours.properties == theirs.properties
    ours_copy, their_copy = copy_op([a.memref], [b.memref], []), CopyOp([a.memref], [b.memref], res=[])
    assert _generic(ours_copy) == _generic(their_copy)
    for op in (ours, ours_copy):
        op.verify()


# -- interfaces ------------------------------------------------------------------------------

NAMED = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>, %c: f32, %t: tensor<16x8xf32>, %i: tensor<4xi64>,
             %x: tensor<3x4x8xf32>, %y: tensor<3x8x2xf32>) {
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %s = linalg.add ins(%a, %a : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e3 = tensor.empty() : tensor<3x4x2xf32>
  %bm = linalg.batch_matmul ins(%x, %y : tensor<3x4x8xf32>, tensor<3x8x2xf32>) outs(%e3 : tensor<3x4x2xf32>) -> tensor<3x4x2xf32>
  %e4 = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%i : tensor<4xi64>) outs(%e4 : tensor<4x8xf32>) {
  ^bb0(%row: i64, %out: f32):
    %r = arith.index_cast %row : i64 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %t[%r, %col] : tensor<16x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  return
}
"""


def test_named_op_maps_unwrapped_equal_xdsls() -> None:
    impl = StructuredOpSharding()
    linalg_ops = [op for op in _parse(NAMED).walk() if isinstance(op, LinalgStructuredOperation)]
    assert {op.name for op in linalg_ops} >= {"linalg.fill", "linalg.matmul", "linalg.add", "linalg.batch_matmul", "linalg.generic"}
    for op in linalg_ops:
        assert impl._maps(op) == [m.data for m in op.get_indexing_maps()], op.name  # pyright: ignore[reportPrivateUsage]


def test_capture_precheck() -> None:
    ops = {op.name: op for op in _parse(NAMED).walk() if isinstance(op, LinalgStructuredOperation)}
    for name in ("linalg.fill", "linalg.matmul", "linalg.add"):
        assert not linalg_sharding.may_capture_tensor(ops[name])
        assert captured_loop_dims(ops[name]) == {}
    gather = ops["linalg.generic"]
    with pass_cache():
        assert linalg_sharding.may_capture_tensor(gather)
        follows = captured_loop_dims(gather)
        assert captured_loop_dims(gather) == follows
    assert list(follows.values()) == [(None, 1)]  # the column follows loop 1


def test_option_annotations_memo_is_exact_and_not_shared() -> None:
    module = _parse(NAMED)
    matmul = next(op for op in module.walk() if op.name == "linalg.matmul")
    impl = get_sharding_interface(matmul)
    assert impl is not None
    option = ShardingOption([[0], [], []], "g")
    with pass_cache():
        first = default_get_sharding_annotations(impl, matmul, option)
        assert first is not None
        first.clear()  # a caller's list: the memo keeps its own
        second = default_get_sharding_annotations(impl, matmul, option)
        other = default_get_sharding_annotations(impl, matmul, ShardingOption([[], [0], []], "g"))
    assert second == _sharding_annotations(impl, matmul, option) and second
    assert other == _sharding_annotations(impl, matmul, ShardingOption([[], [0], []], "g"))
    assert other != second


def test_memref_types_unaffected() -> None:
    """linalg.copy on memrefs of a different layout keeps its operand types."""
    a = memref.AllocOp.get(f32, shape=[4])
    b = memref.AllocOp([], [], MemRefType(f32, [4]))
    Block([a, b])
    assert _generic(copy_op([a.memref], [b.memref], [])) == _generic(CopyOp([a.memref], [b.memref], res=[]))


def test_region_helpers_keep_xdsl_shapes() -> None:
    op = fill_op([arith.ConstantOp(FloatAttr(0.0, f32)).result], [tensor.EmptyOp([], TensorType(f32, [2])).tensor], [TensorType(f32, [2])])
    assert isinstance(op.regions[0], Region) and len(op.regions[0].blocks) == 1
    assert [a.type for a in op.regions[0].blocks.first.args] == [f32, f32]  # type: ignore[union-attr]
