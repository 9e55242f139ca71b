"""`test-grid-resharding-partition` run in-process: registration, folding, errors."""

from __future__ import annotations

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

from shardc.context import make_context
from shardc.ir.printer import module_to_string
from shardc.passes import all_passes
from shardc.passes.test_resharding import TestReshardingPass

PAIR = """
shard.grid @grid(shape = 4)
func.func @f(%x: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{
  %a = shard.sharding @grid split_axes = {src} : !shard.sharding
  %0 = shard.shard %x to %a : tensor<{shape}xf32>
  %b = shard.sharding @grid split_axes = {tgt} : !shard.sharding
  %1 = shard.shard %0 to %b annotate_for_users : tensor<{shape}xf32>
  return %1 : tensor<{shape}xf32>
}}
"""


def run(text: str) -> str:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    TestReshardingPass().apply(ctx, module)
    module.verify()
    return module_to_string(module)


def test_registered_under_mlir_opts_name():
    assert all_passes()["test-grid-resharding-partition"]() is TestReshardingPass


def test_annotations_and_dead_shardings_are_erased():
    out = run(PAIR.format(shape="8x4", src="[[0]]", tgt="[[], [0]]"))
    assert "shard.shard" not in out and "shard.sharding" not in out
    assert out.count("shard.all_to_all") == 1
    assert "tensor.cast" not in out  # the identity cast after all_to_all is folded


def test_unpaired_annotations_are_kept():
    text = PAIR.format(shape="8", src="[[0]]", tgt="[[0]]").replace(" annotate_for_users", "")
    out = run(text)
    assert out.count("shard.shard ") == 2


def test_other_grid_user_is_not_resharded():
    text = PAIR.format(shape="8", src="[[]]", tgt="[[0]]").replace(
        "%b = shard.sharding @grid", "%b = shard.sharding @other"
    ).replace("shard.grid @grid(shape = 4)", "shard.grid @grid(shape = 4)\nshard.grid @other(shape = 2)")
    out = run(text)
    assert "shard.all_slice" not in out and "annotate_for_users" in out


def test_impossible_layout_is_a_diagnostic():
    with pytest.raises(DiagnosticException, match=r"cannot reshard %x of shape 6 from @grid split_axes = \[\[\]\] "
                       r"to @grid split_axes = \[\[0\]\]: dimension 0 of size 6 does not split evenly"):
        run(PAIR.format(shape="6", src="[[]]", tgt="[[0]]"))
