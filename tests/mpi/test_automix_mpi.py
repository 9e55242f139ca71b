"""A mixed policy (a layout kind per parameter group) under real `mpiexec`: the float64
losses and parameters equal the single-rank run's to 1e-9, on 2 ranks (tp=1) and on 4
(tp=2), and the storage layouts are the mix asked for."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank

DRIVER = str(Path(__file__).with_name("automix_main.py"))


@pytest.mark.parametrize("n, tp", [(2, 1), (4, 2)])
def test_mixed_policy_trains_as_one_rank_in_float64(n, tp):
    p = run_ranks(n, [DRIVER, "--tp", str(tp)], timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout[p.stdout.index("{"):])
    assert got["grid"] == f"(batch={n // tp}, shard={tp})"
    np.testing.assert_allclose(got["losses"], got["ref"], rtol=1e-9, atol=1e-9)
    assert got["param_diff"] < 1e-9
    storage = got["storage"]
    assert "batch" in storage["h.0.mlp.c_fc.weight"] and "batch" in storage["wte"]  # FSDP: stored split
    assert "batch" not in storage["h.0.attn.c_attn.weight"]  # ZeRO: stored as computed
    assert storage["h.0.ln_1.weight"] == "PartitionSpec(None)"  # DP


@pytest.mark.parametrize("n, group", [(2, "attention"), (2, "mlp"), (2, "both"), (4, "both")])
def test_a_group_without_tp_trains_as_one_rank_in_float64(n, group):
    """tp=2 with the attention (DP), the MLP (FSDP) or both computed whole over `shard`:
    sharding propagation gathers / slices the activations at the group's edges, and the
    losses and parameters are the single rank's; on 4 ranks the TP-off MLP is still
    stored split over batch (FSDP)."""
    p = run_ranks(n, [DRIVER, "--tp", "2", "--notp", group], timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout[p.stdout.index("{"):])
    assert got["grid"] == f"(batch={n // 2}, shard=2)"
    if n == 4:
        assert got["storage"]["h.0.mlp.c_fc.weight"] == "PartitionSpec(None, ('batch',))"
    np.testing.assert_allclose(got["losses"], got["ref"], rtol=1e-9, atol=1e-9)
    assert got["param_diff"] < 1e-9
    whole = {"attention": ["h.0.attn.c_attn.weight"], "mlp": ["h.0.mlp.c_fc.weight"], "both": ["h.0.attn.c_attn.weight", "h.0.mlp.c_fc.weight"]}[group]
    for path in whole:
        assert "shard" not in got["compute"][path], got["compute"][path]
    for path in {"h.0.attn.c_attn.weight", "h.0.mlp.c_fc.weight"} - set(whole):
        assert "shard" in got["compute"][path]  # the other group keeps TP
