"""Horizontal fusion of generics reading slices of arguments (`shardc.runtime.codegen.horizontal`):
a ZeRO rank updates its share of each parameter, a `tensor.extract_slice` at an offset
computed from its rank, with the all-gather of the previous parameter between two
updates. The slices and their offsets' arithmetic move up to the group's first member,
the group runs as one kernel call, strided slices are read as rows
(`horizontal_run._layout`), and results stay bitwise those of one call per generic."""

from __future__ import annotations

import re

import numpy as np
import pytest

from shardc.runtime.codegen import horizontal
from shardc.runtime.execute import horizontal_run
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.execute.kernels import fused_run

needs_numba = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

T, S, F = "tensor<8x32xf32>", "tensor<8x16xf32>", "f32"
ID = "affine_map<(d0, d1) -> (d0, d1)>"
SC = "affine_map<(d0, d1) -> ()>"


def _update(x: str, g: str, out: str) -> str:
    """`out = x * s + g` over 8x16 (the shape of an AdamW update: an array read, a
    scalar by SSA value, an out-of-place result)."""
    return f"""
  %{out}e = tensor.empty() : {S}
  %{out} = linalg.generic {{indexing_maps = [{ID}, {SC}, {ID}, {ID}], iterator_types = ["parallel", "parallel"]}} ins(%{x}, %s, %{g} : {S}, {F}, {S}) outs(%{out}e : {S}) {{
  ^bb0(%p: f32, %q: f32, %r: f32, %o: f32):
    %m = arith.mulf %p, %q : f32
    %y = arith.addf %m, %r : f32
    linalg.yield %y : f32
  }} -> {S}"""


def program(second_offset: str = "%o1 = arith.muli %j, %c8 : index") -> str:
    """Two updates of column slices of %a and %b at offsets computed from %i; between
    them, an op reading the first result (where ZeRO all-gathers it)."""
    return f"""
func.func @f(%a: {T}, %b: {T}, %g0: {S}, %g1: {S}, %s: f32, %i: index, %t: tensor<2xindex>) -> ({S}, {S}, {T}) {{
  %c16 = arith.constant 16 : index
  %o0 = arith.muli %i, %c16 : index
  %x0 = tensor.extract_slice %a[0, %o0] [8, 16] [1, 1] : {T} to {S}{_update("x0", "g0", "r0")}
  %big = tensor.insert_slice %r0 into %a[0, %o0] [8, 16] [1, 1] : {S} into {T}
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %j = arith.addi %i, %c1 : index
  {second_offset}
  %x1 = tensor.extract_slice %b[0, %o1] [8, 16] [1, 1] : {T} to {S}{_update("x1", "g1", "r1")}
  return %r0, %r1, %big : {S}, {S}, {T}
}}
"""


def groups(cm) -> list[horizontal.Group]:
    return [v for v in cm.functions["f"].__globals__.values() if isinstance(v, horizontal.Group)]


def data(seed: int = 0):
    r = np.random.default_rng(seed)
    a, b = (r.standard_normal((8, 32), np.float32) for _ in range(2))
    g0, g1 = (r.standard_normal((8, 16), np.float32) for _ in range(2))
    return a, b, g0, g1


def want(a, b, g0, g1, s, i):
    o0, o1 = 16 * i, 8 * (i + 1)
    r0 = a[:, o0 : o0 + 16] * s + g0
    big = a.copy()
    big[:, o0 : o0 + 16] = r0
    return [r0, b[:, o1 : o1 + 16] * s + g1, big]


def test_sliced_members_group_with_their_offsets_moved_up():
    cm = compile_text(program())
    (g,) = groups(cm)
    assert len(g.members) == 2
    src = cm.source
    # the second slice and its offset are computed before the group's call, and the
    # insert_slice reading the first result comes after it
    call = src.index("run_group")
    assert src.index("* (8)") < call and src.index("b_1[") < call < src.index(".copy()")


@needs_numba
@pytest.mark.parametrize("i", [0, 1])
def test_strided_slices_one_call_bitwise_equal(monkeypatch, i):
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    cm = compile_text(program())
    (g,) = groups(cm)
    a, b, g0, g1 = data(i)
    s = np.float32(1.5)
    assert not a[:, :16].flags.c_contiguous  # the slices are strided: read as 8 rows of 16
    out = cm.call("f", a, b, g0, g1, s, i, np.zeros(2, np.int64))
    assert g.calls == 1
    assert all(np.array_equal(o, w) for o, w in zip(out, want(a, b, g0, g1, s, i)))  # type: ignore[arg-type]
    monkeypatch.setattr(horizontal, "GROUP", False)
    plain = compile_text(program())
    assert groups(plain) == []
    ref = plain.call("f", a, b, g0, g1, s, i, np.zeros(2, np.int64))
    assert all(np.array_equal(o, w) for o, w in zip(out, ref))  # type: ignore[arg-type]


def test_strided_rows_are_views_indexed_as_the_contiguous_loop_is():
    """A strided member's loop reads and writes each array through a row view indexed by
    `i0` alone, as the contiguous branch does: with an offset per array (`a2[i2 + i0]`)
    LLVM left the loop scalar, and a ZeRO rank's AdamW over column slices ran 3.5x
    slower than over contiguous copies."""
    cm = compile_text(program())
    (g,) = groups(cm)
    src = g.source
    assert src is not None
    strided = src[src.index("else:") :]
    assert re.findall(r"\bc\d+ = a\d+\[i1 \* r0\[m, \d+\] : ", strided) and re.findall(r"\bd\d+ = b\d+\[i1 \* r0\[m, 1\] : ", strided)
    loop = strided.split("for i0 in range(r0[m, 1]):", 1)[1]
    indexed = re.findall(r"\b[a-z]\d+\[([^\]:]+)\]", loop)
    assert indexed and set(indexed) == {"i0"}, indexed


@needs_numba
def test_slices_whose_rows_do_not_merge_run_member_by_member(monkeypatch):
    """An inner stride (every other column): rows of one element would not vectorise, so
    the members run alone, with the same results."""
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    cm = compile_text(program())
    (g,) = groups(cm)
    a, b, g0, g1 = data(2)
    wide = np.repeat(a, 2, axis=1)[:, ::2]  # equal to a, inner stride 2
    assert np.array_equal(wide, a) and wide.strides[1] == 8
    s = np.float32(-0.5)
    out = cm.call("f", wide, b, g0, g1, s, 1, np.zeros(2, np.int64))
    assert g.calls == 0
    assert all(np.array_equal(o, w) for o, w in zip(out, want(a, b, g0, g1, s, 1)))  # type: ignore[arg-type]
    out = cm.call("f", a, b, g0, g1, s, 1, np.zeros(2, np.int64))
    assert g.calls == 1


def test_an_offset_from_anything_but_pure_index_arithmetic_keeps_members_apart():
    """An offset read from a tensor (not `arith`, `affine` or a rank query) is not moved:
    no group."""
    cm = compile_text(program("%o1 = tensor.extract %t[%c1] : tensor<2xindex>"))
    assert groups(cm) == []
    a, b, g0, g1 = data(3)
    s = np.float32(2.0)
    out = cm.call("f", a, b, g0, g1, s, 0, np.array([0, 8], np.int64))
    assert all(np.array_equal(o, w) for o, w in zip(out, want(a, b, g0, g1, s, 0)))  # type: ignore[arg-type]


def _rows_used(monkeypatch) -> list[int]:
    seen: list[int] = []
    real = horizontal_run._rows  # pyright: ignore[reportPrivateUsage]

    def counting(a):  # type: ignore[no-untyped-def]
        got = real(a)
        seen.append(got is not None)
        return got

    monkeypatch.setattr(horizontal_run, "_rows", counting)
    return seen


@pytest.mark.slow
@needs_numba
def test_zero_update_groups_every_sliced_parameter_bitwise_equal(monkeypatch):
    """ZeRO on 2 simulated ranks: every parameter's update is a member of a group (as on
    one rank; before, only the unsharded ones were), strided shares are read as rows,
    and losses and parameters are bitwise those of one call per parameter."""
    from shardc.training.gpt import GPTConfig, param_specs
    from shardc.training.trainer import TrainingConfig, compile_program, train_simulated

    monkeypatch.setenv("SHARDC_CACHE", "0")  # the compile cache's key does not see horizontal.GROUP
    monkeypatch.setattr(horizontal_run, "MIN_GROUP_ELEMENTS", 0)
    small = GPTConfig(n_layer=2, n_head=2, n_embd=16, block_size=8, vocab_size=32)
    data = np.random.default_rng(1).integers(0, 32, 5000).astype(np.int32)
    cfg = TrainingConfig(small, per_device_batch=2, steps=3, warmup_steps=1).shard(zero=True, fsdp=False)
    seen = _rows_used(monkeypatch)
    runs = []
    for group in (True, False):
        monkeypatch.setattr(horizontal, "GROUP", group)
        prog = compile_program(cfg, cfg.grid(2))
        gs = [v for v in prog.compiled.functions["adamw_step"].__globals__.values() if isinstance(v, horizontal.Group)]
        if group:
            members = sum(len(g.members) for g in gs)
            assert members >= len(param_specs(small)) - 1, (members, len(param_specs(small)))  # a body of its own may stay alone
            assert len(gs) <= 4  # sharded or not x decayed or not
        runs.append(train_simulated(cfg, data, 2, program=prog))
        if group:
            assert all(g.calls > 0 for g in gs)
            assert any(seen), "no strided share was read as rows"
    got, ref = runs
    assert got.losses == ref.losses
    for k in ref.params:
        assert np.array_equal(got.params[k], ref.params[k]), k
