"""The linalg.generic fast paths (issue #16) make what xDSL's generic machinery makes:
the direct constructor against `GenericOp(...)`, the parsed iterator types against the
parser's own conversion, the parser and printer end to end against the tree with the
fast paths switched off (xDSL's builder), and the fill overlay's shape key against the
accessors it replaces."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, IntegerAttr, StringAttr, TensorType, f32, i32, i64
from xdsl.dialects.linalg.attrs import IteratorType, IteratorTypeAttr
from xdsl.dialects.linalg.ops import FillOp as XFillOp
from xdsl.dialects.linalg.ops import GenericOp as XGenericOp
from xdsl.dialects.linalg.ops import YieldOp
from xdsl.ir import Block, Operation, Region
from xdsl.ir.affine import AffineMap
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError

from shardc.context import make_context
from shardc.dialects import linalg as slinalg
from shardc.ir import linalg_build
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.ir.segments import ins_outs


def _generic_text(op: Operation) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(op)
    return out.getvalue()


def _body(*types) -> Region:  # type: ignore[no-untyped-def]
    block = Block(arg_types=types)
    add = arith.AddfOp(block.args[0], block.args[1])
    block.add_ops([add, YieldOp(add.result)])
    return Region(block)


def _same(a: Operation, b: Operation) -> None:
    assert type(a) is type(b)
    assert list(a.operands) == list(b.operands)
    assert list(a.result_types) == list(b.result_types)
    assert list(a.properties.items()) == list(b.properties.items())
    assert list(a.attributes.items()) == list(b.attributes.items())
    assert _generic_text(a) == _generic_text(b)


@pytest.mark.parametrize("cls", [XGenericOp, slinalg.GenericOp])
@pytest.mark.parametrize("extras", [(None, None), (StringAttr("doc"), None), (None, StringAttr("f")), (StringAttr("d"), StringAttr("f"))])
def test_generic_op_is_the_constructor(cls, extras) -> None:  # type: ignore[no-untyped-def]
    block = Block(arg_types=[TensorType(f32, [4, 8]), TensorType(f32, [4, 8]), TensorType(f32, [4])])
    a, b, out = block.args
    maps = ArrayAttr([AffineMapAttr(AffineMap.identity(2))] * 2 + [AffineMapAttr(AffineMap.from_callable(lambda i, j: (i,)))])
    iters = ArrayAttr([IteratorTypeAttr(IteratorType.PARALLEL), IteratorTypeAttr(IteratorType.REDUCTION)])
    slow = cls([a, b], [out], _body(f32, f32, f32), maps, iters, [out.type], *extras)
    fast = linalg_build.generic_op(cls, [a, b], [out], _body(f32, f32, f32), maps, iters, [out.type], *extras)
    _same(fast, slow)
    # several results, no inputs
    slow = cls([], [out, out], _body(f32, f32), ArrayAttr([maps.data[2]] * 2), iters, [out.type] * 2)
    fast = linalg_build.generic_op(cls, [], [out, out], _body(f32, f32), ArrayAttr([maps.data[2]] * 2), iters, [out.type] * 2)
    _same(fast, slow)


def test_iterator_types_are_the_parsers() -> None:
    parsed = ArrayAttr([StringAttr("parallel"), IteratorTypeAttr(IteratorType.REDUCTION), StringAttr("window")])
    got = linalg_build.iterator_types_attr(parsed)
    assert isinstance(got, ArrayAttr)
    assert got == ArrayAttr([IteratorTypeAttr(IteratorType(x)) for x in ("parallel", "reduction", "window")])
    assert linalg_build.iterator_types_attr(parsed) is got  # one object per distinct list
    bad = ArrayAttr([StringAttr("parallel"), StringAttr("sideways")])
    assert linalg_build.iterator_types_attr(bad) == StringAttr("sideways")
    assert linalg_build.iterator_types_attr(ArrayAttr([IntegerAttr(1, i32)])) == IntegerAttr(1, i32)


_PROGRAM = """#map = affine_map<(d0, d1) -> (d0, d1)>
#map1 = affine_map<(d0, d1) -> (d0)>
func.func @f(%a: tensor<4x8xf32>, %e: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>, tensor<4x8xf32>) {
  %r:2 = linalg.generic {indexing_maps = [#map, #map1, #map1], iterator_types = ["parallel", "reduction"], library_call = "lc", doc = "d"} ins(%a : tensor<4x8xf32>) outs(%e, %i : tensor<4xf32>, tensor<4xi64>) attrs = {foo = 1 : i32} {
  ^bb0(%x: f32, %o: f32, %j: i64):
    %m = arith.maximumf %x, %o : f32
    %k = linalg.index 1 : index
    %kk = arith.index_cast %k : index to i64
    linalg.yield %m, %kk : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x8xf32>) outs(%a : tensor<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = math.tanh %x : f32
    linalg.yield %y : f32
  } -> tensor<4x8xf32>
  return %r#0, %r#1, %t : tensor<4xf32>, tensor<4xi64>, tensor<4x8xf32>
}
"""


def test_parsed_generic_is_the_constructors() -> None:
    """Each parsed generic equals `GenericOp(...)` built from its parts, and the module
    prints as mlir-opt does (sorted leading dictionary, `attrs =`, `-> (t1, t2)`)."""
    module = LocatingParser(make_context(), _PROGRAM, "g.mlir").parse_module()
    generics = [op for op in module.walk() if isinstance(op, slinalg.GenericOp)]
    assert len(generics) == 2
    for op in generics:
        n_in = len(op.inputs)
        ref = slinalg.GenericOp(
            list(op.operands[:n_in]),
            list(op.operands[n_in:]),
            op.body.clone(),
            op.indexing_maps,
            op.iterator_types,
            op.result_types,
            op.doc,
            op.library_call,
        )
        ref.attributes |= op.attributes
        for new, old in zip(ref.results, op.results, strict=True):
            new.name_hint = old.name_hint
        _same(op, ref)
        assert all(isinstance(it, IteratorTypeAttr) for it in op.iterator_types)
    text = module_to_string(module)
    assert '{doc = "d", indexing_maps = [#map, #map1, #map1], iterator_types = ["parallel", "reduction"], library_call = "lc"}' in text
    assert "attrs =  {foo = 1 : i32}" in text and "} -> (tensor<4xf32>, tensor<4xi64>)" in text
    # and it parses back to the same text
    assert module_to_string(LocatingParser(make_context(), text, "h.mlir").parse_module()) == text


def test_unknown_iterator_type_is_reported_where_xdsl_reports_it() -> None:
    bad = _PROGRAM.replace('["parallel", "parallel"]', '["parallel", "sideways"]')
    with pytest.raises(ParseError, match='Unknown iterator type "sideways"'):
        LocatingParser(make_context(), bad, "g.mlir").parse_module()


def test_fill_shape_key_is_the_accessors() -> None:
    block = Block(arg_types=[f32, TensorType(f32, [4, 8, 2]), TensorType(i64, [3])])
    fill = slinalg.FillOp([block.args[0]], [block.args[1]], [block.args[1].type])
    assert fill._shape_key() == (len(fill.inputs), len(fill.outputs), 3)  # pyright: ignore[reportPrivateUsage]
    assert fill.get_iterator_types() == XFillOp.get_iterator_types(fill)
    assert tuple(fill.get_default_indexing_maps()) == tuple(XFillOp.get_default_indexing_maps(fill))
    # without segment sizes it falls back to the accessors (and their errors)
    del fill.properties["operandSegmentSizes"]
    with pytest.raises(Exception):
        fill._shape_key()  # pyright: ignore[reportPrivateUsage]


def test_lowering_worklist_order_is_the_walks() -> None:
    """convert-shard-to-mpi seeds its worklist in `walk(reverse=True, region_first=True)`
    order, filtered to the lowered classes, through nested regions and blocks."""
    from xdsl.utils.worklist import Worklist

    from shardc.lowering.shard_to_mpi import _push_post_order_reversed  # pyright: ignore[reportPrivateUsage]

    text = """
shard.grid @g(shape = 2)
func.func @f(%a: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%x = %a) -> (tensor<4xf32>) {
    %s2 = shard.sharding @g split_axes = [[]] : !shard.sharding
    %y = scf.execute_region -> tensor<4xf32> {
      %s3 = shard.sharding @g split_axes = [[0]] : !shard.sharding
      cf.br ^bb1(%x : tensor<4xf32>)
    ^bb1(%z: tensor<4xf32>):
      %s4 = shard.sharding @g split_axes = [[]] : !shard.sharding
      scf.yield %z : tensor<4xf32>
    }
    scf.yield %y : tensor<4xf32>
  }
  %s5 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  return %r : tensor<4xf32>
}
"""
    module = LocatingParser(make_context(), text, "w.mlir").parse_module()
    for table in ({type(op): None for op in module.walk() if op.name == "shard.sharding"}, {type(op): None for op in module.walk()}):
        worklist: Worklist[Operation] = Worklist()
        for block in reversed(module.body.blocks):
            _push_post_order_reversed(block, table, worklist)  # type: ignore[arg-type]
        got = []
        while worklist:
            got.append(worklist.pop())
        expected = Worklist()
        for op in module.body.walk(reverse=True, region_first=True):
            if type(op) in table:
                expected.push(op)
        want = []
        while expected:
            want.append(expected.pop())
        assert [id(o) for o in got] == [id(o) for o in want] and len(got) >= 5


def test_ins_outs_are_the_accessors() -> None:
    """The printer's direct read of a generic's inputs and outputs (`shardc.ir.segments`)."""
    module = LocatingParser(make_context(), _PROGRAM, "g.mlir").parse_module()
    for op in [op for op in module.walk() if isinstance(op, slinalg.GenericOp)]:
        ins, outs = ins_outs(op)
        assert list(ins) == list(op.inputs) and list(outs) == list(op.outputs)
        del op.properties["operandSegmentSizes"]  # no sizes: the accessors decide (and raise)
        with pytest.raises(Exception):
            ins_outs(op)
