"""convert-shard-to-mpi in-process: DLTI keys, get_sharding, no shard op left."""

from __future__ import annotations

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

from shardc.context import make_context
from shardc.lowering.shard_to_mpi import ConvertShardToMPIPass
from shardc.lowering.shard_to_mpi_builder import world_rank


def lower(text: str):
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    ConvertShardToMPIPass().apply(ctx, module)
    module.verify()
    return module


@pytest.mark.parametrize("key", ["MPI:comm_world_rank", "MPI:comm_world-rank"])
def test_rank_keys(key: str) -> None:
    module = Parser(make_context(), f'module attributes {{dlti.map = #dlti.map<"{key}" = 5>}} {{}}').parse_module()
    assert world_rank(module) == 5




def test_shard_annotation_left_is_an_error() -> None:
    with pytest.raises(DiagnosticException, match="failed to legalize operation 'shard.shard'"):
        lower(
            """
            shard.grid @g(shape = 2)
            func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
              %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
              %0 = shard.shard %a to %s : tensor<4xf32>
              return %0 : tensor<4xf32>
            }
            """
        )


def test_only_grids_remain() -> None:
    module = lower(
        """
        module attributes {dlti.map = #dlti.map<"MPI:comm_world_rank" = 3>} {
          shard.grid @g(shape = 2x2)
          func.func @f(%a: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<8x2xf32>, index) {
            %0 = shard.all_reduce %a on @g grid_axes = [1] reduction = average : tensor<4x2xf32> -> tensor<4x2xf32>
            %1 = shard.all_gather %0 on @g grid_axes = [0] gather_axis = 0 : tensor<4x2xf32> -> tensor<8x2xf32>
            %2 = shard.process_linear_index on @g : index
            return %0, %1, %2 : tensor<4x2xf32>, tensor<8x2xf32>, index
          }
        }
        """
    )
    names = {op.name for op in module.walk()}
    assert {n for n in names if n.startswith("shard.")} == {"shard.grid"}
    assert {"mpi.allreduce", "mpi.allgather", "arith.divf"} <= names
    # The collectives' colors and keys are constants for rank 3; the process index is
    # mpi.comm_rank, as trunk lowers it, which canonicalize folds.
    assert sum(op.name == "mpi.comm_rank" for op in module.walk()) == 1


@pytest.mark.parametrize(
    "op, message",
    [
        (
            "shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<7xf32>",
            "Result size along the gather axis must be an exact multiple of the input size along the gather axis.",
        ),
        (
            "shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<3x2xf32> -> tensor<6x3xf32>",
            "Result and input shapes must match along non-gather axes.",
        ),
        (
            "shard.reduce_scatter %x on @g grid_axes = [0] scatter_axis = 0 : tensor<3xf32> -> tensor<2xf32>",
            "Input size along the scatter axis must be an exact multiple of the output size along the scatter axis.",
        ),
        (
            "shard.reduce_scatter %x on @g grid_axes = [0] scatter_axis = 0 : tensor<3xf32> -> tensor<0xf32>",
            "Output size along the scatter axis must be non-zero.",
        ),
    ],
)
def test_gather_and_scatter_shape_checks(op: str, message: str) -> None:
    """The lowering's own shape checks, for IR that was not verified first."""
    operand, result = op.rsplit(": ", 1)[1].split(" -> ")
    with pytest.raises(DiagnosticException, match=message.replace(".", r"\.")):
        lower(
            f"""
            shard.grid @g(shape = 2)
            func.func @f(%x: {operand}) -> {result} {{
              %0 = {op}
              return %0 : {result}
            }}
            """
        )
