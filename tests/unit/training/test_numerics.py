"""The IR GPT against a numpy GPT: forward, gradients (finite differences), AdamW."""

import numpy as np
import pytest
from numpy_gpt import adamw, ordered
from numpy_gpt import loss as np_loss

from shardc.runtime import compile_module
from shardc.training.gpt import GPTConfig, build_loss_module, init_params, param_specs
from shardc.training.optimizer import AdamWConfig


@pytest.mark.parametrize("bias", [True, False])
def test_forward_matches_numpy(bias):
    cfg = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=11, bias=bias)
    rng = np.random.default_rng(0)
    params = {k: v + rng.normal(0, 0.1, v.shape) for k, v in init_params(cfg, 1, np.float64).items()}
    tokens = rng.integers(0, 11, (3, 8))
    targets = rng.integers(0, 11, (3, 8))
    cm = compile_module(build_loss_module(cfg, 3, "float64"))
    got = cm.call("loss", *ordered(cfg, params), tokens, targets, np.arange(11))
    assert got.shape == ()
    np.testing.assert_allclose(got, np_loss(cfg, params, tokens, targets), rtol=1e-12)


def test_train_step_loss_and_accumulation(tiny_step, tiny_inputs):
    cfg, _, cm = tiny_step
    params, tokens, targets = tiny_inputs
    specs = param_specs(cfg)
    zeros = [np.zeros(s.shape) for s in specs]
    loss, *grads = cm.call("train_step", *ordered(cfg, params), *zeros, tokens, targets, np.arange(cfg.vocab_size))
    np.testing.assert_allclose(loss, np_loss(cfg, params, tokens, targets), rtol=1e-12)
    # The accumulator input is added to: a second microbatch doubles the sum.
    _, *twice = cm.call("train_step", *ordered(cfg, params), *grads, tokens, targets, np.arange(cfg.vocab_size))
    for g, g2 in zip(grads, twice):
        np.testing.assert_allclose(g2, 2 * g, rtol=1e-12, atol=1e-15)


def test_gradients_match_finite_differences(tiny_step, tiny_inputs):
    cfg, _, cm = tiny_step
    params, tokens, targets = tiny_inputs
    specs = param_specs(cfg)
    zeros = [np.zeros(s.shape) for s in specs]
    _, *grads = cm.call("train_step", *ordered(cfg, params), *zeros, tokens, targets, np.arange(cfg.vocab_size))
    eps = 1e-6
    for s, g in zip(specs, grads):
        fd = np.zeros(s.shape)
        for idx in np.ndindex(*s.shape):
            bumped = dict(params)
            for sign in (1, -1):
                a = params[s.path].copy()
                a[idx] += sign * eps
                bumped[s.path] = a
                fd[idx] += sign * np_loss(cfg, bumped, tokens, targets) / (2 * eps)
        assert np.abs(fd).max() > 0, s.path
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8 * np.abs(fd).max(), err_msg=s.path)


def test_adamw_step_matches_numpy(tiny_step):
    cfg, _, cm = tiny_step
    opt = AdamWConfig()
    rng = np.random.default_rng(1)
    specs = param_specs(cfg)
    p = [rng.normal(size=s.shape) for s in specs]
    g = [rng.normal(size=s.shape) for s in specs]
    m = [rng.normal(size=s.shape) for s in specs]
    v = [rng.random(size=s.shape) for s in specs]
    lr, step, scale = 0.01, 7, 0.5
    out = cm.call("adamw_step", *p, *g, *m, *v, lr, step, scale)
    n = len(specs)
    for i, s in enumerate(specs):
        ref = adamw(p[i], g[i] * scale, m[i], v[i], lr, step, opt.beta1, opt.beta2, opt.eps, opt.weight_decay, s.decay)
        for got, want in zip((out[i], out[n + i], out[2 * n + i]), ref):
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=s.path)


def test_weight_decay_only_on_matrices():
    specs = {s.path: s for s in param_specs(GPTConfig(n_layer=1))}
    assert specs["h.0.attn.c_attn.weight"].decay and specs["wte"].decay
    assert not specs["h.0.attn.c_attn.bias"].decay and not specs["ln_f.weight"].decay
