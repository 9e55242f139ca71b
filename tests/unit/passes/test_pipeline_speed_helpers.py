"""The pipeline's speed helpers keep xDSL's answers: the collector is off only inside a
pass, and the linked-list walks list what xDSL's walks list, in the same order."""

import gc

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.walk import all_ops, block_ops, ops_of_class
from shardc.passes.greedy import paused_gc
from xdsl.dialects import func

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
