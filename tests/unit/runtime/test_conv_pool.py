"""Every linalg conv and pooling named op, with strides and dilations, run by the
runtime against PyTorch (`torch.nn.functional.conv1d/2d/3d`, `max_pool*d`; sums as a
depthwise convolution with a kernel of ones). The operands are drawn in PyTorch's
layout and moved into the op's by the axis names of its table row, so each op is
checked in its own layout; no Python loop runs (generated code or general path)."""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from shardc.dialects.linalg_conv import SPECS, WindowOpSpec  # noqa: E402
from shardc.runtime import compile_text  # noqa: E402

SIZES = {"n": 2, "f": 3, "c": 2, "ic": 3, "g": 2, "cm": 2, "od": 2, "oh": 3, "ow": 4, "kd": 2, "kh": 2, "kw": 3}
ATTRS = {"plain": ((1, 1, 1), (1, 1, 1)), "strided": ((2, 1, 3), (1, 1, 1)), "dilated": ((1, 1, 1), (2, 3, 1)), "both": ((2, 3, 2), (2, 1, 2))}


def _window_size(o: str, k: str, s: int, d: int) -> int:
    return (SIZES[o] - 1) * s + (SIZES[k] - 1) * d + 1


def _axis_sizes(spec: WindowOpSpec, axes: tuple[str, ...], strides: tuple[int, ...], dilations: tuple[int, ...]) -> list[int]:
    out, k = [], 0
    for a in axes:
        if "+" in a:
            o, w = a.split("+")
            out.append(_window_size(o, w, strides[k], dilations[k]))
            k += 1
        else:
            out.append(SIZES[a])
    return out


def _tensor_type(shape: list[int], elem: str) -> str:
    return "tensor<" + "x".join(map(str, shape)) + f"x{elem}>"


def _ir(spec: WindowOpSpec, shapes: list[list[int]], strides: tuple[int, ...], dilations: tuple[int, ...], elem: str, given: bool) -> str:
    ti, tk, to = (_tensor_type(s, elem) for s in shapes)
    attrs = ""
    if spec.strided and given:
        def vec(xs: tuple[int, ...]) -> str:
            return f"dense<[{', '.join(map(str, xs))}]> : vector<{len(xs)}xi64>"

        attrs = f" {{dilations = {vec(dilations)}, strides = {vec(strides)}}}"
    return (
        f"func.func @f(%i: {ti}, %k: {tk}, %o: {to}) -> {to} {{\n"
        f"  %0 = linalg.{spec.name}{attrs} ins(%i, %k : {ti}, {tk}) outs(%o : {to}) -> {to}\n"
        f"  return %0 : {to}\n}}\n"
    )


def _run(spec: WindowOpSpec, ins: list[np.ndarray], init: np.ndarray, strides: tuple[int, ...], dilations: tuple[int, ...], elem: str = "f32", given: bool = True) -> np.ndarray:
    text = _ir(spec, [list(x.shape) for x in (*ins, init)], strides, dilations, elem, given)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the general path (a loop) warns
        cm = compile_text(text)
    assert not re.search(r"^\s*(for|while) ", cm.source, re.M)
    return cm.call("f", *ins, init)


# -- PyTorch's layout <-> the op's ---------------------------------------------------------


def _to_op_layout(x: np.ndarray, names: list[str], axes: tuple[str, ...]) -> np.ndarray:
    """`x`, whose axes are `names` (PyTorch's order), permuted into the op's `axes`."""
    keyed = [a.split("+")[0] if "+" in a else a for a in axes]
    return x.transpose([names.index(a) for a in keyed])


def _conv_case(spec: WindowOpSpec, strides: tuple[int, ...], dilations: tuple[int, ...], rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Inputs and init in the op's layout, and PyTorch's result in it."""
    inp, filt, out = spec.operands
    spatial = [a for a in inp if "+" in a]
    outs_sp = [a.split("+")[0] for a in spatial]
    ks = [a.split("+")[1] for a in spatial]
    has = set(spec.loops)
    groups_axis = "g" if "g" in has else None
    if "ic" in has:  # depthwise: channel ic, multiplier cm
        in_ch, out_ch, per_group = ["ic"], ["ic", "cm"] if "cm" in has else ["ic"], []
    elif groups_axis:
        in_ch, out_ch, per_group = ["g", "c"], ["g", "f"], ["c"]
    elif "c" in has:
        in_ch, out_ch, per_group = ["c"], ["f"], ["c"]
    else:  # conv_1d/2d/3d: no batch, no channels
        in_ch, out_ch, per_group = [], [], []
    n = SIZES["n"] if "n" in has else 1
    sp_in = [_window_size(o, k, s, d) for o, k, s, d in zip(outs_sp, ks, strides, dilations)]
    x_names = (["n"] if "n" in has else []) + in_ch + outs_sp
    x = rng.standard_normal([SIZES[a] for a in (["n"] if "n" in has else []) + in_ch] + sp_in).astype(np.float32)
    w_names = out_ch + per_group + ks
    w = rng.standard_normal([SIZES[a] for a in w_names]).astype(np.float32)
    channels = math.prod(SIZES[a] for a in in_ch)
    groups = SIZES["g"] if groups_axis else (SIZES["ic"] if "ic" in has else 1)
    xt = torch.from_numpy(x).reshape(n, channels, *sp_in)
    wt = torch.from_numpy(w).reshape(math.prod(SIZES[a] for a in out_ch), math.prod(SIZES[a] for a in per_group), *[SIZES[k] for k in ks])
    conv = (F.conv1d, F.conv2d, F.conv3d)[len(spatial) - 1]
    y = conv(xt, wt, stride=tuple(strides), dilation=tuple(dilations), groups=groups).numpy()
    y_names = (["n"] if "n" in has else []) + out_ch + outs_sp
    y = y.reshape([SIZES[a] for a in y_names])
    init = rng.standard_normal(y.shape).astype(np.float32)
    ins = [_to_op_layout(x, x_names, inp), _to_op_layout(w, w_names, filt)]
    return [np.ascontiguousarray(a) for a in ins], np.ascontiguousarray(_to_op_layout(init, y_names, out)), _to_op_layout(y + init, y_names, out)


CONVS = [s for s in SPECS if s.body == "conv"]
POOLS = [s for s in SPECS if s.body != "conv"]


CONV_CASES = [pytest.param(s, a, id=f"{s.name}-{a}") for s in CONVS for a in ATTRS if s.strided or a == "plain"]


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "attrs"), CONV_CASES)
def test_conv_matches_torch(spec: WindowOpSpec, attrs: str, rng: np.random.Generator) -> None:
    n = spec.n_spatial
    strides, dilations = (tuple(v[:n]) for v in ATTRS[attrs])
    ins, init, expected = _conv_case(spec, strides, dilations, rng)
    got = _run(spec, ins, init, strides, dilations)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_conv_without_attributes_is_unit_strided(rng: np.random.Generator) -> None:
    """No `strides`/`dilations` (MLIR's defaults): ones."""
    spec = next(s for s in SPECS if s.name == "conv_2d_nchw_fchw")
    ins, init, expected = _conv_case(spec, (1, 1), (1, 1), rng)
    np.testing.assert_allclose(_run(spec, ins, init, (1, 1), (1, 1), given=False), expected, rtol=1e-4, atol=1e-4)


def _pool_reference(kind: str, x: np.ndarray, window: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...]) -> np.ndarray:
    """PyTorch's pooling of `x` (n, c, spatial...) in float64."""
    t = torch.from_numpy(x.astype(np.float64))
    nd = len(window)
    if kind == "sum":
        ones = torch.ones(x.shape[1], 1, *window, dtype=torch.float64)
        return (F.conv1d, F.conv2d, F.conv3d)[nd - 1](t, ones, stride=strides, dilation=dilations, groups=x.shape[1]).numpy()
    pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
    if kind.startswith("max"):
        return pool(t, window, stride=strides, dilation=dilations).numpy()
    return -pool(-t, window, stride=strides, dilation=dilations).numpy()


@pytest.mark.parametrize("attrs", list(ATTRS))
@pytest.mark.parametrize("spec", POOLS, ids=[s.name for s in POOLS])
def test_pooling_matches_torch(spec: WindowOpSpec, attrs: str, rng: np.random.Generator) -> None:
    inp, win, out = spec.operands
    n = spec.n_spatial
    strides, dilations = (tuple(v[:n]) for v in ATTRS[attrs])
    spatial = [a for a in inp if "+" in a]
    outs_sp = [a.split("+")[0] for a in spatial]
    ks = [a.split("+")[1] for a in spatial]
    sp_in = [_window_size(o, k, s, d) for o, k, s, d in zip(outs_sp, ks, strides, dilations)]
    x_names = ["n", "c", *outs_sp]
    unsigned = spec.body.endswith("_unsigned")
    if unsigned:  # i32 holding values whose high bit is set: unsigned order differs from signed
        x = rng.integers(-(2**31), 2**31, size=[SIZES["n"], SIZES["c"], *sp_in], dtype=np.int64).astype(np.int32)
        ref_in = x.view(np.uint32)
    else:
        x = rng.standard_normal([SIZES["n"], SIZES["c"], *sp_in]).astype(np.float32)
        ref_in = x
    y = _pool_reference(spec.body, ref_in, tuple(SIZES[k] for k in ks), strides, dilations)
    y_names = ["n", "c", *outs_sp]
    if unsigned:
        init = np.zeros(y.shape, np.int32) if spec.body.startswith("max") else np.full(y.shape, -1, np.int32)
        expected = y.astype(np.uint32).view(np.int32)
    else:
        init = rng.standard_normal(y.shape).astype(np.float32)
        combine = {"sum": np.add, "max": np.maximum, "min": np.minimum}[spec.body]
        expected = combine(y, init).astype(np.float32)
    window = np.zeros([SIZES[k] for k in win], np.int32 if unsigned else np.float32)
    ins = [np.ascontiguousarray(_to_op_layout(x, x_names, inp)), window]
    got = _run(spec, ins, np.ascontiguousarray(_to_op_layout(init, y_names, out)), strides, dilations, "i32" if unsigned else "f32")
    want = _to_op_layout(expected, y_names, out)
    if unsigned:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_generic_with_window_maps_matches_torch(rng: np.random.Generator) -> None:
    """A linalg.generic reading its input through `d * 2 + k`, as torch-mlir writes a
    3-D max pool: the same strided view as the named ops."""
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    text = """#in = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2 * 2 + d4, d3 * 2 + d5 + 1)>
#win = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
#out = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
func.func @f(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x2x2xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %w = tensor.empty() : tensor<2x2xf32>
  %r = linalg.generic {indexing_maps = [#in, #win, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%x, %w : tensor<1x2x5x5xf32>, tensor<2x2xf32>) outs(%init : tensor<1x2x2x2xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.maximumf %a, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x2x2x2xf32>
  return %r : tensor<1x2x2x2xf32>
}"""
    cm = compile_text(text)
    expected = F.max_pool2d(torch.from_numpy(x[:, :, :, 1:]), 2, stride=2).numpy()
    np.testing.assert_array_equal(cm.call("f", x), expected)


def test_window_out_of_bounds_is_an_error(rng: np.random.Generator) -> None:
    """An input smaller than its map reaches (MLIR: undefined) stops with a message
    naming the op, instead of reading outside the array."""
    from shardc.runtime.execute.window_run import WindowBoundsError

    text = """#in = affine_map<(d0, d1) -> (d0 + d1)>
#k = affine_map<(d0, d1) -> (d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @f(%x: tensor<?xf32>, %k: tensor<3xf32>, %o: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#in, #k, #out], iterator_types = ["parallel", "reduction"]} ins(%x, %k : tensor<?xf32>, tensor<3xf32>) outs(%o : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}"""
    cm = compile_text(text)
    k = np.ones(3, np.float32)
    np.testing.assert_allclose(cm.call("f", np.arange(6, dtype=np.float32), k, np.zeros(4, np.float32)), [3, 6, 9, 12])
    with pytest.raises(WindowBoundsError, match=r"linalg.generic.*input #0 has 5 elements along axis 0, but its indexing map reaches index 5"):
        cm.call("f", np.arange(5, dtype=np.float32), k, np.zeros(4, np.float32))


@pytest.mark.parametrize("columns", [0, 10**9], ids=["batched-over-images", "one-matmul"])
@pytest.mark.parametrize("name", ["conv_2d_nchw_fchw", "conv_2d_ngchw_gfchw", "conv_2d_nhwc_hwcf", "depthwise_conv_2d_nhwc_hwcm"])
def test_both_matmul_plans_match_torch(name: str, columns: int, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """A windowed contraction runs as matmuls batched over the images or as one matmul
    whose result is transposed, by the columns each would have
    (`MIN_LEAD_BATCH_COLUMNS`): both give PyTorch's numbers, strided and dilated."""
    from shardc.runtime.execute import structured_run

    monkeypatch.setattr(structured_run, "MIN_LEAD_BATCH_COLUMNS", columns)
    spec = next(s for s in SPECS if s.name == name)
    strides, dilations = (tuple(v[:2]) for v in ATTRS["both"])
    ins, init, expected = _conv_case(spec, strides, dilations, rng)
    np.testing.assert_allclose(_run(spec, ins, init, strides, dilations), expected, rtol=1e-4, atol=1e-4)


def test_im2col_copy_runs_along_the_longer_axis() -> None:
    """A window view whose columns' last axis is 3 long and the rows' 32 (a weight
    gradient: kernel positions against image rows) is copied along the rows and handed
    to the matmul transposed; the values are the plain reshape's."""
    from shardc.runtime.execute.structured_run import _matrix

    x = np.lib.stride_tricks.sliding_window_view(np.arange(2 * 34 * 34, dtype=np.float32).reshape(2, 34, 34), (32, 32), axis=(1, 2))
    x = x.transpose(0, 3, 4, 1, 2)  # (c, kh=32, kw=32 | oh=3, ow=3): rows, then columns
    m = _matrix(x, (2 * 32 * 32, 9))
    assert m.strides[0] == x.itemsize  # the copy's unit stride is along the rows
    np.testing.assert_array_equal(m, x.reshape(2 * 32 * 32, 9))
    y = x.transpose(3, 4, 0, 1, 2)  # columns first: a plain C-order copy already runs along them
    assert _matrix(y, (9, 2 * 32 * 32)).strides[-1] == x.itemsize


@pytest.mark.parametrize("points", [0, 10**6], ids=["numpy-reduce", "one-slice-per-position"])
@pytest.mark.parametrize("name", ["pooling_nchw_max", "pooling_nhwc_sum", "pooling_ndhwc_min"])
def test_both_pooling_paths_match_torch(name: str, points: int, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pooling reduces the window axes with numpy's reduce, or (up to
    `MAX_WINDOW_POINTS` positions) combines one whole-array slice per window position
    into the init: both give PyTorch's numbers."""
    from shardc.runtime.execute import structured_run

    monkeypatch.setattr(structured_run, "MAX_WINDOW_POINTS", points)
    test_pooling_matches_torch(next(s for s in SPECS if s.name == name), "both", rng)


SHIFTED = [pytest.param(s, a, id=f"{s.name}-{a}") for s in CONVS for a in ATTRS if s.strided or a == "plain"]


def _count_shift_plans(monkeypatch: pytest.MonkeyPatch) -> tuple[list[bool], list[bool]]:
    """Force the shifted matmuls (`ShiftPlan`) for any image size; record whether each
    run took them and which loop (True: over the kernel positions; False: over the
    output positions, the dual shift)."""
    from shardc.runtime.execute import window_run

    monkeypatch.setattr(window_run, "MIN_SHIFT_COLUMNS", 0)
    monkeypatch.setattr(window_run, "MAX_SHIFTS", 10**6)
    taken: list[bool] = []
    loops: list[bool] = []
    run, choose = window_run.ShiftPlan.run, window_run.ShiftPlan.loops_over_kernel

    def counted(self, *args):  # noqa: ANN001, ANN202
        r = run(self, *args)
        taken.append(r is not None)
        return r

    def chosen(n_out: int, n_kernel: int) -> bool | None:
        r = choose(n_out, n_kernel)
        loops.append(bool(r))
        return r

    monkeypatch.setattr(window_run.ShiftPlan, "run", counted)
    monkeypatch.setattr(window_run.ShiftPlan, "loops_over_kernel", staticmethod(chosen))
    return taken, loops


def _shift_applies(spec: WindowOpSpec) -> bool:
    """Two windows on adjacent axes of the image (nchw or channels-last; not a 3-D
    conv's, not a 1-D one's)."""
    image = spec.operands[0]
    windows = [k for k, a in enumerate(image) if "+" in a]
    return spec.n_spatial == 2 and windows[1] == windows[0] + 1


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "attrs"), SHIFTED)
def test_shifted_matmuls_match_torch(spec: WindowOpSpec, attrs: str, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Convolutions whose image's axes are plain but for the last two windows, and
    whose output ends with (oh, ow), run as one matmul per kernel position on the image
    read in place, or on its polyphase components where strided (`ShiftPlan`), taken
    here for every such op (even small images): PyTorch's numbers, and the path is
    taken exactly for those ops, looping over the kernel's 6 positions (not the 12
    output positions)."""
    taken, loops = _count_shift_plans(monkeypatch)
    n = spec.n_spatial
    strides, dilations = (tuple(v[:n]) for v in ATTRS[attrs])
    ins, init, expected = _conv_case(spec, strides, dilations, rng)
    np.testing.assert_allclose(_run(spec, ins, init, strides, dilations), expected, rtol=1e-4, atol=1e-4)
    assert taken == ([True] if _shift_applies(spec) else [])
    assert loops == ([True] if _shift_applies(spec) else [])


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True], ids=["whole-columns", "column-chunks"])
@pytest.mark.parametrize(("spec", "attrs"), [p for p in SHIFTED if _shift_applies(p.values[0])])
def test_dual_shift_matches_torch(spec: WindowOpSpec, attrs: str, chunked: bool, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """A convolution with a kernel larger than its output (a weight gradient's shape:
    the output gradient is the kernel) loops over the output positions instead, one
    matmul summing over the whole (shifted, polyphase where strided) image per output
    position, channels summed one at a time where they cannot join the image's columns,
    the columns whole or in chunks (`DUAL_CHUNK_BYTES`, here one column): PyTorch's
    numbers."""
    from shardc.runtime.execute import window_run

    taken, loops = _count_shift_plans(monkeypatch)
    if chunked:
        monkeypatch.setattr(window_run, "DUAL_CHUNK_BYTES", 1)
    for axis, size in {"kh": 4, "kw": 5, "oh": 2, "ow": 3}.items():
        monkeypatch.setitem(SIZES, axis, size)
    strides, dilations = (tuple(v[:2]) for v in ATTRS[attrs])
    ins, init, expected = _conv_case(spec, strides, dilations, rng)
    np.testing.assert_allclose(_run(spec, ins, init, strides, dilations), expected, rtol=1e-4, atol=1e-4)
    assert taken == [True] and loops == [False]


@pytest.mark.slow
@pytest.mark.parametrize("shifted", [True, False], ids=["shifted", "im2col"])
def test_avg_pool_training_step_matches_torch(shifted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """An average pool's gradient as torch-mlir imports it (a one-channel convolution
    with a kernel of ones over the zero-inserted output gradient, per image and
    channel): by the shifted scaled adds (forced) or the windowed path, PyTorch's
    gradient."""
    import copy

    from shardc.frontends.torch_train import export_train_step
    from shardc.runtime.execute import window_run
    from shardc.launch import run_program

    if shifted:
        taken, _ = _count_shift_plans(monkeypatch)
    else:
        monkeypatch.setattr(window_run, "MIN_SHIFT_COLUMNS", 10**9)

    class ScaledPool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 3).reshape(3, 1, 1))

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return F.avg_pool2d(v * self.scale, 3, stride=2)

    torch.manual_seed(0)
    model = ScaledPool()
    x = torch.randn(2, 3, 9, 8)
    with torch.no_grad():
        target = torch.randn(model(x).shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = export_train_step(model, (x,), (target,), F.mse_loss)
    loss, grad = run_program(exported.text, [x.numpy(), target.numpy(), model.scale.detach().numpy()], ranks=1)
    m = copy.deepcopy(model)
    want = F.mse_loss(m(x), target)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-6
    np.testing.assert_allclose(grad, m.scale.grad.numpy(), rtol=1e-5, atol=1e-6)
    if shifted:
        assert taken and all(taken)


TRAIN_CONVS = {
    "plain": dict(padding=1),
    "stride2": dict(stride=2, padding=1),
    "stride2-dilation2": dict(stride=2, padding=2, dilation=2),
    "stride3-uneven": dict(stride=3, padding=1),
    "groups2-stride2": dict(groups=2, stride=2, padding=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("shifted", [True, False], ids=["shifted", "im2col"])
@pytest.mark.parametrize("name", list(TRAIN_CONVS))
def test_conv_training_step_matches_torch(name: str, shifted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two convolutions' training step as torch-mlir imports it (the forward, the second
    one's input gradient as a convolution over the zero-inserted output gradient, both
    weight gradients as convolutions whose kernel is the output gradient): with the
    shifted matmuls forced for every conv (both loops taken) and with them off (the
    windowed im2col path), PyTorch's loss and gradients."""
    import copy

    from shardc.frontends.torch_train import export_train_step
    from shardc.runtime.execute import window_run
    from shardc.launch import run_program

    if shifted:
        taken, loops = _count_shift_plans(monkeypatch)
    else:
        monkeypatch.setattr(window_run, "MIN_SHIFT_COLUMNS", 10**9)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 6, 3, **TRAIN_CONVS[name]), torch.nn.ReLU(), torch.nn.Conv2d(6, 4, 3, **TRAIN_CONVS[name]))
    x = torch.randn(2, 4, 13, 11)
    with torch.no_grad():
        target = torch.randn(model(x).shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = export_train_step(model, (x,), (target,), F.mse_loss)
    params = [p.detach().numpy() for p in model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        loss, *grads = run_program(exported.text, [x.numpy(), target.numpy(), *params], ranks=1)
    m = copy.deepcopy(model)
    want = F.mse_loss(m(x), target)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-5
    for (pname, p), got in zip(m.named_parameters(), grads):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=pname)
    if shifted:
        assert all(taken) and set(loops) == {True, False}


@pytest.mark.parametrize("attrs", list(ATTRS))
def test_depthwise_loop_nest_matches_torch(attrs: str, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch) -> None:
    """depthwise_conv_2d_nchw_chw (no channel sum: no BLAS) runs as a compiled loop
    nest (`DepthwisePlan`, numba) at any strides and dilations, taken here even for a
    small image: PyTorch's numbers; `SHARDC_KERNELS=numpy` takes the windowed path."""
    pytest.importorskip("numba")
    from shardc.runtime.execute import window_run
    from shardc.runtime.execute.kernels import fused_run

    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", 0)
    taken: list[bool] = []
    run = window_run.DepthwisePlan.run

    def counted(self, *args):  # noqa: ANN001, ANN202
        r = run(self, *args)
        taken.append(r is not None)
        return r

    monkeypatch.setattr(window_run.DepthwisePlan, "run", counted)
    spec = next(s for s in SPECS if s.name == "depthwise_conv_2d_nchw_chw")
    strides, dilations = (tuple(v[:2]) for v in ATTRS[attrs])
    ins, init, expected = _conv_case(spec, strides, dilations, rng)
    np.testing.assert_allclose(_run(spec, ins, init, strides, dilations), expected, rtol=1e-5, atol=1e-5)
    assert taken == [True]
    monkeypatch.setenv("SHARDC_KERNELS", "numpy")
    np.testing.assert_allclose(_run(spec, ins, init, strides, dilations), expected, rtol=1e-5, atol=1e-5)
    assert taken == [True, False]


@pytest.mark.parametrize(("kernel", "stride"), [(2, 2), (3, 2), (3, 1)], ids=["disjoint-windows", "overlapping-3x3-stride2", "overlapping-3x3-stride1"])
def test_max_pool_training_step_matches_torch(kernel: int, stride: int) -> None:
    """A max pool's gradient as torch-mlir imports it (a scatter-add of the output
    gradient at the maxima): one fancy-indexed add where every input position gets at
    most one update (disjoint windows, found by counting), the sorted row-by-row adds
    where windows overlap; PyTorch's gradient either way."""
    import copy

    from shardc.frontends.torch_train import export_train_step
    from shardc.launch import run_program

    class ScaledPool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 3).reshape(3, 1, 1))

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            return F.max_pool2d(v * self.scale, kernel, stride=stride)

    torch.manual_seed(0)
    model = ScaledPool()
    x = torch.randn(2, 3, 9, 8)
    with torch.no_grad():
        target = torch.randn(model(x).shape)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = export_train_step(model, (x,), (target,), F.mse_loss)
    assert "tm_tensor.scatter" in exported.text
    loss, grad = run_program(exported.text, [x.numpy(), target.numpy(), model.scale.detach().numpy()], ranks=1)
    m = copy.deepcopy(model)
    want = F.mse_loss(m(x), target)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-6
    np.testing.assert_allclose(grad, m.scale.grad.numpy(), rtol=1e-5, atol=1e-6)
