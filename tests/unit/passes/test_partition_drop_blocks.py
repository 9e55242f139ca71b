"""shard-partition removes the original body by detaching it when every block was
partitioned (nothing kept can read its values) and erases it, dropping its uses, when a
kept block remains."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.passes import partition
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_programs import generate_chain

# The entry block has no annotation and stays; the partitioned block reads its %c.
KEPT_BLOCK = """
shard.grid @grid(shape = 2)
func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %c = arith.constant dense<1.0> : tensor<4xf32>
  cf.br ^bb1
^bb1:
  %sh = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %s = shard.shard %c to %sh : tensor<4xf32>
  %t = shard.shard %s to %sh annotate_for_users : tensor<4xf32>
  return %t : tensor<4xf32>
}
"""

MLP = """
shard.grid @grid(shape = 2)
func.func @mlp(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %sh = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %sh : tensor<16x32xf32>
  %e = tensor.empty() : tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %ws : tensor<8x16xf32>, tensor<16x32xf32>) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %m : tensor<8x32xf32>
}
"""


def _partitioned(text: str, propagate: bool = True) -> ModuleOp:
    ctx = make_context()
    module = LocatingParser(ctx, text, "t.mlir").parse_module()
    if propagate:
        ShardingPropagationPass().apply(ctx, module)
    ShardPartitionPass().apply(ctx, module)
    return module


def _uses_outside(module: ModuleOp) -> list[str]:
    """Uses of the module's values by ops that are not in the module any more."""
    inside = {id(op) for op in module.walk()}
    return [
        use.operation.name
        for op in module.walk()
        for value in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args))
        for use in value.uses
        if id(use.operation) not in inside
    ]


def test_a_kept_block_loses_the_uses_of_the_original_ops() -> None:
    module = _partitioned(KEPT_BLOCK, propagate=False)  # (propagation takes one block)
    assert "shard.shard" not in module_to_string(module)
    assert _uses_outside(module) == []


@pytest.mark.parametrize("text", [MLP, None])
def test_a_whole_body_is_detached_with_the_same_result(text: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    text = text or generate_chain(40, 3)
    erased: list[object] = []
    real = partition._erase_blocks  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(partition, "_erase_blocks", lambda r, b: (erased.append(b), real(r, b)))
    detached = module_to_string(_partitioned(text))
    assert erased == []
    monkeypatch.setattr(
        partition, "_drop_original_blocks", lambda r, b, whole: partition._erase_blocks(r, b)  # pyright: ignore[reportPrivateUsage]
    )
    assert module_to_string(_partitioned(text)) == detached
    assert erased
