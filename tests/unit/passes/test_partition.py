"""shard-partition in-process: reduction kinds and neutral elements per combiner, the
linear process index of reduction groups, and no Python exception on any generated
program (each either partitions or fails with a diagnostic)."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine, DiagnosticError
from shardc.ir.printer import print_module
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_programs import generate_program, traversal_for


def _partition(text: str) -> str:
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = Parser(make_context(), text).parse_module()
        ShardPartitionPass().apply(make_context(), module)
        module.verify()
        out = StringIO()
        print_module(module, out)
        return out.getvalue()


def _reduction(combiner: str, elem: str, grid: str = "2", axes: str = "0") -> str:
    return f"""
shard.grid @g(shape = {grid})
func.func @f(%x: tensor<8x8x{elem}>, %i: tensor<8x{elem}>) -> tensor<8x{elem}> {{
  %s = shard.sharding @g split_axes = [[{axes}]] : !shard.sharding
  %r = shard.sharding @g split_axes = [[]] : !shard.sharding
  %a = shard.shard %x to %s annotate_for_users : tensor<8x8x{elem}>
  %b = shard.shard %i to %r annotate_for_users : tensor<8x{elem}>
  %0 = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}} ins(%a : tensor<8x8x{elem}>) outs(%b : tensor<8x{elem}>) {{
  ^bb0(%in: {elem}, %out: {elem}):
    %c = {combiner} %in, %out : {elem}
    linalg.yield %c : {elem}
  }} -> tensor<8x{elem}>
  %e = shard.shard %0 to %r : tensor<8x{elem}>
  %f = shard.shard %e to %r annotate_for_users : tensor<8x{elem}>
  return %f : tensor<8x{elem}>
}}
"""


# combiner, element type, neutral constant as mlir-opt prints it, all_reduce's kind
# (None: sum, the default, not printed). andi is trunk's bitwise_and (22.1.8: sum).
KINDS = [
    ("arith.addf", "f32", "0.000000e+00 : f32", None),
    ("arith.mulf", "f32", "1.000000e+00 : f32", "product"),
    ("arith.maximumf", "f32", "0xFF800000 : f32", "max"),
    ("arith.minimumf", "f32", "0x7F800000 : f32", "min"),
    ("arith.maximumf", "bf16", "0xFF80 : bf16", "max"),
    ("arith.addi", "i32", "0 : i32", None),
    ("arith.ori", "i32", "0 : i32", "bitwise_or"),
    ("arith.xori", "i32", "0 : i32", "bitwise_xor"),
    ("arith.andi", "i32", "-1 : i32", "bitwise_and"),
    ("arith.maxsi", "i8", "-128 : i8", "max"),
    ("arith.minsi", "i8", "127 : i8", "min"),
    ("arith.minui", "i32", "-1 : i32", "min"),
    ("arith.muli", "i32", "1 : i32", "product"),
]


@pytest.mark.parametrize(("combiner", "elem", "neutral", "kind"), KINDS)
def test_reduction_over_split_axis(combiner: str, elem: str, neutral: str, kind: str | None) -> None:
    out = _partition(_reduction(combiner, elem))
    assert f"arith.constant {neutral}" in out
    assert "scf.if" in out and "linalg.fill" in out
    reduce_line = next(line for line in out.splitlines() if "shard.all_reduce" in line)
    if kind is None:
        assert "reduction" not in reduce_line
    else:
        assert f"reduction =  {kind}" in reduce_line


def test_linear_index_of_three_axes() -> None:
    out = _partition(_reduction("arith.addf", "f32", grid="2x2x2", axes="0, 1, 2"))
    assert "#map = affine_map<()[s0, s1] -> (s0 * s1)>" in out
    assert "#map1 = affine_map<()[s0, s1, s2, s3, s4] -> (s1 * s2 + s3 + s0 * (s2 * s4))>" in out


def test_generic_combiner_is_an_error() -> None:
    with pytest.raises(DiagnosticError, match="no neutral element"):
        _partition(_reduction("arith.subf", "f32"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_no_python_exception(seed: int) -> None:
    """Propagation then partition on generated programs: a result or a diagnostic."""
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = Parser(make_context(), generate_program(seed)).parse_module()
        try:
            ShardingPropagationPass(traversal=traversal_for(seed)).apply(make_context(), module)  # type: ignore[arg-type]
            ShardPartitionPass().apply(make_context(), module)
        except DiagnosticError:
            return
        module.verify()
