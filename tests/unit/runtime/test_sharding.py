"""RuntimeSharding: the local piece of a global array per device and back."""

import numpy as np
import pytest

from shardc.runtime.execute.comm import CommError, delinearize
from shardc.runtime.execute.sharding import RuntimeSharding, even_piece, resolve_grid


def test_even_piece_gives_remainder_to_trailing_pieces():
    assert [even_piece(10, 4, k) for k in range(4)] == [(0, 2), (2, 4), (4, 7), (7, 10)]
    assert [even_piece(8, 4, k) for k in range(4)] == [(0, 2), (2, 4), (4, 6), (6, 8)]


def test_resolve_grid():
    assert resolve_grid((2, None), 6) == (2, 3)
    assert resolve_grid((None,), 4) == (4,)
    assert resolve_grid((None, None, 4), 4) == (1, 1, 4)
    with pytest.raises(CommError, match="2 dynamic dimensions"):
        resolve_grid((None, None), 4)
    with pytest.raises(CommError, match="has 4 devices but the world has 2"):
        resolve_grid((2, 2), 2)


G = np.arange(10 * 6, dtype=np.float64).reshape(10, 6) + 1


@pytest.mark.parametrize(
    "grid,sh",
    [
        ((4,), RuntimeSharding("g", (4,), ((0,),))),
        ((4,), RuntimeSharding("g", (4,), ((), (0,)))),
        ((2, 2), RuntimeSharding("g", (2, 2), ((1,), (0,)))),
        ((2, 2), RuntimeSharding("g", (2, 2), ((0, 1),))),
        ((2, 2), RuntimeSharding("g", (2, 2), ((1, 0),))),
        ((4,), RuntimeSharding("g", (4,), ((0,),), sharded_dims_offsets=(0, 1, 5, 6, 10))),
        ((4,), RuntimeSharding("g", (4,), ((0,),), halo_sizes=(1, 2))),
        ((2, 2), RuntimeSharding("g", (2, 2), ((0,), (1,)), halo_sizes=(2, 1, 1, 1))),
        ((4,), RuntimeSharding("g", (4,), ((),))),
    ],
)
def test_local_parts_and_assemble_round_trip(grid, sh):
    parts = [sh.local_part(G, grid, delinearize(r, grid)) for r in range(int(np.prod(grid)))]
    for r, p in enumerate(parts):
        assert p.shape == sh.local_shape(G.shape, grid, delinearize(r, grid))
    np.testing.assert_array_equal(sh.assemble(parts, grid), G)


def test_halo_cells_hold_the_neighbours_data_and_zero_outside():
    sh = RuntimeSharding("g", (2,), ((0,),), halo_sizes=(1, 2))
    x = np.arange(8, dtype=np.int32) + 1
    np.testing.assert_array_equal(sh.local_part(x, (2,), (0,)), [0, 1, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal(sh.local_part(x, (2,), (1,)), [4, 5, 6, 7, 8, 0, 0])


def test_in_group_order_follows_split_axes_order():
    x = np.arange(4)
    sh = RuntimeSharding("g", (2, 2), ((1, 0),))
    # device (0, 1) has in-group index 1*2 + 0 = 2 over axes [1, 0]
    np.testing.assert_array_equal(sh.local_part(x, (2, 2), (0, 1)), [2])


def test_offsets_must_match_the_dimension():
    sh = RuntimeSharding("g", (2,), ((0,),), sharded_dims_offsets=(0, 3, 7))
    with pytest.raises(CommError, match="end at 7 but dimension 0 has size 8"):
        sh.local_part(np.zeros(8), (2,), (0,))
