"""Reshard on load: a checkpoint saved on any of 1, 2 or 4 ranks (tp 1/2, ZeRO on/off,
FSDP on/off) loads onto any other of them. Loading is exact (the state each rank
assembles is the saved one, bit for bit) and reads only the slices the rank holds; the
continued run equals the single-rank run continued from the same checkpoint, to float32
rounding (the reduction order changes with the grid)."""

from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from test_checkpoint import LAYOUTS, TRAIN, config, program_for, train

from shardc.training.checkpoint import BatchStream, load_rank, open_checkpoint, state_arrays, step_dir
from shardc.training.spmd import RankState, assemble

pytestmark = pytest.mark.slow  # one module fixture trains and saves on all 15 layouts

SINGLE = (1, 1, False, False)
SAVED_AT = 2


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Per layout, a checkpoint at step 2 of a run on that layout."""
    root = tmp_path_factory.mktemp("reshard")
    out = {}
    for layout in LAYOUTS:
        d = root / "-".join(map(str, layout))
        train(layout, SAVED_AT, d, every=SAVED_AT)
        out[layout] = step_dir(d, SAVED_AT)
    return out


def saved_state(directory: Path) -> dict[str, np.ndarray]:
    """The global arrays of a checkpoint, put together from every piece (the oracle)."""
    m = open_checkpoint(directory).manifest
    out = {}
    for path, a in m["arrays"].items():
        x = np.full(a["shape"], np.nan, dtype=a["dtype"])
        for p in a["pieces"]:
            with safe_open(str(directory / p["file"]), framework="numpy") as f:
                x[tuple(slice(o, o + n) for o, n in zip(p["offset"], p["shape"]))] = f.get_tensor(path)
        out[path] = x
    return out


@pytest.fixture(scope="module")
def continued(saved):
    """Per saved layout: its state, and the single-rank run continued from it by one step."""
    return {layout: (saved_state(d), train(SINGLE, SAVED_AT + 1, resume=d)) for layout, d in saved.items()}


@pytest.mark.parametrize("target", LAYOUTS, ids=lambda t: f"to{t}")
def test_reshard_on_load(saved, continued, target):
    program = program_for(target)
    world = target[0]
    for source, directory in saved.items():
        ck = open_checkpoint(directory)
        state, ref = continued[source]
        # Exact: every rank's pieces put together are the saved state; each rank reads
        # exactly the bytes of the slices it holds.
        per_rank = [load_rank(ck, program, r) for r in range(world)]
        for r, got in enumerate(per_rank):
            held = sum(a.nbytes for a in (*got.params, *got.mu, *got.nu))
            assert got.bytes_read == held, (source, target, r)
        for i, (path, shape, spec) in enumerate(state_arrays(program)):
            pieces = [[*g.params, *g.mu, *g.nu][i] for g in per_rank]
            assert np.array_equal(assemble(pieces, shape, spec, program.grid), state[path]), (source, target, path)
        # The continued run equals the single-rank one continued from the same state.
        got = train(target, SAVED_AT + 1, resume=directory)
        assert got.log[:SAVED_AT] == ref.log[:SAVED_AT]  # the history comes from the checkpoint
        np.testing.assert_allclose(got.losses[-1], ref.losses[-1], rtol=1e-5, err_msg=f"{source} -> {target}")
        for k, v in ref.params.items():
            np.testing.assert_allclose(got.params[k], v, rtol=1e-5, atol=1e-6, err_msg=f"{source} -> {target}: {k}")


def test_the_comparison_sees_the_moments(saved, continued):
    """The continued run above depends on the restored optimizer state: one step by hand
    from the loaded state gives the reference; with AdamW's moments zeroed it does not."""
    directory = saved[(4, 2, True, True)]
    _, ref = continued[(4, 2, True, True)]
    program = program_for(SINGLE)
    ck = open_checkpoint(directory)
    got = load_rank(ck, program, 0)
    cfg = config(SINGLE, SAVED_AT + 1)

    def one_step(mu, nu):
        stream = BatchStream(TRAIN, program.batch, cfg.model.block_size, cfg.seed)
        stream.restore(ck.progress["data"])
        state = RankState.from_local(program, 0, got.params, mu, nu, got.step)
        state.train_step([next(stream)], cfg.schedule().lr_at(SAVED_AT + 1))
        return dict(zip((s.path for s in program.specs), state.local_params()))

    restored = one_step(got.mu, got.nu)
    zeroed = one_step([np.zeros_like(m) for m in got.mu], [np.zeros_like(v) for v in got.nu])
    for k, v in ref.params.items():
        assert np.array_equal(restored[k], v), k
    assert max(np.abs(zeroed[k] - v).max() for k, v in ref.params.items()) > 1e-4  # 100x the tolerance
