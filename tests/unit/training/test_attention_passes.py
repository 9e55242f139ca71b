"""The GPT step's attention spends no pass it need not: the backward's score recompute
is one contraction with the scale as a constant factor (BLAS's alpha, no scale pass
over q), and the forward divides by the row sums after the product with v (a pass over
[b, t, h, d], not over [b, h, t, u]). Each against the formulation it replaced: the
first bitwise (a power-of-two scale), the second within float32 rounding."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.arith import ConstantOp, DivfOp, MulfOp
from xdsl.dialects.linalg.ops import GenericOp

from shardc.training import ir_builder
from shardc.training.axis import GPT_PLAN, ShardingPolicy
from shardc.training.gpt import GPTConfig, init_params
from shardc.training.mesh import make_grid
from shardc.training.spmd import RankState, StepProgram
from shardc.training.step import build_step_module

CFG = GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=8, vocab_size=16)
BATCH = 2


def _reduces(op: GenericOp) -> bool:
    return any("reduction" in str(t) for t in op.iterator_types.data)


def _run(state: RankState) -> tuple[list[float], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(2):
        x = rng.integers(0, CFG.vocab_size, (BATCH, CFG.block_size)).astype(np.int32)
        y = rng.integers(0, CFG.vocab_size, (BATCH, CFG.block_size)).astype(np.int32)
        losses.append(state.train_step([(x, y)], 1e-3))
    return losses, [np.asarray(p) for p in state.params]


def _state() -> RankState:
    prog = StepProgram.build(CFG, BATCH, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN)
    return RankState(prog, 0, init_params(CFG, 0))


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE", "0")  # each build sees the formulation patched in


@pytest.mark.slow
def test_scores_recomputed_with_the_scale_as_a_factor(monkeypatch):
    module = build_step_module(CFG, BATCH, with_loss=False)
    scaled = [
        op for op in module.walk()
        if isinstance(op, GenericOp) and _reduces(op)
        and any(isinstance(o, MulfOp) and any(isinstance(x.owner, ConstantOp) for x in o.operands) for o in op.body.block.ops)
    ]
    assert len(scaled) == 1, "the attention backward's scores: one contraction with a constant factor"
    new = _run(_state())
    orig = ir_builder.FuncBuilder.einsum

    def before(self, spec, *xs, sizes=None, scale=None):  # (scale q) k^T
        if scale is None:
            return orig(self, spec, *xs, sizes=sizes)
        return orig(self, spec, self.unary("scale", spec.split(",")[0], xs[0], scale), *xs[1:], sizes=sizes)

    monkeypatch.setattr(ir_builder.FuncBuilder, "einsum", before)
    old = _run(_state())
    assert new[0] == old[0]
    for p, q in zip(new[1], old[1]):
        assert np.array_equal(p, q)


@pytest.mark.slow
def test_forward_normalises_after_the_product_with_v(monkeypatch):
    module = build_step_module(CFG, BATCH, with_loss=False)
    t, hd = CFG.block_size, CFG.n_embd // CFG.n_head
    divides = [
        tuple(op.results[0].type.get_shape()) for op in module.walk()
        if isinstance(op, GenericOp) and not _reduces(op) and len(op.inputs) == 2 and any(isinstance(o, DivfOp) for o in op.body.block.ops)
    ]
    assert (BATCH, t, CFG.n_head, hd) in divides  # y / z on [b, t, h, d]
    assert (BATCH, CFG.n_head, t, t) not in divides  # no e / z on [b, h, t, u]
    new = _run(_state())

    def attention(self, q, k, v, scale):  # the softmax normalised before p v
        saved: dict = {}

        def build():
            att = self.unary("scale", "bhtu", self.einsum("bthd,buhd->bhtu", q, k), scale)
            masked = self.causal_mask("bhtu", att, query="t", key="u")
            m = self.reduce_max("bhtu->bht", masked)
            e = self.unary("exp", "bhtu", self.sub("bhtu,bht->bhtu", masked, m))
            z = self.einsum("bhtu->bht", e)
            saved["lse"] = self.add("bht,bht->bht", m, self.unary("log", "bht", z))
            return self.einsum("bhtu,buhd->bthd", self.div("bhtu,bht->bhtu", e, z), v)

        return self._layer("attention", "bthd,buhd,buhd->bthd", (q, k, v), build, scale=scale, saved=saved)

    monkeypatch.setattr(ir_builder.FuncBuilder, "attention", attention)
    old = _run(_state())
    np.testing.assert_allclose(new[0], old[0], rtol=1e-6)
    # AdamW turns a gradient's rounding noise into moves of up to lr (1e-3) where the
    # gradient itself is about zero (a bias): a tenth of that bounds them here
    for p, q in zip(new[1], old[1]):
        np.testing.assert_allclose(p, q, rtol=0, atol=1e-4)
