"""Horizontal fusion (`shardc.runtime.codegen.horizontal`): same-bodied independent elementwise
generics run as one kernel call; results bitwise equal to one call per generic, donated
arrays still written in place, no IR text in the kernel, numpy path when switched off."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from shardc.runtime.codegen import horizontal  # the run time (what the tests patch) is in horizontal_run
from shardc.runtime.execute import horizontal_run
from shardc.runtime.codegen.compile import compile_module, compile_text
from shardc.runtime.execute.kernels import fused_run
from shardc.training.gpt import GPTConfig, param_specs
from shardc.training.optimizer import AdamWConfig, adamw_donation
from shardc.training.step import build_adamw_step

needs_numba = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

CFG = GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=64)


def groups(cm, name: str) -> list[horizontal.Group]:
    return [v for v in cm.functions[name].__globals__.values() if isinstance(v, horizontal.Group)]


def adamw(group: bool, donate: bool = True):
    specs = param_specs(CFG)
    module = ModuleOp([build_adamw_step(CFG, AdamWConfig()).func])
    old, horizontal.GROUP = horizontal.GROUP, group
    try:
        return specs, compile_module(module, "adamw", donate=adamw_donation(len(specs)) if donate else None)
    finally:
        horizontal.GROUP = old


def state(specs, seed: int = 0) -> list[list[np.ndarray]]:
    r = np.random.default_rng(seed)
    p, g, m, v = ([r.standard_normal(s.shape, np.float32) for s in specs] for _ in range(4))
    return [p, g, m, [np.abs(x) for x in v]]


def steps(cm, st, n: int = 3) -> list[np.ndarray]:
    k = len(st[0])
    out: list[np.ndarray] = []
    for t in range(1, n + 1):
        out = list(cm.call("adamw_step", *st[0], *st[1], *st[2], *st[3], np.float32(1e-2), t, np.float32(0.5)))  # type: ignore[arg-type]
        st[0], st[2], st[3] = out[:k], out[k : 2 * k], out[2 * k :]
    return out


def test_adamw_groups_by_body_decayed_and_not():
    """Two groups: the decayed parameters (matrices) and the rest (biases, gains); their
    bodies differ (weight decay), so they are not one group."""
    specs, cm = adamw(True)
    gs = groups(cm, "adamw_step")
    sizes = sorted(len(g.members) for g in gs)
    decayed = sum(s.decay for s in specs)
    assert sizes == sorted([decayed, len(specs) - decayed])
    assert cm.source.count("run_group") == 2 and "run_structured" not in cm.source
    _, plain = adamw(False)
    assert groups(plain, "adamw_step") == [] and "run_group" not in plain.source


@pytest.mark.slow
@needs_numba
@pytest.mark.parametrize("donate", [True, False])
def test_one_call_per_group_bitwise_equal_and_in_place(monkeypatch, donate):
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    specs, cm = adamw(True, donate)
    _, plain = adamw(False, donate)
    a, b = state(specs), state(specs)
    params = list(a[0])
    got, want = steps(cm, a), steps(plain, b)
    assert all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(got, want))  # bitwise: no NaN here
    gs = groups(cm, "adamw_step")
    assert [g.calls for g in gs] == [3, 3]  # one kernel call per group per step
    n = len(specs)
    if donate:  # the caller's arrays hold the result, as without grouping
        assert all(r is p for r, p in zip(got[:n], params))
        assert plain.donated("adamw_step") == cm.donated("adamw_step")
    else:
        assert not any(np.shares_memory(r, p) for r, p in zip(got[:n], params))


@pytest.mark.slow
@needs_numba
def test_equal_to_per_parameter_kernels_too(monkeypatch):
    """Against the per-parameter numba kernels (every array over the size threshold), not
    only the numpy path the small ones take."""
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", 0)
    specs, cm = adamw(True)
    _, plain = adamw(False)
    got, want = steps(cm, state(specs, 1)), steps(plain, state(specs, 1))
    assert all(np.array_equal(x, y) for x, y in zip(got, want))


def test_numpy_switch_and_small_groups_run_member_by_member(monkeypatch):
    specs, cm = adamw(True)
    _, plain = adamw(False)
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    got, want = steps(cm, state(specs)), steps(plain, state(specs))
    assert all(np.array_equal(x, y) for x, y in zip(got, want))
    assert all(g.calls == 0 for g in groups(cm, "adamw_step"))
    monkeypatch.delenv("SHARDC_KERNELS")
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 1 << 30)
    steps(cm, state(specs))
    assert all(g.calls == 0 for g in groups(cm, "adamw_step"))


def _generic(x: str, ty: str, s: str, sty: str, body: str, out: str) -> str:
    return f"""
  %{out}e = tensor.empty() : {ty}
  %{out} = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}} ins(%{x}, %{s} : {ty}, {sty}) outs(%{out}e : {ty}) {{
  ^bb0(%a: {ty.split("x")[-1][:-1]}, %b: {sty}, %o: {ty.split("x")[-1][:-1]}):
{body}
  }} -> {ty}"""


MUL = "    %c = arith.constant 3.0 : f32\n    %m = arith.mulf %a, %b : f32\n    %r = arith.addf %m, %c : f32\n    linalg.yield %r : f32"


def test_members_differing_in_body_scalar_or_dtype_are_not_grouped():
    t, t64 = "tensor<8xf32>", "tensor<8xf64>"
    body64 = MUL.replace("f32", "f64")
    other_const = MUL.replace("3.0", "4.0")
    ops = [
        _generic("x0", t, "s", "f32", MUL, "r0"),
        _generic("x1", t, "s", "f32", MUL, "r1"),  # groups with r0
        _generic("x2", t, "s2", "f32", MUL, "r2"),  # another scalar
        _generic("x3", t, "s", "f32", other_const, "r3"),  # another constant
        _generic("y", t64, "d", "f64", body64, "r4"),  # another dtype
        _generic("x0", t, "s", "f32", MUL.replace("%m, %c", "%c, %m"), "r5"),  # operands wired otherwise
    ]
    text = f"""
func.func @f(%x0: {t}, %x1: {t}, %x2: {t}, %x3: {t}, %y: {t64}, %s: f32, %s2: f32, %d: f64) -> ({t}, {t}, {t}, {t}, {t64}, {t}) {{{"".join(ops)}
  return %r0, %r1, %r2, %r3, %r4, %r5 : {t}, {t}, {t}, {t}, {t64}, {t}
}}
"""
    cm = compile_text(text)
    (g,) = groups(cm, "f")
    assert len(g.members) == 2
    xs = [np.arange(8, dtype=np.float32) + k for k in range(4)]
    out = cm.call("f", *xs, np.arange(8.0), np.float32(2), np.float32(5), 1.5)
    s, s2 = np.float32(2), np.float32(5)
    want = [xs[0] * s + 3, xs[1] * s + 3, xs[2] * s2 + 3, xs[3] * s + 4, np.arange(8.0) * 1.5 + 3, xs[0] * s + 3]
    assert all(np.array_equal(o, w) for o, w in zip(out, want))  # type: ignore[arg-type]


@needs_numba
def test_group_kernel_holds_no_ir_text(monkeypatch):
    """Hostile symbol, value and location names and constants never reach the grouped
    kernel's source: it holds numbered names and the templates' words only."""
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    t = "tensor<8xf32>"
    loc = 'loc("x\\n__import__(\\"os\\").system(\\"x\\")")'
    body = MUL.replace("%r = arith.addf %m, %c : f32", f"%r = arith.addf %m, %c : f32 {loc}").replace("3.0", "1.2345678")
    hostile = '@"f\\"); __import__(\\"os\\").system(\\"x\\") #"'
    text = f"""
func.func {hostile}(%x0: {t}, %x1: {t}, %s: f32) -> ({t}, {t}) {{{_generic("x0", t, "s", "f32", body, "r0")}{_generic("x1", t, "s", "f32", body, "r1")}
  return %r0, %r1 : {t}, {t}
}}
"""
    assert "__import__" in text
    cm = compile_text(text)
    (name,) = cm.functions
    (g,) = groups(cm, name)
    assert g.source is not None
    src = g.source
    assert "1.2345678" not in src and "os" not in src and "system" not in src
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src))
    allowed = {"def", "kernel", "for", "if", "else", "in", "range", "len", "m", "shape", "np", "float32", "math", "sqrt", "abs"}
    assert all(w in allowed or re.fullmatch(r"[qrwxiabcd]\d+", w) for w in words), words - allowed
    xs = [np.arange(8, dtype=np.float32), np.arange(8, dtype=np.float32) * 2]
    out = cm.call(name, *xs, np.float32(3))
    assert g.calls == 1
    assert all(np.array_equal(o, x * np.float32(3) + np.float32(1.2345678)) for o, x in zip(out, xs))  # type: ignore[arg-type]


@needs_numba
def test_arrays_in_another_layout_run_member_by_member(monkeypatch):
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    t = "tensor<8xf32>"
    text = f"""
func.func @f(%x0: {t}, %x1: {t}, %s: f32) -> ({t}, {t}) {{{_generic("x0", t, "s", "f32", MUL, "r0")}{_generic("x1", t, "s", "f32", MUL, "r1")}
  return %r0, %r1 : {t}, {t}
}}
"""
    cm = compile_text(text)
    (g,) = groups(cm, "f")
    x = np.arange(16, dtype=np.float32)[::2]  # strided: not flattened in place
    out = cm["f"](x, np.ones(8, np.float32), np.float32(2))
    assert g.calls == 0 and np.array_equal(out[0], x * 2 + 3)  # type: ignore[index]
    out = cm["f"](np.ascontiguousarray(x), np.ones(8, np.float32), np.float32(2))
    assert g.calls == 1 and np.array_equal(out[0], x * 2 + 3)  # type: ignore[index]


@pytest.mark.slow
@needs_numba
def test_sharded_training_bitwise_equal_grouped_or_not(monkeypatch):
    """FSDP, ZeRO and tp=2 on simulated ranks, and one rank: the grouped update gives
    bitwise the losses and parameters of one call per parameter."""
    from shardc.training.trainer import TrainingConfig, compile_program, train_simulated

    monkeypatch.setenv("SHARDC_CACHE", "0")  # the compile cache's key does not see horizontal.GROUP
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    small = GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    data = np.random.default_rng(1).integers(0, 32, 5000).astype(np.int32)
    base = TrainingConfig(small, per_device_batch=2, steps=3, warmup_steps=1)
    for cfg, world in ((base, 1), (base.shard(fsdp=True), 2), (base.shard(zero=True, fsdp=False), 2), (base.shard(tp=2, zero=False), 2)):
        runs = []
        for group in (True, False):
            monkeypatch.setattr(horizontal, "GROUP", group)
            prog = compile_program(cfg, cfg.grid(world))
            gs = groups(prog.compiled, "adamw_step")
            assert bool(gs) == group
            runs.append(train_simulated(cfg, data, world, program=prog))
            if group:
                assert all(g.calls > 0 for g in gs if g.source is not None) and any(g.source is not None for g in gs)
        got, want = runs
        assert got.losses == want.losses
        for k in want.params:
            assert np.array_equal(got.params[k], want.params[k]), k
