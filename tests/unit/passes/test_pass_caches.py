"""The speed devices of the passes keep their answers exact: per-pass memo of derived
op data, class-level lookups invalidated on registration, root-filtered pattern lists,
the garbage collector frozen only while a pass runs."""

from __future__ import annotations

import gc

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from shardc.context import make_context
from shardc.dialects.shard import ShardingOp, array_values, i64_array
from shardc.interfaces.sharding import (
    ShardingInfo,
    get_sharding_interface,
    indexing_maps,
    pass_cache,
    sharding_of,
)
from shardc.passes import fold_registry
from shardc.passes.gc_pause import paused_gc
from shardc.passes.greedy import PatternList

MODULE = """
shard.grid @g(shape = 2)
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.add ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  return %r : tensor<4x8xf32>
}
"""


def _ops():
    module = Parser(make_context(), MODULE).parse_module()
    ops = list(module.walk())
    add = next(o for o in ops if o.name == "linalg.add")
    sharding = next(o for o in ops if isinstance(o, ShardingOp))
    return add, sharding


def test_indexing_maps_are_memoized_only_inside_pass_cache():
    add, _ = _ops()
    impl = get_sharding_interface(add)
    assert impl is not None
    outside = indexing_maps(impl, add)
    assert indexing_maps(impl, add) is not outside  # recomputed
    with pass_cache():
        first = indexing_maps(impl, add)
        assert indexing_maps(impl, add) is first
        assert first == outside
    assert indexing_maps(impl, add) is not first


def test_sharding_values_are_memoized_per_op_inside_pass_cache():
    _, sharding = _ops()
    with pass_cache():
        assert sharding_of(sharding.result) is sharding_of(sharding.result)
        assert ShardingInfo.of(sharding.result) is ShardingInfo.of(sharding.result)
    assert sharding_of(sharding.result).split_axes == ((0,),)


def test_array_values_cached_on_the_attribute_without_changing_equality():
    attr = i64_array([1, 2, 3])
    assert array_values(attr) == (1, 2, 3)
    assert array_values(attr) is array_values(attr)
    assert attr == i64_array((1, 2, 3)) and hash(attr) == hash(i64_array((1, 2, 3)))


def test_fast_sharding_op_builder_matches_the_declared_format():
    op = ShardingOp("g", [[0], []], halo_sizes=[1, 2])
    assert list(op.properties) == [
        "grid", "split_axes", "static_sharded_dims_offsets", "static_halo_sizes", "operandSegmentSizes",
    ]
    assert array_values(op.properties["operandSegmentSizes"]) == (0, 0)  # type: ignore[arg-type]
    assert op.split_axes_tuple == ((0,), ())
    assert array_values(op.static_halo_sizes) == (1, 2)


class _OnlyConstants(RewritePattern):
    root_ops = (arith.ConstantOp,)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None: ...


class _Any(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None: ...


def test_pattern_list_leaves_out_patterns_for_other_roots_in_order():
    only, anything = _OnlyConstants(), _Any()
    patterns = PatternList((anything, only))
    constant = arith.ConstantOp(IntegerAttr(1, IndexType()))
    add = arith.AddiOp(constant, constant)
    assert patterns.patterns_for(constant) == (anything, only)
    assert patterns.patterns_for(add) == (anything,)


def test_fold_registry_lookups_follow_new_registrations():
    class Folded(arith.AddiOp):  # a throwaway subclass: the registry stays as it was
        pass

    assert fold_registry.registered_folder(Folded) is fold_registry.registered_folder(arith.AddiOp)

    def fold(op: Operation):
        return None

    fold_registry.register_folder(Folded)(fold)
    try:
        assert fold_registry.registered_folder(Folded) is fold
    finally:
        del fold_registry._FOLDERS[Folded]
        fold_registry._LOOKUPS.clear()


@pytest.mark.slow
def test_paused_gc_freezes_only_while_running_and_nests():
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with paused_gc():
        assert gc.get_freeze_count() > 0
        with paused_gc():
            assert gc.get_freeze_count() > 0
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0 and gc.isenabled()
