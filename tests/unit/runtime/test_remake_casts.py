"""A parameter's bf16 copy is made before each product that reads it
(`shardc.runtime.codegen.remake_casts`), not once at the top of the step and kept from
the forward to the backward: the transform on a small module, bitwise the same results,
and the compiled bf16 GPT step holding at most one layer's weight copies at once.
Copies totalling at most `KEEP_MAX_BYTES` are kept as made (the tests of the transform
set the limit to 0)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from shardc.context import make_context
from shardc.ir.fast_parser import FastParser
from shardc.runtime.codegen.compile import compile_module
from shardc.runtime.codegen import remake_casts
from shardc.runtime.codegen.remake_casts import remake_argument_casts
from shardc.runtime.execute.kernels.aligned import ALIGNMENT
from shardc.testing.live_peak import live_peak

ID = "affine_map<(i, j) -> (i, j)>"
MM = '[affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"]'


def _cast(src: str, dst: str) -> str:
    return f"""
    %{dst}e = tensor.empty() : tensor<4x4xbf16>
    %{dst} = linalg.generic {{indexing_maps = [{ID}, {ID}], iterator_types = ["parallel", "parallel"]}} ins(%{src} : tensor<4x4xf32>) outs(%{dst}e : tensor<4x4xbf16>) {{
    ^bb0(%a: f32, %b: bf16):
      %t = arith.truncf %a : f32 to bf16
      linalg.yield %t : bf16
    }} -> tensor<4x4xbf16>"""


def _product(a: str, b: str, out: str) -> str:
    return f"""
    %{out} = linalg.generic {{indexing_maps = {MM}}} ins(%{a}, %{b} : tensor<4x4xbf16>, tensor<4x4xbf16>) outs(%zero : tensor<4x4xf32>) {{
    ^bb0(%p: bf16, %q: bf16, %acc: f32):
      %pe = arith.extf %p : bf16 to f32
      %qe = arith.extf %q : bf16 to f32
      %m = arith.mulf %pe, %qe : f32
      %s = arith.addf %acc, %m : f32
      linalg.yield %s : f32
    }} -> tensor<4x4xf32>"""


# `w` cast once at the top (as the mixed-precision pass and CSE leave it), read by a
# "forward" product and, after an elementwise op, by a "backward" one.
TEXT = f"""
func.func @step(%w: tensor<4x4xf32>, %x: tensor<4x4xf32>) -> tensor<4x4xf32> {{
    %zero = arith.constant dense<0.0> : tensor<4x4xf32>
    {_cast("w", "wb")}
    {_cast("x", "xb")}
    {_product("xb", "wb", "h")}
    %te = tensor.empty() : tensor<4x4xf32>
    %g = linalg.generic {{indexing_maps = [{ID}, {ID}], iterator_types = ["parallel", "parallel"]}} ins(%h : tensor<4x4xf32>) outs(%te : tensor<4x4xf32>) {{
    ^bb0(%a: f32, %b: f32):
      %t = math.tanh %a : f32
      linalg.yield %t : f32
    }} -> tensor<4x4xf32>
    {_cast("g", "gb")}
    {_product("gb", "wb", "y")}
    func.return %y : tensor<4x4xf32>
}}
"""


def _parse():
    return FastParser(make_context(), TEXT).parse_module()


@pytest.fixture
def remake_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remake_casts, "KEEP_MAX_BYTES", 0)


def _casts(block) -> list:
    return [op for op in block.ops if op.name == "linalg.generic" and [o.name for o in op.body.block.ops] == ["arith.truncf", "linalg.yield"]]


def test_the_argument_cast_moves_to_its_first_reader_and_is_remade_for_the_next(remake_all: None) -> None:
    module = _parse()
    block = next(iter(module.ops)).body.blocks.first
    assert remake_argument_casts(module) == 1
    ops = list(block.ops)
    w, x = block.args
    w_casts = [op for op in _casts(block) if op.inputs[0] is w]
    assert len(w_casts) == 2
    casts = _casts(block)
    for cast in w_casts:  # each just before the product that reads it (other casts between at most), read by that one only
        (use,) = list(cast.results[0].uses)
        between = ops[ops.index(cast) + 1 : ops.index(use.operation)]
        assert use.operation.name == "linalg.generic" and all(op in casts for op in between)
    # a cast of a value made in the function (not an argument) is left where it is, shared
    assert len([op for op in _casts(block) if op.inputs[0] is x]) == 1


def test_remade_casts_give_the_same_bits(remake_all: None) -> None:
    rng = np.random.default_rng(0)
    w, x = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    bf = ml_dtypes.bfloat16
    h = x.astype(bf).astype(np.float32) @ w.astype(bf).astype(np.float32)
    want = np.tanh(h).astype(bf).astype(np.float32) @ w.astype(bf).astype(np.float32)
    got = compile_module(_parse(), "remake").call("step", w, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    kept = compile_module(_parse(), "remake", fuse=False).call("step", w, x)  # no remaking without fusion
    np.testing.assert_array_equal(got, kept)


@pytest.mark.parametrize("limit", [0, None], ids=["remade", "kept"])
def test_bf16_gpt_step_holds_at_most_one_layers_weight_copies_when_remade(limit: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The most bytes of layer-weight copies the step holds at once. A copy is found by
    its content (the weight's bits rounded to bf16), whatever buffer owns it: a fused
    kernel's uint16 bits, an aligned, padded flat array. Remade (limit 0): one layer's
    at most. Kept (this small model under the default limit): every layer's, between the
    forward and the backward."""
    monkeypatch.setenv("SHARDC_CACHE", "0")  # the limit is read at compile time, not in the cache's key
    if limit is not None:
        monkeypatch.setattr(remake_casts, "KEEP_MAX_BYTES", limit)
    from shardc.training.axis import GPT_PLAN, ShardingPolicy
    from shardc.training.gpt import GPTConfig, init_params
    from shardc.training.mesh import make_grid
    from shardc.training.spmd import RankState, StepProgram

    cfg = GPTConfig(n_layer=3, n_head=4, n_embd=32, block_size=16, vocab_size=64)
    prog = StepProgram.build(cfg, 2, make_grid(1, 1), ShardingPolicy(1, zero=True, fsdp=False), GPT_PLAN, precision="bf16")
    state = RankState(prog, 0, init_params(cfg, 0))
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, cfg.vocab_size, (2, cfg.block_size)).astype(np.int32) for _ in range(2))
    state.train_step([(x, y)], 1e-3)
    weights = [(s.path, w) for s, w in zip(prog.specs, state.params) if s.path.startswith("h.") and s.path.endswith(".weight") and w.ndim >= 2]
    copies = {}  # the first 8 bf16 values' bytes -> the whole copy's bits
    for _, w in weights:
        bits = np.ascontiguousarray(w).astype(ml_dtypes.bfloat16).view(np.uint16).reshape(-1)
        copies[bits[:8].tobytes()] = bits
    assert len(copies) == len(weights)

    def copy_bytes(buffer: np.ndarray) -> int:
        if buffer.dtype not in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16)) or not buffer.flags.c_contiguous:
            return 0
        u = buffer.reshape(-1).view(np.uint16)
        for skip in range(ALIGNMENT // 2):  # an aligned array starts up to 64 bytes into its buffer
            bits = copies.get(u[skip : skip + 8].tobytes())
            if bits is not None and np.array_equal(u[skip : skip + bits.size], bits):
                return bits.nbytes
        return 0

    peak = live_peak(prog.compiled.functions["train_step"], lambda: state.train_step([(x, y)], 1e-3), copy_bytes)
    held = sum(copy_bytes(b) for _, b in peak)
    one_layer = sum(w.size * 2 for p, w in weights if p.startswith("h.0."))
    if limit == 0:  # before the copies were remade, all three layers' were alive at once
        assert 0 < held <= one_layer, f"{held} bytes of weight copies alive at once, one layer's are {one_layer}"
    else:
        assert held == cfg.n_layer * one_layer, f"{held} bytes of weight copies alive at once, all layers' are {cfg.n_layer * one_layer}"


def test_copies_within_the_limit_are_kept_as_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two 4x4 bf16 copies are 64 bytes: at a limit of 64 nothing moves, at 63 the
    argument's cast is remade for its second reader."""
    monkeypatch.setattr(remake_casts, "KEEP_MAX_BYTES", 64)
    module = _parse()
    block = next(iter(module.ops)).body.blocks.first
    before = [op.name for op in block.ops]
    assert remake_argument_casts(module) == 0
    assert [op.name for op in block.ops] == before
    (w_cast,) = [op for op in _casts(block) if op.inputs[0] is block.args[0]]
    assert len(list(w_cast.results[0].uses)) == 2  # one copy, read by both products
    monkeypatch.setattr(remake_casts, "KEEP_MAX_BYTES", 63)
    assert remake_argument_casts(module) == 1
