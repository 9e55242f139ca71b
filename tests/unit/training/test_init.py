"""The GPT's initial parameters: N(0, std) from a counter-based generator, so each rank
makes only its own pieces and they equal the slices of the whole tensors on any grid
(1/2/4 ranks, tp x dp, ZeRO and FSDP), and RankState built from them is the state the
whole tensors would give."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shardc.training import gpt
from shardc.training.axis import GPT_PLAN, ShardingPolicy, resolve
from shardc.training.gpt import GPTConfig, InitialParams, ParamSpec, init_params, init_piece, init_std, normal_piece, param_specs
from shardc.training.mesh import Grid
from shardc.training.optimizer import AdamWConfig
from shardc.training.spmd import RankState, StepProgram, local_part, local_slices

CFG = GPTConfig(n_layer=2, n_head=4, n_embd=16, block_size=8, vocab_size=12)


def _moments(x: np.ndarray) -> tuple[float, float, float, float]:
    z = x.astype(np.float64).ravel()
    m, s = z.mean(), z.std()
    u = (z - m) / s
    return m, s, float((u**3).mean()), float((u**4).mean())


def test_draws_are_normal_with_the_asked_std():
    n = 1 << 21
    x = normal_piece("0:a", (n,), [slice(0, n)], 0.02)
    assert x.dtype == np.float32 and x.shape == (n,)
    m, s, skew, kurt = _moments(x)
    se = 0.02 / math.sqrt(n)
    assert abs(m) < 5 * se
    assert abs(s / 0.02 - 1) < 5 * math.sqrt(0.5 / n)
    assert abs(skew) < 5 * math.sqrt(6 / n) and abs(kurt - 3) < 5 * math.sqrt(24 / n)
    # the CDF at a grid of points (Kolmogorov-Smirnov distance, its 1e-4 level is 1.95/sqrt(n))
    z = np.sort(x.astype(np.float64) / 0.02)
    pts = np.linspace(-4, 4, 81)
    emp = np.searchsorted(z, pts) / n
    cdf = np.array([0.5 * (1 + math.erf(p / math.sqrt(2))) for p in pts])
    assert np.abs(emp - cdf).max() < 1.95 / math.sqrt(n)
    # tails reach past 5 sigma, and no value is beyond what 24-bit uniforms give
    assert 5.0 < np.abs(z).max() <= math.sqrt(-2 * math.log(2.0**-24)) + 1e-3


def test_neighbours_tensors_and_seeds_are_uncorrelated():
    n = 1 << 18
    a = normal_piece("0:a", (n,), [slice(0, n)], 1.0).astype(np.float64)
    b = normal_piece("0:b", (n,), [slice(0, n)], 1.0).astype(np.float64)
    c = normal_piece("1:a", (n,), [slice(0, n)], 1.0).astype(np.float64)
    bound = 5 / math.sqrt(n)
    for lag in (1, 2, 3, 64, 1 << 16):
        assert abs(np.corrcoef(a[:-lag], a[lag:])[0, 1]) < bound
    assert abs(np.corrcoef(a, b)[0, 1]) < bound and abs(np.corrcoef(a, c)[0, 1]) < bound
    assert abs(np.corrcoef(a**2, np.roll(a, 1) ** 2)[0, 1]) < bound  # no dependence in magnitude


@pytest.mark.parametrize(
    "shape, index",
    [
        ((1000,), (slice(3, 997),)),
        ((7, 300), (slice(2, 5), slice(1, 299))),
        ((5, 3, 4, 6), (slice(1, 4), slice(0, 3), slice(1, 3), slice(5, 6))),
        ((3, 70000), (slice(0, 3), slice(12345, 69999))),  # rows longer than a chunk
        ((300, 300), (slice(None), slice(150, 300))),  # several rows per chunk, a column split
        ((2, 3, 40000), (slice(1, 2), slice(0, 3), slice(0, 40000))),
        ((4, 5), (slice(2, 2), slice(0, 5))),  # empty
    ],
)
def test_pieces_equal_slices_of_the_whole(shape, index):
    whole = normal_piece("7:w", shape, [slice(0, n) for n in shape], 0.5)
    piece = normal_piece("7:w", shape, [slice(*s.indices(n)[:2]) for s, n in zip(index, shape)], 0.5)
    np.testing.assert_array_equal(piece, whole[index])


def test_init_params_follows_nanogpt():
    p = init_params(CFG, 3)
    assert isinstance(p, InitialParams) and list(p) == [s.path for s in param_specs(CFG)] and len(p) == len(param_specs(CFG))
    for s in param_specs(CFG):
        a = p[s.path]
        assert a.shape == s.shape and a.dtype == np.float32
        if s.init == "ones":
            assert (a == 1).all()
        elif s.init == "zeros":
            assert (a == 0).all()
        else:
            assert init_std(CFG, s) == (0.02 / math.sqrt(2 * CFG.n_layer) if s.init == "proj" else 0.02)
    big = GPTConfig(n_layer=4, n_head=4, n_embd=256, block_size=8, vocab_size=64)
    q = init_params(big, 0)
    for path, std in (("h.0.mlp.c_fc.weight", 0.02), ("h.1.mlp.c_proj.weight", 0.02 / math.sqrt(8))):
        assert abs(q[path].std() / std - 1) < 0.01
    # deterministic; seeds, tensors and layers differ
    r = init_params(big, 0)
    np.testing.assert_array_equal(q["wte"], r["wte"])
    assert not np.array_equal(init_params(big, 1)["wte"], q["wte"])
    assert not np.array_equal(q["h.0.mlp.c_fc.weight"], q["h.1.mlp.c_fc.weight"])


def test_dtypes_share_the_draws_and_order_does_not_matter():
    f32, f64 = init_params(CFG, 5), init_params(CFG, 5, np.float64)
    paths = [s.path for s in param_specs(CFG)]
    for path in reversed(paths):  # made in another order
        assert f64[path].dtype == np.float64
        np.testing.assert_array_equal(f64[path], f32[path].astype(np.float64))


def test_mapping_accepts_replacements_and_pieces_follow_them():
    p = init_params(CFG, 0)
    w = p["wte"]
    assert p["wte"] is w  # made once
    p["wte"] = w + 1
    np.testing.assert_array_equal(p.piece("wte", (slice(2, 5), slice(None))), (w + 1)[2:5])
    assert p.piece("wte", (slice(0, 1),)).base is None  # a new array, never a view
    with pytest.raises(KeyError):
        p["nope"] = w
    assert "wte" in p and "nope" not in p


def test_tensor_past_the_counter_is_refused():
    huge = ParamSpec("x", (1 << 16, 1 << 16), ("a", "b"), True)
    with pytest.raises(ValueError, match="counts to 2\\*\\*32"):
        init_piece(CFG, huge, 0, np.float32, (slice(0, 1), slice(0, 1)))


def _program(grid: Grid, policy: ShardingPolicy, dtype: str = "float32") -> StepProgram:
    """A StepProgram with the layouts of `policy` on `grid` (nothing compiled: RankState's
    construction reads only the layouts)."""
    specs = param_specs(CFG)
    layouts = [resolve(s.axes, GPT_PLAN, policy) for s in specs]
    return StepProgram(CFG, grid.batch, grid, policy, GPT_PLAN, dtype, AdamWConfig(), None, None, [], {}, {}, specs, layouts)  # type: ignore[arg-type]


GRIDS = [
    (Grid(1, 1), ShardingPolicy(1, False, False)),
    (Grid(2, 1), ShardingPolicy(1, True, False)),
    (Grid(2, 1), ShardingPolicy(1, True, True)),
    (Grid(4, 1), ShardingPolicy(1, True, True)),
    (Grid(1, 2), ShardingPolicy(2, True, False)),
    (Grid(1, 4), ShardingPolicy(4, True, True)),
    (Grid(2, 2), ShardingPolicy(2, True, False)),
    (Grid(2, 2), ShardingPolicy(2, True, True)),
]


@pytest.mark.parametrize("grid, policy", GRIDS, ids=[f"{g.batch}x{g.shard}-tp{p.tp}-zero{int(p.zero)}-fsdp{int(p.fsdp)}" for g, p in GRIDS])
def test_rank_states_hold_slices_of_the_whole_init(grid, policy):
    prog = _program(grid, policy)
    whole = {k: v.copy() for k, v in init_params(CFG, 11).items()}
    cut_somewhere = False
    for rank in range(grid.size):
        lazy = RankState(prog, rank, init_params(CFG, 11))  # makes only its pieces
        eager = RankState(prog, rank, whole)  # cuts them out of whole tensors
        for s, lay, a, b in zip(prog.specs, prog.layouts, lazy.params, eager.params):
            want = local_part(whole[s.path], lay.storage, grid, rank)
            assert a.shape == want.shape == prog.local_shape(s.shape, lay.storage, rank)
            np.testing.assert_array_equal(a, want)
            np.testing.assert_array_equal(b, want)
            assert a.flags.c_contiguous and a.dtype == np.float32
            cut_somewhere |= a.shape != s.shape
    assert cut_somewhere == (grid.size > 1 and (policy.tp > 1 or policy.fsdp))


def test_rank_state_casts_only_its_piece_and_never_aliases():
    prog = _program(Grid(2, 2), ShardingPolicy(2, True, True), "float64")
    whole = {k: v.copy() for k, v in init_params(CFG, 2).items()}
    st = RankState(prog, 3, whole)
    for s, lay, a in zip(prog.specs, prog.layouts, st.params):
        assert a.dtype == np.float64 and not np.shares_memory(a, whole[s.path])
        np.testing.assert_array_equal(a, whole[s.path][local_slices(s.shape, lay.storage, prog.grid, 3)].astype(np.float64))
    lazy = RankState(prog, 3, init_params(CFG, 2, np.float64))
    for a, b in zip(lazy.params, st.params):
        np.testing.assert_array_equal(a, b)


def test_pieces_are_made_without_the_whole_tensor(monkeypatch):
    """A rank asks the generator for exactly its slices, never for a whole tensor."""
    asked: list[tuple[tuple[int, ...], int]] = []
    real = gpt.normal_piece

    def spy(key, shape, index, std):
        out = real(key, shape, index, std)
        asked.append((tuple(shape), out.size))
        return out

    monkeypatch.setattr(gpt, "normal_piece", spy)
    prog = _program(Grid(2, 2), ShardingPolicy(2, True, True))
    RankState(prog, 1, init_params(CFG, 0))
    normal = [s for s in prog.specs if s.init in ("normal", "proj")]
    assert len(asked) == len(normal)
    assert sum(n for _, n in asked) < sum(math.prod(s.shape) for s in normal) / 2
