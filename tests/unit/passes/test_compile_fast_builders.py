"""The second round of pipeline speed-ups (issue #16) makes exactly what xDSL's generic
machinery makes: the named linalg builders and bodies, the fill overlay's memoized maps,
the region clone, the direct arith/scf/tensor constructors, the shared types, the
id-keyed verifier memo, CSE's region comparison and the grid query constructors. Each
test builds the same thing both ways and compares everything the printer, the passes or
the verifier can see."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.builder import Builder
from xdsl.dialects import arith, scf, tensor
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    StringAttr,
    TensorType,
    f32,
    f64,
    i32,
    i64,
)
from xdsl.dialects.linalg.abstract_ops import NamedOperation
from xdsl.dialects.linalg.ops import FillOp as XFillOp
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from shardc.context import make_context
from shardc.dialects import linalg as slinalg
from shardc.dialects import mpi
from shardc.dialects.shard import GridShapeOp, ProcessMultiIndexOp, grid_axes_attr
from shardc.ir import fast_verify, linalg_build, op_build, types
from shardc.ir.clone import clone_region_into
from shardc.ir.locations import LocatingParser
from shardc.passes.cse import regions_equivalent


def _generic(op: Operation) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(op)
    return out.getvalue()


def _where(v: SSAValue) -> tuple[object, ...]:
    """A value by position: block argument index, or the defining op's place."""
    if isinstance(v, BlockArgument):
        return ("arg", v.index)
    owner = v.owner
    assert isinstance(owner, Operation) and owner.parent is not None
    return ("op", list(owner.parent.ops).index(owner), v.index)  # type: ignore[attr-defined]


def _same_op(a: Operation, b: Operation, by_position: bool = False) -> None:
    """Equal in everything the printer and the passes read, properties in order
    (`by_position`: operands in different blocks, compared by where they are)."""
    assert type(a) is type(b)
    if by_position:
        assert [_where(v) for v in a.operands] == [_where(v) for v in b.operands]
    else:
        assert list(a.operands) == list(b.operands)
    assert list(a.result_types) == list(b.result_types)
    assert list(a.properties.items()) == list(b.properties.items())
    assert list(a.attributes.items()) == list(b.attributes.items())
    assert len(a.regions) == len(b.regions)
    assert _generic(a) == _generic(b)


def _values(*types_):  # type: ignore[no-untyped-def]
    return Block(arg_types=types_).args


# -- named linalg ops ------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [slinalg.MatmulOp, slinalg.FillOp, slinalg.BatchMatmulOp, XFillOp])
def test_named_op_is_the_generic_build(cls) -> None:  # type: ignore[no-untyped-def]
    if cls is slinalg.BatchMatmulOp:
        a, b, c = _values(TensorType(f32, [2, 4, 8]), TensorType(f32, [2, 8, 3]), TensorType(f32, [2, 4, 3]))
        ins, outs = [a, b], [c]
    elif cls in (slinalg.MatmulOp,):
        a, b, c = _values(TensorType(f32, [4, 8]), TensorType(f32, [8, 3]), TensorType(f32, [4, 3]))
        ins, outs = [a, b], [c]
    else:
        a, c = _values(f32, TensorType(f32, [4, 3]))
        ins, outs = [a], [c]
    props = {"extra": StringAttr("p"), "gone": None}
    attrs = {"tag": StringAttr("a"), "none": None}
    fast = linalg_build.named_op(cls, ins, outs, [c.type], cls.get_hidden_region(ins, outs), props, attrs)
    slow = IRDLOperation.build.__func__(  # type: ignore[attr-defined]
        cls,
        operands=[ins, outs],
        result_types=[[c.type]],
        properties=props,
        attributes=attrs,
        regions=[cls.get_hidden_region(ins, outs)],
    )
    _same_op(fast, slow)
    assert "gone" not in fast.properties and "none" not in fast.attributes


def test_named_build_falls_back_outside_the_parser_form() -> None:
    a, b, c = _values(TensorType(f32, [4, 8]), TensorType(f32, [8, 3]), TensorType(f32, [4, 3]))
    region = slinalg.MatmulOp.get_hidden_region([a, b], [c])
    # an op instead of a value: xDSL's builder takes it (as its results)
    producer = tensor.EmptyOp([], c.type)
    via_op = slinalg.MatmulOp.build(operands=[[a, b], [producer]], result_types=[[c.type]], regions=[region])
    assert via_op.operands[2] is producer.results[0]
    # a malformed call raises xDSL's own error
    with pytest.raises(ValueError, match="Expected 2 operand"):
        slinalg.MatmulOp.build(operands=[[a, b]], result_types=[[c.type]], regions=[region.clone()])


def test_mul_add_body_is_the_builders() -> None:
    """The direct body of a float matmul is the one `Builder.implicit_region` makes."""
    a, b, c = _values(TensorType(f32, [4, 8]), TensorType(f32, [8, 3]), TensorType(f32, [4, 3]))

    @Builder.implicit_region([f32, f32, f32])
    def reference(args: tuple[BlockArgument, ...]) -> None:
        YieldOp(arith.AddfOp(args[2], arith.MulfOp(args[0], args[1])))

    fast = slinalg.MatmulOp.get_hidden_region([a, b], [c])
    holder = [scf.ExecuteRegionOp([], region) for region in (fast, reference)]
    assert _generic(holder[0]) == _generic(holder[1])
    for x, y in zip(fast.block.ops, reference.block.ops, strict=True):
        _same_op(x, y, by_position=True)
    # mixed element types still take the casting path
    d, e, g = _values(TensorType(f32, [4, 8]), TensorType(f32, [8, 3]), TensorType(f64, [4, 3]))
    names = [op.name for op in slinalg.MatmulOp.get_hidden_region([d, e], [g]).block.ops]
    assert names == ["arith.extf", "arith.extf", "arith.mulf", "arith.addf", "linalg.yield"]


def test_body_arg_types_is_xdsls() -> None:
    values = _values(f32, TensorType(i32, [2]), MemRefType(f64, [3]), IndexType())
    assert linalg_build.body_arg_types(values[:3]) == list(NamedOperation.body_arg_types(values[:3]))
    with pytest.raises(AssertionError):
        linalg_build.body_arg_types(values[3:])
    with pytest.raises(AssertionError):
        NamedOperation.body_arg_types(values[3:])


PROGRAM = """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %s: f32) -> tensor<4x3xf32> {
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%s : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %m = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  return %m : tensor<4x3xf32>
}
"""


def test_parsed_named_ops_are_what_their_constructors_build() -> None:
    module = LocatingParser(make_context(), PROGRAM, "in.mlir").parse_module()
    fill = next(op for op in module.walk() if op.name == "linalg.fill")
    matmul = next(op for op in module.walk() if op.name == "linalg.matmul")
    assert type(fill) is slinalg.FillOp and isinstance(fill, XFillOp)
    built_fill = XFillOp(list(fill.inputs), list(fill.outputs), [fill.results[0].type])
    built_matmul = slinalg.MatmulOp(list(matmul.inputs), list(matmul.outputs), [matmul.results[0].type])
    for parsed, built in ((fill, built_fill), (matmul, built_matmul)):
        assert list(parsed.properties.items()) == list(built.properties.items())
        assert parsed.attributes == built.attributes
        assert _generic(parsed.regions[0].block.ops.first) == _generic(built.regions[0].block.ops.first)  # type: ignore[arg-type]
        assert [o.name for o in parsed.regions[0].block.ops] == [o.name for o in built.regions[0].block.ops]


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_fill_maps_and_iterators_are_xdsls(rank: int) -> None:
    s, out = _values(f32, TensorType(f32, [2] * rank))
    ours = linalg_build.fill_op([s], [out], [out.type])
    ours = slinalg.FillOp.create(
        operands=list(ours.operands), result_types=list(ours.result_types),
        properties=dict(ours.properties), regions=[ours.regions[0].clone()],
    )
    theirs = XFillOp([s], [out], [out.type])
    for _ in range(2):  # the memo answers the second time
        assert tuple(ours.get_default_indexing_maps()) == tuple(theirs.get_default_indexing_maps())
        assert ours.get_iterator_types() == theirs.get_iterator_types()
        assert ours.get_indexing_maps() == theirs.get_indexing_maps()


# -- region clone ----------------------------------------------------------------------------

CLONED = """
func.func @g(%c: i1, %x: i32, %y: i32) -> i32 {
  %r = scf.execute_region -> i32 {
    cf.cond_br %c, ^a(%x : i32), ^b
  ^a(%v: i32):
    %s = arith.addi %v, %y : i32
    %t = scf.if %c -> (i32) {
      %u = arith.muli %s, %x : i32
      %w = arith.select %c, %u, %y : i32
      scf.yield %w : i32
    } else {
      scf.yield %y : i32
    }
    cf.br ^b
  ^b:
    scf.yield %x : i32
  }
  return %r : i32
}
"""


def _clone_body(fast: bool) -> tuple[Operation, Operation, dict[SSAValue, SSAValue]]:
    """A fresh copy of CLONED with its execute_region cloned next to it."""
    module = LocatingParser(make_context(), CLONED, "in.mlir").parse_module()
    body = next(op for op in module.walk() if op.name == "scf.execute_region")
    block = body.parent_block()
    assert block is not None
    mapping: dict[SSAValue, SSAValue] = {}
    new = body.clone_without_regions(mapping)
    for old, region in zip(body.regions, new.regions):
        if fast:
            clone_region_into(old, region, mapping)
        else:
            old.clone_into(region, 0, mapping)
    block.insert_op_before(new, block.last_op)  # type: ignore[arg-type]
    return module, new, mapping


def _blocks(region: Region) -> list[Block]:
    nested = [r for op in region.walk() for r in op.regions]
    return [b for r in (region, *nested) for b in r.blocks]


def test_clone_region_into_is_xdsls_clone_into() -> None:
    (m_fast, fast, fast_map), (m_slow, slow, slow_map) = _clone_body(True), _clone_body(False)
    assert _generic(m_fast) == _generic(m_slow)
    assert len(fast_map) == len(slow_map)
    new_ops = [list(r.walk()) for r in (fast.regions[0], slow.regions[0])]
    for a, b in zip(*new_ops, strict=True):
        assert a.location == b.location and type(a) is type(b)
        assert [r.name_hint for r in a.results] == [r.name_hint for r in b.results]
    for a, b in zip(_blocks(fast.regions[0]), _blocks(slow.regions[0]), strict=True):
        assert [(x.type, x.name_hint, x.location) for x in a.args] == [(x.type, x.name_hint, x.location) for x in b.args]
    # every value (outer ones included) lists its uses in the same order
    positions = [{id(op): i for i, op in enumerate(m.walk())} for m in (m_fast, m_slow)]
    values = [
        [v for op in m.walk() for v in op.results] + [a for op in m.walk() for r in op.regions for b in r.blocks for a in b.args]
        for m in (m_fast, m_slow)
    ]
    for v, w in zip(*values, strict=True):
        assert [(positions[0][id(u.operation)], u.index) for u in v.uses] == [
            (positions[1][id(u.operation)], u.index) for u in w.uses
        ]


# -- arith / scf / tensor constructors ------------------------------------------------------


def test_direct_constructors_are_xdsls() -> None:
    a, b, n = _values(IndexType(), IndexType(), IndexType())
    for predicate in ("eq", "ne", "slt", "uge"):
        _same_op(op_build.cmpi(a, b, predicate), arith.CmpiOp(a, b, predicate))
    _same_op(op_build.index_constant(3), arith.ConstantOp(IntegerAttr(3, IndexType())))
    _same_op(op_build.scf_yield(a, b), scf.YieldOp(a, b))
    t = TensorType(f32, [4, -1])
    _same_op(op_build.tensor_empty([n], t), tensor.EmptyOp([n], t))
    cond = arith.ConstantOp(IntegerAttr(1, 1)).results[0]

    def blocks() -> tuple[Block, Block]:
        return Block([scf.YieldOp(a)]), Block([scf.YieldOp(b)])

    _same_op(op_build.scf_if(cond, [IndexType()], *blocks()), scf.IfOp(cond, [IndexType()], *map(lambda x: [x], blocks())))
    # outside the common case, xDSL's constructor and its error
    (x,) = _values(i32)
    with pytest.raises(TypeError, match="same type"):
        op_build.cmpi(a, x, "eq")


def test_grid_queries_are_the_irdl_builders() -> None:
    for cls in (GridShapeOp, ProcessMultiIndexOp):
        ours = cls("grid", [1, 0])
        theirs = cls.build(properties={"grid": ours.grid, "axes": grid_axes_attr([1, 0])}, result_types=[[IndexType()] * 2])
        _same_op(ours, theirs)


def test_shared_types() -> None:
    assert types.tensor_type(f32, [2, 3]) == TensorType(f32, [2, 3])
    assert types.tensor_type(f32, (2, 3)) is types.tensor_type(f32, [2, 3])
    assert types.memref_type(i64, [4]) == MemRefType(i64, [4])
    m = MemRefType(f32, [5, 6])
    assert types.tensor_of_memref(m) == TensorType(f32, [5, 6]) and types.tensor_of_memref(m) is types.tensor_of_memref(MemRefType(f32, [5, 6]))
    t = TensorType(f64, [7])
    assert types.memref_of_tensor(t) == MemRefType(f64, [7])


# -- the verifier memo -----------------------------------------------------------------------


def test_id_keyed_memo_answers_for_the_same_objects_only() -> None:
    t = TensorType(f32, [4])
    (v,) = _values(t)
    ok = tensor.CastOp(v, t)
    fast_verify.verify_op(ok)
    plan = fast_verify._PLANS[tensor.CastOp]  # pyright: ignore[reportPrivateUsage]
    assert plan is not None
    memo = plan[1][0][1]
    ids = fast_verify._id_key(ok)  # pyright: ignore[reportPrivateUsage]
    assert memo[ids].key == fast_verify._key(ok)  # pyright: ignore[reportPrivateUsage]  # holds the objects
    # equal but distinct types: not the same ids, still known by value
    (w,) = _values(TensorType(f32, [4]))
    other = tensor.CastOp(w, TensorType(f32, [4]))
    assert fast_verify._id_key(other) not in memo  # pyright: ignore[reportPrivateUsage]
    fast_verify.verify_op(other)
    assert fast_verify._id_key(other) in memo  # pyright: ignore[reportPrivateUsage]
    # a failing op is never remembered: it fails every time, with xDSL's error
    bad = tensor.CastOp.create(operands=[v], result_types=[i32])
    for _ in range(2):
        with pytest.raises(VerifyException) as ours:
            fast_verify.verify_op(bad)
        with pytest.raises(VerifyException) as theirs:
            bad.verify_()
        assert str(ours.value) == str(theirs.value)


def test_mpi_ops_verify_through_the_memo_with_their_messages() -> None:
    assert fast_verify._plan(mpi.CommWorldOp) is not None  # pyright: ignore[reportPrivateUsage]
    good = mpi.CommWorldOp()
    fast_verify.verify_op(good)
    fast_verify.verify_op(mpi.CommWorldOp())
    bad = mpi.CommWorldOp.create(result_types=[i32])
    with pytest.raises(VerifyException) as ours:
        fast_verify.verify_op(bad)
    with pytest.raises(VerifyException) as theirs:
        bad.verify_()
    assert str(ours.value) == str(theirs.value)


# -- CSE's region comparison -----------------------------------------------------------------

REGIONS = """
func.func @h(%c: i1, %x: i32, %y: i32) {
  %0 = scf.execute_region -> i32 {
    %a = arith.addi %x, %y : i32
    scf.yield %a : i32
  }
  %1 = scf.execute_region -> i32 {
    %a = arith.addi %x, %y : i32
    scf.yield %a : i32
  }
  %2 = scf.execute_region -> i32 {
    %a = arith.addi %y, %x : i32
    scf.yield %a : i32
  }
  %3 = scf.execute_region -> i32 {
    %a = arith.muli %x, %y : i32
    scf.yield %a : i32
  }
  %4 = scf.execute_region -> i32 {
    %a = arith.addi %x, %y {tag} : i32
    scf.yield %a : i32
  }
  %5 = scf.execute_region -> i32 {
    cf.cond_br %c, ^a, ^b
  ^a:
    scf.yield %x : i32
  ^b:
    scf.yield %y : i32
  }
  %6 = scf.execute_region -> i32 {
    cf.cond_br %c, ^a, ^b
  ^a:
    scf.yield %x : i32
  ^b:
    scf.yield %y : i32
  }
  %7 = scf.execute_region -> i32 {
    cf.cond_br %c, ^b, ^a
  ^a:
    scf.yield %x : i32
  ^b:
    scf.yield %y : i32
  }
  %8 = scf.execute_region -> i32 {
    %t = scf.if %c -> (i32) {
      %u = arith.addi %x, %y : i32
      scf.yield %u : i32
    } else {
      scf.yield %x : i32
    }
    scf.yield %t : i32
  }
  %9 = scf.execute_region -> i32 {
    %t = scf.if %c -> (i32) {
      %u = arith.addi %x, %y : i32
      scf.yield %u : i32
    } else {
      scf.yield %y : i32
    }
    scf.yield %t : i32
  }
  return
}
"""


def test_regions_equivalent_is_xdsls_structural_equivalence() -> None:
    module = LocatingParser(make_context(), REGIONS, "in.mlir").parse_module()
    regions = [op.regions[0] for op in module.walk() if op.name == "scf.execute_region"]
    blocks = [Region([Block(arg_types=types_)]) for types_ in ([i32], [i32, i32], [f32])]
    candidates = regions + blocks
    verdicts = []
    for a in candidates:
        for b in candidates:
            assert regions_equivalent(a, b) == a.is_structurally_equivalent(b), (candidates.index(a), candidates.index(b))
            verdicts.append(regions_equivalent(a, b))
    assert any(verdicts) and not all(verdicts)
    assert regions_equivalent(regions[0], regions[1]) and not regions_equivalent(regions[0], regions[2])
    assert regions_equivalent(regions[5], regions[6]) and not regions_equivalent(regions[5], regions[7])
    assert not regions_equivalent(regions[8], regions[9])


# -- named op printing -----------------------------------------------------------------------

PRINTED = """
func.func @p(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %s: f32, %m: memref<4x3xf32>, %a: memref<4x8xf32>, %b: memref<8x3xf32>) -> tensor<4x3xf32> {
  %e = tensor.empty() : tensor<4x3xf32>
  %f = linalg.fill ins(%s : f32) outs(%e : tensor<4x3xf32>) -> tensor<4x3xf32>
  %g = linalg.fill {tag = "kept"} ins(%s : f32) outs(%f : tensor<4x3xf32>) -> tensor<4x3xf32>
  %r = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x3xf32>) outs(%g : tensor<4x3xf32>) -> tensor<4x3xf32>
  linalg.fill ins(%s : f32) outs(%m : memref<4x3xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x3xf32>) outs(%m : memref<4x3xf32>)
  return %r : tensor<4x3xf32>
}
"""


def test_named_op_printing_is_xdsls() -> None:
    module = LocatingParser(make_context(), PRINTED, "in.mlir").parse_module()
    named = [op for op in module.walk() if op.name in ("linalg.fill", "linalg.matmul")]
    assert len(named) == 5 and {type(op) for op in named} == {slinalg.FillOp, slinalg.MatmulOp}
    for op in named:
        ours, theirs = StringIO(), StringIO()
        op.print(Printer(stream=ours))
        NamedOperation.print(op, Printer(stream=theirs))
        assert ours.getvalue() == theirs.getvalue()
    assert any("kept" in _generic(op) for op in named)


# -- convert-shard-to-mpi's upstream patterns through the filtered worklist ---------------


def _upstream_chunks() -> list[str]:
    from pathlib import Path

    root = Path(__file__).resolve().parents[3] / "tests" / "filecheck"
    chunks = []
    for name in ("lowering/shard-to-mpi-indices", "passes/resharding", "passes/shard-simplify", "passes/shard-partition"):
        chunks += (root / f"{name}.mlir").read_text().split("// -----")
    return [c for c in chunks if "shard.all_slice" in c or "shard.process_multi_index" in c]


@pytest.mark.slow
def test_upstream_patterns_through_run_lowerings_leave_what_the_walker_leaves() -> None:
    from shardc.ir.printer import module_to_string
    from shardc.lowering.shard_to_mpi import _run, _upstream_patterns, run_lowerings, upstream_table  # pyright: ignore[reportPrivateUsage]

    chunks = _upstream_chunks()
    assert len(chunks) >= 4
    patterns = _upstream_patterns()
    assert len(upstream_table(patterns)) == 2
    lowered = 0
    for text in chunks:
        try:
            walked = LocatingParser(make_context(), text, "in.mlir").parse_module()
        except Exception:  # noqa: BLE001 - an expected-error chunk
            continue
        listed = LocatingParser(make_context(), text, "in.mlir").parse_module()
        before = module_to_string(walked, generic=True)
        _run(walked, patterns)
        run_lowerings(listed, upstream_table(patterns))
        assert module_to_string(listed, generic=True) == module_to_string(walked, generic=True)
        lowered += module_to_string(walked, generic=True) != before
    assert lowered >= 3
