"""The pipeline's speed helpers keep xDSL's answers: the collector is off only inside a
pass, and the linked-list walks list what xDSL's walks list, in the same order."""

import gc

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.segments import ins_outs
from shardc.ir.walk import all_ops, block_ops, ops_of_class
from shardc.passes.gc_pause import paused_gc
from xdsl.dialects import func
from xdsl.dialects.builtin import DenseArrayBase, i32

TEXT = """
func.func @a(%x: f32) -> f32 {
  %c = arith.constant 1.0 : f32
  %y = arith.addf %x, %c : f32
  return %y : f32
}
builtin.module {
  func.func @b() { return }
}
func.func @c() { return }
"""


def test_paused_gc_turns_the_collector_off_inside_and_back_on() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    try:
        with paused_gc():
            raise KeyError
    except KeyError:
        pass
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_walk_helpers_match_xdsl_walks() -> None:
    module = LocatingParser(make_context(), TEXT, "t.mlir").parse_module()
    expected = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    assert [f.sym_name.data for f in expected] == ["a", "b", "c"]
    assert ops_of_class(module, func.FuncOp) == expected
    assert ops_of_class(module, type(module)) == [op for op in module.walk() if isinstance(op, type(module))]
    body = expected[0].body.blocks[0]
    assert block_ops(body) == list(body.ops)


def test_all_ops_and_class_tuples_match_xdsl_walks() -> None:
    module = LocatingParser(make_context(), TEXT, "t.mlir").parse_module()
    assert all_ops(module) == list(module.walk())
    classes = (func.FuncOp, func.ReturnOp)
    assert ops_of_class(module, classes) == [op for op in module.walk() if isinstance(op, classes)]


LINALG = """
func.func @l(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>, %z: f32) -> tensor<4x2xf32> {
  %e = tensor.empty() : tensor<4x2xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x2xf32>) outs(%f : tensor<4x2xf32>) -> tensor<4x2xf32>
  return %m : tensor<4x2xf32>
}
"""


def test_ins_outs_matches_the_accessors() -> None:
    """Decoded once per segment attribute, the same values as `op.inputs` / `op.outputs`,
    also when the sizes do not add up to the operands (the accessors' answer then)."""
    module = LocatingParser(make_context(), LINALG, "t.mlir").parse_module()
    structured = [op for op in module.walk() if op.name in ("linalg.fill", "linalg.matmul")]
    assert len(structured) == 2
    for op in structured * 2:  # the second round reads the memo
        assert ins_outs(op) == (tuple(op.inputs), tuple(op.outputs))  # type: ignore[attr-defined]
    matmul = structured[1]
    matmul.properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, [1, 1])
    expected = (tuple(matmul.inputs), tuple(matmul.outputs))  # type: ignore[attr-defined]
    assert ins_outs(matmul) == expected


def test_class_has_trait_and_grid_shapes_match_xdsl() -> None:
    from xdsl.traits import IsolatedFromAbove, IsTerminator, NoTerminator, SymbolTable

    from shardc.dialects.shard import DYNAMIC, GridOp
    from shardc.ir.traits import has_trait

    text = "shard.grid @g(shape = 2x?x4)\nshard.grid @h(shape = 3)\n" + TEXT
    module = LocatingParser(make_context(), text, "t.mlir").parse_module()
    for op in module.walk():
        for trait in (IsolatedFromAbove, IsTerminator, NoTerminator, SymbolTable):
            assert has_trait(op, trait) == op.has_trait(trait), (op.name, trait)
    grids = ops_of_class(module, GridOp)
    for grid in grids * 2:  # the second round reads the memo
        assert grid.shape_tuple == tuple(None if d == DYNAMIC else d for d in grid.shape.get_values())
    assert [g.shape_tuple for g in grids] == [(2, None, 4), (3,)]
    grids[1].properties["shape"] = grids[0].shape
    assert grids[1].shape_tuple == (2, None, 4)


def test_region_blocks_lists_xdsls_blocks() -> None:
    from xdsl.ir import Block, Region

    from shardc.ir.walk import region_blocks

    blocks = [Block(), Block(), Block()]
    assert region_blocks(Region(blocks)) == blocks
    assert region_blocks(Region()) == []


def test_cse_op_hash_is_the_same_for_equal_ops() -> None:
    """CSE's key hashes ops that compare equal alike (commutative operands in either
    order, attributes and properties in any order) and tells result types apart."""
    from shardc.passes.cse import _Info  # pyright: ignore[reportPrivateUsage]

    text = """
func.func @f(%a: i32, %b: i32) -> (i32, i32, i32, i64) {
  %0 = arith.addi %a, %b : i32
  %1 = arith.addi %b, %a : i32
  %2 = arith.subi %a, %b {x = 1 : i32, y = 2 : i32} : i32
  %3 = arith.subi %a, %b {y = 2 : i32, x = 1 : i32} : i32
  %4 = arith.constant 1 : i32
  %5 = arith.constant 1 : i64
  return %0, %1, %2, %5 : i32, i32, i32, i64
}
"""
    module = LocatingParser(make_context(), text, "t.mlir").parse_module()
    ops = [op for op in module.walk() if op.name.startswith("arith.")]
    infos = [_Info(op) for op in ops]
    for first, second in ((0, 1), (2, 3)):
        assert infos[first] == infos[second]
        assert hash(infos[first]) == hash(infos[second])
    assert infos[4] != infos[5]


def test_scalar_type_test_per_class_matches_isinstance() -> None:
    from xdsl.dialects.builtin import AnyFloat, IndexType, IntegerType, TensorType, f16, f32, f64, i1, i64

    from shardc.interfaces.sharding import is_int_index_or_float

    for t in (f32, TensorType(f32, [2]), i1, i64, IndexType(), f16, f64, TensorType(i64, []), f32):
        assert is_int_index_or_float(t) == isinstance(t, IntegerType | IndexType | AnyFloat), t
