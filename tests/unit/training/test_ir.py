"""The emitted IR: it verifies, prints as mlir-opt does, re-parses, and keeps its shapes."""

import subprocess
import sys

import numpy as np
import pytest
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.printer import module_to_string
from shardc.runtime import compile_module
from shardc.training.gpt import GPTConfig, build_loss_module, param_specs
from shardc.training.ir_builder import FuncBuilder, int_tensor, module_of, parse_spec
from xdsl.dialects.builtin import TensorType, f64


def roundtrip(module):
    text = module_to_string(module)
    again = Parser(make_context(), text).parse_module()
    again.verify()
    assert module_to_string(again) == text
    return text


@pytest.mark.slow
def test_step_module_roundtrips(tiny_step):
    _, module, _ = tiny_step
    module.verify()
    text = roundtrip(module)
    assert "func.func @train_step(" in text and "func.func @adamw_step(" in text and "func.func @loss(" in text
    # einsum-style: every tensor op is a linalg.generic (plus fills and empties)
    assert "linalg.matmul" not in text and "tensor.collapse_shape" not in text and "tensor.expand_shape" not in text


def test_shardc_opt_reparses_the_loss_module(tmp_path):
    path = tmp_path / "gpt.mlir"
    text = module_to_string(build_loss_module(GPTConfig(n_layer=1, n_head=2, n_embd=8, block_size=4, vocab_size=7), 2))
    path.write_text(text)
    out = subprocess.run([sys.executable, "-m", "shardc.tools.opt", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == text


def test_weights_are_shaped_for_sharding():
    cfg = GPTConfig(n_layer=1, n_head=4, n_embd=32)
    specs = {s.path: s for s in param_specs(cfg)}
    assert specs["h.0.attn.c_attn.weight"].shape == (32, 3, 4, 8)
    assert specs["h.0.attn.c_attn.weight"].axes == ("n_embd", "qkv", "heads", "head_dim")
    assert specs["h.0.attn.c_proj.weight"].axes == ("heads", "head_dim", "n_embd")
    assert specs["h.0.mlp.c_fc.weight"].shape == (32, 128)
    assert specs["wte"].axes == ("vocab", "n_embd")
    # every weight feeds linalg.generic ops directly: no reshape between weight and use
    fn = build_loss_module(cfg, 2).body.block.first_op
    for s, arg in zip(param_specs(cfg), fn.body.block.args):
        assert {u.operation.name for u in arg.uses} == {"linalg.generic"}, s.path


def test_einsum_builder_shapes_and_errors():
    fb = FuncBuilder("f", [("x", TensorType(f64, [2, 3, 4])), ("w", TensorType(f64, [4, 5, 6]))], f64)
    x, w = fb.args
    y = fb.einsum("bti,ihd->bthd", x, w)
    assert y.shape == (2, 3, 5, 6)
    assert fb.einsum("bthd->", y).shape == ()
    assert fb.einsum("bt->btz", fb.einsum("bthd->bt", y), sizes={"z": 9}).shape == (2, 3, 9)
    with pytest.raises(ValueError, match="letter 'i' is 4 and 5"):
        fb.einsum("bti,id->btd", x, fb.einsum("ihd->hi", w))
    with pytest.raises(ValueError, match="lacks '->'"):
        parse_spec("ab,bc")
    with pytest.raises(ValueError, match="not an elementwise op"):
        fb.map("add", "bti,ihd->bti", x, w)


def test_builder_layers_run():
    fb = FuncBuilder(
        "f",
        [("x", TensorType(f64, [2, 3, 5])), ("t", int_tensor([2, 3])), ("ids", int_tensor([5]))],
        f64,
    )
    x, t, ids = fb.args
    fb.ret(fb.softmax("btv", x, "v"), fb.causal_mask("btv", x, "t", "v"), fb.gelu("btv", x), fb.cross_entropy("btv", x, t, ids))
    mod = module_of(fb.func)
    roundtrip(mod)
    X = np.random.default_rng(0).normal(size=(2, 3, 5))
    T = np.array([[0, 4, 2], [1, 1, 3]])
    sm, masked, gelu, ce = compile_module(mod).call("f", X, T, np.arange(5))
    e = np.exp(X - X.max(-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(-1, keepdims=True), rtol=1e-13)
    keep = np.arange(5)[None, :] <= np.arange(3)[:, None]
    np.testing.assert_array_equal(masked, np.where(keep, X, -np.inf))
    np.testing.assert_allclose(gelu, 0.5 * X * (1 + np.tanh(np.sqrt(2 / np.pi) * (X + 0.044715 * X**3))), rtol=1e-13)
    logp = np.log(e / e.sum(-1, keepdims=True))
    np.testing.assert_allclose(ce, -np.take_along_axis(logp, T[..., None], -1).mean(), rtol=1e-13)


def test_unstack_gradients_come_back_as_one_stack():
    """f(x) = sum(x[:, 0]^2) + 3 sum(x[:, 2]) (slice 1 unused): the source gets one
    cotangent, a stack of the slices' cotangents with zeros for the unused slice."""
    from shardc.training.autodiff import grad

    fb = FuncBuilder("f", [("x", TensorType(f64, [2, 3, 4]))], f64)
    (x,) = fb.args
    a, b, c = fb.unstack("bkd", x, axis="k")
    assert a.shape == b.shape == c.shape == (2, 4)
    loss = fb.add(",->", fb.einsum("bd,bd->", a, a), fb.unary("scale", "", fb.einsum("bd->", c), 3.0))
    n_tape = len(fb.tape)
    (dx,) = grad(fb, loss, [x])
    backward = fb.tape[n_tape:]
    assert [n.kind for n in backward].count("stack") == 1
    assert not any(n.kind == "map" and n.attrs.get("op") == "add" and n.output.shape == x.shape for n in backward)
    fb.ret(a, b, c, dx)
    X = np.random.default_rng(0).normal(size=(2, 3, 4))
    got_a, got_b, got_c, got_dx = compile_module(module_of(fb.func)).call("f", X)
    np.testing.assert_array_equal(got_a, X[:, 0])
    np.testing.assert_array_equal(got_b, X[:, 1])
    np.testing.assert_array_equal(got_c, X[:, 2])
    want = np.zeros_like(X)
    want[:, 0] = 2 * X[:, 0]
    want[:, 2] = 3.0
    np.testing.assert_allclose(got_dx, want, rtol=1e-15)


def test_layer_derivatives_match_finite_differences():
    """softmax (after the causal mask), layernorm and gelu are recorded whole with their
    own derivatives: each against central differences, in float64."""
    from shardc.training.autodiff import grad

    shape = (2, 3, 3)
    fb = FuncBuilder(
        "f",
        [("x", TensorType(f64, list(shape))), ("w", TensorType(f64, [3])), ("b", TensorType(f64, [3])), *((f"c{i}", TensorType(f64, list(shape))) for i in range(3))],
        f64,
    )
    x, w, b, *c = fb.args
    parts = [fb.softmax("btv", fb.causal_mask("btv", x, "t", "v"), "v"), fb.layernorm("btv", x, w, b), fb.gelu("btv", x)]
    loss = fb.einsum("btv,btv->", parts[0], c[0])
    for p, ci in zip(parts[1:], c[1:]):
        loss = fb.add(",->", loss, fb.einsum("btv,btv->", p, ci))
    fb.ret(loss, *grad(fb, loss, [x, w, b]))
    fn = compile_module(module_of(fb.func))["f"]
    rng = np.random.default_rng(3)
    args = [rng.normal(size=shape), 1 + rng.normal(size=3) * 0.1, rng.normal(size=3), *(rng.normal(size=shape) for _ in range(3))]
    _, *grads = fn(*args)
    eps = 1e-6
    for k, g in enumerate(grads):
        fd = np.zeros_like(args[k])
        for idx in np.ndindex(*args[k].shape):
            for sign in (1, -1):
                bumped = list(args)
                bumped[k] = args[k].copy()
                bumped[k][idx] += sign * eps
                fd[idx] += sign * float(fn(*bumped)[0]) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


def test_stack_is_differentiated_part_by_part():
    """f(a, b) = sum(stack(a, b) * c): d a = c[:, 0], d b = c[:, 1]."""
    from shardc.training.autodiff import grad

    fb = FuncBuilder("f", [("a", TensorType(f64, [2, 4])), ("b", TensorType(f64, [2, 4])), ("c", TensorType(f64, [2, 2, 4]))], f64)
    a, b, c = fb.args
    loss = fb.einsum("bkd,bkd->", fb.stack("bkd", [a, b], "k"), c)
    fb.ret(*grad(fb, loss, [a, b]))
    C = np.random.default_rng(1).normal(size=(2, 2, 4))
    da, db = compile_module(module_of(fb.func)).call("f", np.zeros((2, 4)), np.zeros((2, 4)), C)
    np.testing.assert_array_equal(da, C[:, 0])
    np.testing.assert_array_equal(db, C[:, 1])
