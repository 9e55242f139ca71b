"""convert-shard-to-mpi against mlir-opt 22.1.8.

Each case goes through `mlir-opt --convert-shard-to-mpi --canonicalize` and through
shardc's pass (in-process) followed by mlir-opt's `--canonicalize`; the outputs must
be equal after sorting each run of constants (canonicalization hoists them in the
order it meets them) and renaming SSA values. mlir-opt's canonicalize is used on our
side too because xDSL's folds less (index_cast, affine index ops, scf.if), which is a
canonicalize difference, not a lowering one.

Only ops 22.1.8 lowers like trunk are compared. Known 22.1.8/trunk differences, where
we follow trunk: process_multi_index (22.1.8: remsi/divsi chain; trunk:
affine.delinearize_index), all_reduce (22.1.8 collapses the buffer to 1-D, linearizes
the comm_split key with a wrong basis, splits even when grid_axes cover the grid, and
crashes on single-axis groups). Those are the xfail cases below.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.printer import print_module
from shardc.lowering.shard_to_mpi import ConvertShardToMPIPass
from shardc.testing.normalize import normalize_ssa_names
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found"),
]

DLTI = 'module attributes {{dlti.map = #dlti.map<"MPI:comm_world_rank" = {rank}>}} {{\n{body}\n}}'

PROCESS_INDICES = """
shard.grid @g(shape = 3x4x5)
func.func @linear() -> index {
  %0 = shard.process_linear_index on @g : index
  return %0 : index
}
func.func @multi() -> (index, index) {
  %0:2 = shard.process_multi_index on @g axes = [2, 0] : index, index
  return %0#0, %0#1 : index, index
}
"""

NEIGHBORS = """
shard.grid @g(shape = 3x4x5)
func.func @n(%d: index) -> (index, index, index, index, index, index) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %a:2 = shard.neighbors_linear_indices on @g[%c2, %c0, %c4] split_axes = [0] : index, index
  %b:2 = shard.neighbors_linear_indices on @g[%c2, %c0, %c4] split_axes = [1] : index, index
  %c:2 = shard.neighbors_linear_indices on @g[%c2, %d, %c4] split_axes = [1] : index, index
  return %a#0, %a#1, %b#0, %b#1, %c#0, %c#1 : index, index, index, index, index, index
}
"""

SHARDING = """
shard.grid @g(shape = 2x2x4)
func.func @plain(%a: tensor<2x4xf32>) -> (tensor<2x4xf32>, !shard.sharding) {
  %s = shard.sharding @g split_axes = [[0, 1], [2]] : !shard.sharding
  return %a, %s : tensor<2x4xf32>, !shard.sharding
}
func.func @halos(%a: tensor<6x8xf32>) -> (tensor<6x8xf32>, !shard.sharding) {
  %s = shard.sharding @g split_axes = [[1], [2]] halo_sizes = [1, 2, 3, 0] : !shard.sharding
  return %a, %s : tensor<6x8xf32>, !shard.sharding
}
func.func @offsets(%a: tensor<?x?xf32>) -> (tensor<?x?xf32>, !shard.sharding) {
  %s = shard.sharding @g split_axes = [[0], [2]] sharded_dims_offsets = [0, 1, 5, 0, 3, 4, 6, 9] : !shard.sharding
  return %a, %s : tensor<?x?xf32>, !shard.sharding
}
"""

SHARD_SHAPE = """
shard.grid @g(shape = 2x2x4)
func.func @even(%d: index) -> (index, index, index) {
  %s = shard.sharding @g split_axes = [[0], [2]] : !shard.sharding
  %0:3 = shard.shard_shape dims = [7, 10, 3] sharding = %s device = [1, 0, %d] : index, index, index
  return %0#0, %0#1, %0#2 : index, index, index
}
func.func @offsets(%d: index) -> (index, index) {
  %s = shard.sharding @g split_axes = [[0], [2]] sharded_dims_offsets = [0, 3, 5, 0, 2, 4, 6, 8] : !shard.sharding
  %0:2 = shard.shard_shape dims = [5, 8] sharding = %s device = [1, 0, %d] : index, index
  return %0#0, %0#1 : index, index
}
"""

UPDATE_HALO = """
shard.grid @g(shape = 3x4x5)
func.func @halo3d(%a: memref<12x12x12xi8>) -> memref<12x12x12xi8> {
  %r = shard.update_halo %a on @g split_axes = [[2], [1], [0]] halo_sizes = [1, 2, 3, 4, 5, 6] : memref<12x12x12xi8>
  return %r : memref<12x12x12xi8>
}
func.func @halo_tensor(%a: tensor<12x10xf32>) -> tensor<12x10xf32> {
  %r = shard.update_halo %a on @g split_axes = [[], [1]] halo_sizes = [2, 0] : tensor<12x10xf32>
  return %r : tensor<12x10xf32>
}
"""

ALL_REDUCE = """
shard.grid @g(shape = 3x4x5)
func.func @sub(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = shard.all_reduce %a on @g grid_axes = [0, 1] reduction = max : tensor<3x4xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
"""

CASES = {
    "process_linear_index": DLTI.format(rank=24, body=PROCESS_INDICES.split("func.func @multi")[0]),
    "process_linear_index_dynamic": PROCESS_INDICES.split("func.func @multi")[0],
    "process_multi_index_dlti": DLTI.format(rank=37, body=PROCESS_INDICES),
    "neighbors": NEIGHBORS,
    "sharding": SHARDING,
    "shard_shape": SHARD_SHAPE,
    "update_halo_dlti": DLTI.format(rank=24, body=UPDATE_HALO),
    "update_halo_rank0": DLTI.format(rank=0, body=UPDATE_HALO),
}

XFAIL_CASES = {
    "process_multi_index_dynamic": (
        PROCESS_INDICES,
        "22.1.8 lowers process_multi_index to a remsi/divsi chain, trunk to affine.delinearize_index",
    ),
    "all_reduce_subgroup": (
        DLTI.format(rank=7, body=ALL_REDUCE),
        "22.1.8 collapses the buffer to 1-D and computes the comm_split key with a wrong basis",
    ),
}

_CONSTANT = re.compile(r"^\s*%\S+ = arith\.constant ")


def sort_constant_runs(text: str) -> str:
    """Sort each run of consecutive arith.constant lines (canonicalize's hoisting order
    depends on the order it visits ops, not on the program's meaning)."""
    out: list[str] = []
    run: list[str] = []
    for line in text.splitlines():
        if _CONSTANT.match(line):
            run.append(line)
            continue
        out.extend(sorted(run))
        run = []
        out.append(line)
    out.extend(sorted(run))
    return "\n".join(out)


def comparable(text: str) -> str:
    return normalize_ssa_names(sort_constant_runs(text))


def mlir_opt(text: str, *flags: str) -> str:
    result = run_mlir_opt("-", *flags, stdin=text)
    assert result.returncode == 0, result.stderr
    return result.stdout


def shardc_lowered(text: str) -> str:
    ctx = make_context()
    module = Parser(ctx, text, "<case>").parse_module()
    ConvertShardToMPIPass().apply(ctx, module)
    module.verify()
    out = StringIO()
    print_module(module, out)
    return out.getvalue()


def check(text: str) -> None:
    expected = mlir_opt(text, "--convert-shard-to-mpi", "--canonicalize")
    ours = mlir_opt(shardc_lowered(text), "--canonicalize")
    assert comparable(ours) == comparable(expected)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_mlir_opt(name: str) -> None:
    check(CASES[name])


@pytest.mark.parametrize("name", sorted(XFAIL_CASES))
def test_known_22_1_8_differences(name: str) -> None:
    text, reason = XFAIL_CASES[name]
    try:
        check(text)
    except AssertionError:
        pytest.xfail(reason)


def test_sort_constant_runs_only_reorders_constants() -> None:
    text = "  %c2 = arith.constant 2 : index\n  %c1 = arith.constant 1 : index\n  return %c1"
    assert sort_constant_runs(text).splitlines()[0].endswith("1 : index")
