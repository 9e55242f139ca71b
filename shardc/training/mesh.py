"""The 2-D device grid of training: (batch, shard).

`batch` divides examples (data replicas, and ZeRO/FSDP state), `shard` divides the model
computation within a replica (tensor parallelism). Ranks are laid out by id with `shard`
fastest, so rank r sits at (r // tp, r % tp): a tensor-parallel group is `tp` consecutive
ranks, and it stays within one host when tp divides the ranks per host (MPI's
shared-memory split supplies that number; here it is a parameter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the shard dialect is loaded only where IR is built (not on a cache hit)
    from shardc.dialects.shard import GridOp

BATCH = "batch"
SHARD = "shard"
MESH_AXES = (BATCH, SHARD)


class GridError(ValueError):
    """A grid that cannot be built from the world size, tp and ranks per host."""


@dataclass(frozen=True)
class Grid:
    batch: int
    shard: int
    name: str = "grid"

    @property
    def shape(self) -> tuple[int, int]:
        return (self.batch, self.shard)

    @property
    def size(self) -> int:
        return self.batch * self.shard

    def axis_size(self, axis: str) -> int:
        return self.shape[self.axis_index(axis)]

    @staticmethod
    def axis_index(axis: str) -> int:
        try:
            return MESH_AXES.index(axis)
        except ValueError:
            raise GridError(f"unknown mesh axis {axis!r} (expected one of {MESH_AXES})") from None

    def coords(self, rank: int) -> tuple[int, int]:
        """(batch index, shard index) of a rank."""
        if not 0 <= rank < self.size:
            raise GridError(f"rank {rank} is outside the grid of {self.size} ranks")
        return divmod(rank, self.shard)

    def rank_of(self, batch_index: int, shard_index: int) -> int:
        return batch_index * self.shard + shard_index

    def grid_op(self) -> GridOp:
        """`shard.grid @<name>(shape = <batch>x<shard>)`: axis 0 is batch, axis 1 shard."""
        from shardc.dialects.shard import GridOp

        return GridOp(self.name, [self.batch, self.shard])

    def __str__(self) -> str:
        return f"(batch={self.batch}, shard={self.shard})"


def make_grid(world: int, tp: int = 1, ranks_per_host: int | None = None, name: str = "grid") -> Grid:
    """The grid (batch = world // tp, shard = tp)."""
    if world < 1:
        raise GridError(f"world size must be positive, got {world}")
    if tp < 1:
        raise GridError(f"tp must be positive, got {tp}")
    if world % tp:
        raise GridError(f"tp={tp} does not divide the world size {world}")
    if ranks_per_host is not None:
        if ranks_per_host < 1:
            raise GridError(f"ranks per host must be positive, got {ranks_per_host}")
        if ranks_per_host % tp:
            raise GridError(
                f"tp={tp} does not divide the {ranks_per_host} ranks per host: "
                "a tensor-parallel group must stay within one host"
            )
    return Grid(world // tp, tp, name)


def global_batch(per_device_batch: int, grid: Grid, accum_steps: int = 1) -> int:
    """Examples per optimizer step: per-device batch x data replicas x accumulation steps
    (the tp devices of a replica share their examples)."""
    if per_device_batch < 1 or accum_steps < 1:
        raise GridError("per-device batch and accumulation steps must be positive")
    return per_device_batch * grid.batch * accum_steps
