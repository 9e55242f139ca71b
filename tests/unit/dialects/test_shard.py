"""The Python side of shardc's shard dialect: the Sharding value, grid helpers, shard
shapes, builders and the result names mlir-opt gives."""

import pytest
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.dialects import test as test_dialect
from xdsl.ir import Operation
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.dialects import shard
from shardc.dialects.shard import (
    DYNAMIC,
    GridOp,
    ReductionKind,
    Sharding,
    ShardingOp,
    ShardOp,
    lookup_grid,
    shard_shape,
)


def parse(text: str) -> ModuleOp:
    module = Parser(make_context(), text).parse_module()
    module.verify()
    return module


def ops_of(module: ModuleOp, kind: type[Operation]) -> list:
    return [op for op in module.walk() if isinstance(op, kind)]


# --- Sharding equality (MLIR's Sharding::operator==) ----------------------------------


def test_trailing_empty_split_axes_are_ignored():
    assert Sharding("g", ((0,),)) == Sharding("g", ((0,), (), ()))
    assert hash(Sharding("g", ((0,),))) == hash(Sharding("g", ((0,), ())))
    assert Sharding("g", ((),)) == Sharding("g")


def test_leading_empty_split_axes_matter():
    assert Sharding("g", ((), (0,))) != Sharding("g", ((0,),))


def test_grid_halos_and_offsets_matter():
    base = Sharding("g", ((0,),))
    assert base != Sharding("h", ((0,),))
    assert base != Sharding("g", ((0,),), static_halo_sizes=(1, 1))
    assert base != Sharding("g", ((0,),), static_sharded_dims_offsets=(0, 2, 4))
    assert Sharding("g", ((0,),), (1, 2)) == Sharding("g", ((0,), ()), (1, 2))


def test_dynamic_entries_compare_by_value_identity():
    a, b = (test_dialect.TestOp(result_types=[i64]).results[0] for _ in range(2))
    with_a = Sharding("g", ((0,),), (DYNAMIC, 1), dynamic_halo_sizes=(a,))
    assert with_a == Sharding("g", ((0,),), (DYNAMIC, 1), dynamic_halo_sizes=(a,))
    assert with_a != Sharding("g", ((0,),), (DYNAMIC, 1), dynamic_halo_sizes=(b,))


def test_shardings_are_hashable_values():
    shardings = {Sharding("g", ((0,), ())), Sharding("g", ((0,),)), Sharding("g", ((1,),))}
    assert len(shardings) == 2


def test_fully_replicated():
    assert Sharding("g", ((), ())).is_fully_replicated
    assert not Sharding("g", ((), (1,))).is_fully_replicated


def test_sharding_of_op_and_back():
    module = parse(
        """
        shard.grid @g(shape = 2x4)
        func.func @f(%h: i64) {
          %s = shard.sharding @g split_axes = [[1], [], []] halo_sizes = [%h, 2] : !shard.sharding
          %t = shard.sharding @g split_axes = [[1]] halo_sizes = [%h, 2] : !shard.sharding
          return
        }
        """
    )
    s, t = ops_of(module, ShardingOp)
    assert s.sharding == t.sharding == Sharding.of(t.result)
    assert s.sharding.split_axes == ((1,),)
    assert s.split_axes_tuple == ((1,), (), ())
    rebuilt = s.sharding.to_op()
    assert rebuilt.sharding == s.sharding
    assert rebuilt.static_halo_sizes.get_values() == (DYNAMIC, 2)


def test_sharding_of_other_value_is_an_error():
    with pytest.raises(ValueError, match="shard.sharding"):
        Sharding.of(test_dialect.TestOp(result_types=[i64]).results[0])


# --- Grids ---------------------------------------------------------------------------------


def test_grid_shape_tuple_marks_dynamic_as_none():
    module = parse("shard.grid @g(shape = 2x?x4)")
    (grid,) = ops_of(module, GridOp)
    assert grid.shape_tuple == (2, None, 4)
    assert grid.rank == 3
    assert grid.group_size([0, 2]) == 8
    assert grid.group_size() is None


def test_grid_builder():
    grid = GridOp("g", [2, None], visibility="private")
    assert grid.shape.get_values() == (2, DYNAMIC)
    assert grid.attributes["sym_visibility"].data == "private"


def test_private_keyword_is_parsed_as_visibility():
    (grid,) = ops_of(parse("shard.grid private @g(shape = 4)"), GridOp)
    assert grid.attributes["sym_visibility"].data == "private"


def test_lookup_grid_uses_nearest_symbol_table():
    module = parse(
        """
        shard.grid @g(shape = 2)
        func.func @g2() { return }
        func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
          %0 = shard.all_reduce %a on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
          return %0 : tensor<4xf32>
        }
        """
    )
    (reduce,) = ops_of(module, shard.AllReduceOp)
    (grid,) = ops_of(module, GridOp)
    assert lookup_grid(reduce, reduce.grid) is grid
    assert lookup_grid(reduce, "g") is grid
    assert lookup_grid(reduce, "g2") is None
    assert lookup_grid(GridOp("lonely", [2]), "lonely") is None


# --- Shard shapes (MLIR's shardShape) -----------------------------------------------------


def test_even_split():
    assert shard_shape((8, 12), (2, 3), ((0,), (1,))) == (4, 4)
    assert shard_shape((8, 12), (2, 3), ((), (1, 0))) == (8, 2)
    assert shard_shape((), (2, 3), ((0,),)) == ()


def test_dynamic_grid_or_tensor_gives_dynamic_dims():
    assert shard_shape((8, DYNAMIC), (None, 3), ((0,), (1,))) == (DYNAMIC, DYNAMIC)


def test_halos_widen_split_dims():
    assert shard_shape((8, 12), (2, 3), ((0,), (1,)), halo_sizes=(1, 2, 0, 1)) == (7, 5)
    assert shard_shape((8,), (2,), ((0,),), halo_sizes=(DYNAMIC, 1)) == (DYNAMIC,)


def test_offsets_give_static_size_only_when_uniform():
    assert shard_shape((12,), (4,), ((0,),), sharded_dims_offsets=(0, 3, 6, 9, 12)) == (3,)
    uneven = shard_shape((12,), (4,), ((0,),), sharded_dims_offsets=(0, 2, 5, 9, 12))
    assert uneven == (DYNAMIC,)


def test_sharding_shard_shape():
    sharding = Sharding("g", ((0,),), static_halo_sizes=(1, 1))
    assert sharding.shard_shape((8, 3), (4,)) == (4, 3)


# --- Builders --------------------------------------------------------------------------------


def test_builders_verify_in_context():
    module = parse(
        """
        shard.grid @g(shape = 2x2)
        func.func @f(%a: tensor<4x4xf32>, %h: i64) -> tensor<4x4xf32> {
          return %a : tensor<4x4xf32>
        }
        """
    )
    func = next(op for op in module.walk() if op.name == "func.func")
    block = func.regions[0].blocks[0]
    arg, halo = block.args
    sharding = ShardingOp("g", [[0], [1]], halo_sizes=[halo, 1, 0, 0])
    annotated = ShardOp(arg, sharding.result, annotate_for_users=True)
    block.insert_ops_before([sharding, annotated], block.last_op)
    module.verify()
    assert annotated.for_users and annotated.result.type == arg.type
    assert sharding.sharding.dynamic_halo_sizes == (halo,)


# --- Reductions and result names ------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ReductionKind))
def test_every_reduction_kind_round_trips(kind: ReductionKind):
    text = f"""
        shard.grid @g(shape = 2)
        func.func @f(%a: tensor<4xi32>) -> tensor<4xi32> {{
          %0 = shard.all_reduce %a on @g grid_axes = [0] reduction = {kind.value} : tensor<4xi32> -> tensor<4xi32>
          return %0 : tensor<4xi32>
        }}
        """
    (op,) = ops_of(parse(text), shard.AllReduceOp)
    assert op.reduction.data == kind
    assert str(op.reduction) == f"#shard<partial {kind.value}>"


NAMES = """
shard.grid @g(shape = 2x2)
func.func @f(%a: tensor<4x4xf32>, %i: index) {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %b = shard.shard %a to %s : tensor<4x4xf32>
  %gs:2 = shard.grid_shape @g : index, index
  %pm:2 = shard.process_multi_index on @g : index, index
  %pl = shard.process_linear_index on @g : index
  %n:2 = shard.neighbors_linear_indices on @g[%i, %i] split_axes = [0] : index, index
  %ss:2 = shard.shard_shape dims = [4, 4] sharding = %s device = [0, 0] : index, index
  %gsh = shard.get_sharding %b : tensor<4x4xf32> -> !shard.sharding
  %ag = shard.all_gather %a on @g grid_axes = [0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  %ar = shard.all_reduce %a on @g grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %as = shard.all_slice %a on @g grid_axes = [0] slice_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %aa = shard.all_to_all %a on @g grid_axes = [0] split_axis = 0 concat_axis = 1 : tensor<4x4xf32> -> tensor<2x8xf32>
  %bc = shard.broadcast %a on @g grid_axes = [0] root = [0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %ga = shard.gather %a on @g grid_axes = [0] gather_axis = 0 root = [0] : (tensor<4x4xf32>) -> tensor<8x4xf32>
  %rv = shard.recv %a on @g grid_axes = [0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %rd = shard.reduce %a on @g grid_axes = [0] root = [0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %rs = shard.reduce_scatter %a on @g grid_axes = [0] scatter_axis = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %sc = shard.scatter %a on @g grid_axes = [0] scatter_axis = 0 root = [0] : (tensor<4x4xf32>) -> tensor<2x4xf32>
  %sd = shard.send %a on @g grid_axes = [0] destination = [1] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %sh = shard.shift %a on @g grid_axes = [0] shift_axis = 0 offset = 1 : tensor<4x4xf32> -> tensor<4x4xf32>
  %uh = shard.update_halo %a on @g split_axes = [[0]] : tensor<4x4xf32>
  return
}
"""

EXPECTED_NAMES = {
    "shard.sharding": ["sharding"],
    "shard.shard": ["sharded"],
    "shard.grid_shape": ["grid_shape", None],
    "shard.process_multi_index": ["proc_linear_idx", None],
    "shard.process_linear_index": ["proc_linear_idx"],
    "shard.neighbors_linear_indices": ["down_linear_idx", "up_linear_idx"],
    "shard.shard_shape": ["shard_shape", None],
    "shard.get_sharding": [None],
    "shard.all_gather": ["all_gather"],
    "shard.all_reduce": ["all_reduce"],
    "shard.all_slice": ["all_slice"],
    "shard.all_to_all": ["all_to_all"],
    "shard.broadcast": ["broadcast"],
    "shard.gather": ["gather"],
    "shard.recv": ["recv"],
    "shard.reduce": ["reduce"],
    "shard.reduce_scatter": ["reduce_scatter"],
    "shard.scatter": ["scatter"],
    "shard.send": ["send"],
    "shard.shift": ["shift"],
    "shard.update_halo": [None],
}


def test_result_names_follow_get_asm_result_names():
    module = parse(NAMES)
    seen = {}
    for op in module.walk():
        if op.name.startswith("shard.") and op.results:
            seen[op.name] = list(op.get_asm_result_names())
    assert seen == EXPECTED_NAMES


def test_dialect_has_all_22_ops():
    assert len(list(shard.Shard.operations)) == 22


def test_sharding_with_dynamic_values_is_hashable():
    (value,) = test_dialect.TestOp(result_types=[i64]).results
    sharding = Sharding("g", ((0,),), (DYNAMIC, 1), dynamic_halo_sizes=(value,))
    assert {sharding, Sharding("g", ((0,), ()), (DYNAMIC, 1), dynamic_halo_sizes=(value,))} == {
        sharding
    }


def test_replicated_sharding_builds_one_empty_sub_array():
    assert Sharding("g").to_op().split_axes_tuple == ((),)


# -- replicated split axes are printed `[[]]`, never `[]` (which MLIR cannot parse) -------


def _text(op: Operation) -> str:
    from io import StringIO

    from xdsl.printer import Printer

    out = StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Sharding("g").to_op(),
        lambda: Sharding("g", ((), ())).to_op(),
        lambda: ShardingOp("g", []),
        lambda: ShardingOp("g", shard.GridAxesArrayAttr(())),
    ],
)
def test_replicated_sharding_prints_one_empty_sub_array(make):
    op = make()
    assert "split_axes = [[]]" in _text(op)
    assert op.split_axes_tuple == ((),)
    assert op.sharding.is_fully_replicated


def test_empty_split_axes_parse_as_trunk_prints_them():
    """Trunk prints a 0-d tensor's sharding `split_axes = []`; shardc reads and keeps it
    (Python-built empty axes stay `[[]]`, the replicated spelling)."""
    op = Parser(make_context(), "%s = shard.sharding @g split_axes = [] : !shard.sharding").parse_op()
    assert isinstance(op, ShardingOp)
    assert op.split_axes_tuple == ()
    assert "split_axes = [] :" in _text(op)
    assert op.sharding.is_fully_replicated


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("%0 = shard.grid_shape @g axes = [40000] : index", "integer value too large"),
        ("%0 = shard.grid_shape @g axes = [-32769] : index", "integer value too large"),
        ("%s = shard.sharding @g split_axes = [[32768]] : !shard.sharding", "failed to parse"),
    ],
)
def test_i16_overflow_is_a_parse_error(text: str, message: str):
    from xdsl.utils.exceptions import ParseError

    with pytest.raises(ParseError, match=message):
        Parser(make_context(), text).parse_op()


def test_i16_bounds_parse_and_print():
    op = Parser(make_context(), "%0:2 = shard.grid_shape @g axes = [32767, -32768] : index, index").parse_op()
    assert op.axes.get_values() == (32767, -32768)
    assert "axes = [32767, -32768]" in _text(op)
