"""Driver of test_automix_mpi.py: the built-in GPT trained in float64 on the ranks of
COMM_WORLD under a mixed policy (FSDP for the MLP and embeddings, ZeRO for attention,
plain DP for norms: `--tp` over the rest); rank 0 prints its losses, the single-rank
run's, and the policy's per-parameter storage and compute specs as JSON. `--notp GROUP`
turns TP off for the attention or MLP group (or both) instead."""

from __future__ import annotations

import argparse
import json

import numpy as np
from mpi4py import MPI

from shardc.training.axis import LayoutOverride, resolve
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.trainer import TrainingConfig, reference_losses, train_mpi

ap = argparse.ArgumentParser()
ap.add_argument("--tp", type=int, default=1)
ap.add_argument("--notp", choices=("attention", "mlp", "both"), help="a TP-off mix instead: this group (or both) whole over shard")
args = ap.parse_args()

MODEL = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=8, vocab_size=32)
MIX = (LayoutOverride(r".*ln_.*", False, False, name="norms"), LayoutOverride(r".*attn.*", True, False, name="attention"))
if args.notp:  # attention DP without TP, the MLP FSDP without TP, or both
    MIX = tuple(o for g, o in (("attention", LayoutOverride(r".*attn.*", False, False, name="attention", tp=False)), ("mlp", LayoutOverride(r".*mlp.*", True, True, name="mlp", tp=False))) if args.notp in (g, "both"))
cfg = TrainingConfig(MODEL, per_device_batch=2, steps=3, lr=1e-2, warmup_steps=1, dtype="float64", eval_batches=1).shard(args.tp, True, True, overrides=MIX)
data = np.random.default_rng(0).integers(0, MODEL.vocab_size, 3000).astype(np.int32)
result = train_mpi(cfg, data)
if MPI.COMM_WORLD.Get_rank() == 0:
    assert result is not None
    ref, ref_params = reference_losses(cfg, data, result.grid)
    worst = max(float(np.max(np.abs(result.params[p] - ref_params[p]))) for p in ref_params)
    layouts = {s.path: resolve(s.axes, cfg.plan, cfg.policy, s.path) for s in param_specs(MODEL)}
    storage = {path: str(lay.storage) for path, lay in layouts.items()}
    compute = {path: str(lay.compute) for path, lay in layouts.items()}
    print(json.dumps({"grid": str(result.grid), "losses": list(result.losses), "ref": ref, "param_diff": worst, "storage": storage, "compute": compute}))
