"""Convolutions and pooling split by image height (interfaces/conv.py), on a CNN exported
by torch-mlir: the compiled program exchanges halos (update_halo, lowered to neighbour
send/recv) and gathers no activation, and its results equal PyTorch's on 2 and 4
simulated ranks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.testing import conv_models as cm  # noqa: E402


@pytest.fixture(scope="module")
def cnn():
    return cm.small_cnn_export(batch=2, size=16)


def _compiled(text: str):
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.training.spmd import PIPELINE, count_collectives, run_pipeline

    module = LocatingParser(make_context(), text, "<cnn>").parse_module()
    stages = run_pipeline(module, PIPELINE[:2], keep_text=True)
    partitioned = count_collectives(module)["cnn"]
    run_pipeline(module, PIPELINE[2:])
    return partitioned, count_collectives(module)["cnn"], stages[-1].text


@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_exchanges_halos_and_gathers_nothing(cnn, ranks: int) -> None:
    model, inputs, exported = cnn
    partitioned, lowered, text = _compiled(cm.height_split_program(exported, ranks))
    # one halo exchange per padded conv (3), none for the 2x2 pool, nothing gathered
    assert partitioned["shard.update_halo"] == 3
    assert not any(k in partitioned for k in ("shard.all_gather", "shard.all_to_all", "shard.all_reduce"))
    # each exchange: a slab up and a slab down, sent and received (boundary ranks skip theirs)
    assert lowered["mpi.send"] == 6 and lowered["mpi.recv"] == 6
    assert "mpi.allgather" not in lowered and "mpi.allreduce" not in lowered
    # the image stays split: each rank convolves its rows plus one halo row on each side
    rows = 16 // ranks
    assert f"tensor<2x3x{rows + 2}x18xf32>" in text


@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_equals_pytorch(cnn, ranks: int) -> None:
    from shardc.runtime.launch import run_program

    model, inputs, exported = cnn
    program = cm.height_split_program(exported, ranks)
    (got,) = run_program(program, cm.arguments(model, inputs, exported), ranks=ranks)
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_non_dividing_height_is_one_located_error() -> None:
    from shardc.runtime.launch import ProgramError, run_program

    model, inputs, exported = cm.small_cnn_export(batch=1, size=12)
    # 12 rows on 8 ranks (annotate_arguments refuses to write it: the grid is edited)
    program = cm.height_split_program(exported, 4).replace("shape = 4", "shape = 8")
    with pytest.raises(ProgramError) as info:
        run_program(program, cm.arguments(model, inputs, exported), ranks=8)
    message = str(info.value)
    assert "Traceback" not in message
    assert "does not split evenly into 8 shards" in message


# -----------------------------------------------------------------------------------------
# Every kind of window op split along a spatial dimension (halos from a tensor.pad), on
# simulated ranks, against PyTorch.
# -----------------------------------------------------------------------------------------


def _vec(values: tuple[int, ...]) -> str:
    return f"dense<[{', '.join(map(str, values))}]> : vector<{len(values)}xi64>"


def _ty(shape: tuple[int, ...]) -> str:
    return "tensor<" + "x".join(map(str, shape)) + "xf32>"


def _window_program(op: str, x: tuple, w: tuple, out: tuple, low: tuple, high: tuple,
                    strides: tuple, dilations: tuple, grid: tuple, split: list, pad_value: str = "0.000000e+00") -> str:
    padded = tuple(s + lo + hi for s, lo, hi in zip(x, low, high))
    idx = ", ".join(f"%i{d}: index" for d in range(len(x)))
    axes = "[" + ", ".join("[" + ", ".join(map(str, a)) + "]" for a in split) + "]"
    return f"""
shard.grid @grid(shape = {'x'.join(map(str, grid))})
func.func @main(%x: {_ty(x)}, %w: {_ty(w)}) -> {_ty(out)} {{
  %s = shard.sharding @grid split_axes = {axes} : !shard.sharding
  %xs = shard.shard %x to %s : {_ty(x)}
  %pv = arith.constant {pad_value} : f32
  %zero = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %xs low[{', '.join(map(str, low))}] high[{', '.join(map(str, high))}] {{
  ^bb0({idx}):
    tensor.yield %pv : f32
  }} : {_ty(x)} to {_ty(padded)}
  %e = tensor.empty() : {_ty(out)}
  %f = linalg.fill ins(%zero : f32) outs(%e : {_ty(out)}) -> {_ty(out)}
  %y = linalg.{op} {{dilations = {_vec(dilations)}, strides = {_vec(strides)}}} ins(%p, %w : {_ty(padded)}, {_ty(w)}) outs(%f : {_ty(out)}) -> {_ty(out)}
  return %y : {_ty(out)}
}}
"""


def _case(name: str):
    F = torch.nn.functional
    g = torch.Generator().manual_seed(1)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    if name == "conv_1d_ncw_fcw dilated":
        x, w = r(2, 3, 16), r(4, 3, 3)
        return (x, w, F.conv1d(x, w, padding=2, dilation=2),
                _window_program("conv_1d_ncw_fcw", (2, 3, 16), (4, 3, 3), (2, 4, 16), (0, 0, 2), (0, 0, 2), (1,), (2,), (2,), [[], [], [0]]))
    if name == "depthwise_conv_2d_nchw_chw stride 2":
        x, w = r(1, 4, 8, 8), r(4, 3, 3)
        return (x, w, F.conv2d(x, w[:, None], stride=2, padding=1, groups=4),
                _window_program("depthwise_conv_2d_nchw_chw", (1, 4, 8, 8), (4, 3, 3), (1, 4, 4, 4), (0, 0, 1, 1), (0, 0, 1, 1), (2, 2), (1, 1), (2,), [[], [], [0]]))
    if name == "conv_3d_ncdhw_fcdhw depth over 4":
        x, w = r(1, 2, 8, 4, 4), r(3, 2, 3, 3, 3)
        return (x, w, F.conv3d(x, w, padding=1),
                _window_program("conv_3d_ncdhw_fcdhw", (1, 2, 8, 4, 4), (3, 2, 3, 3, 3), (1, 3, 8, 4, 4), (0, 0, 1, 1, 1), (0, 0, 1, 1, 1), (1, 1, 1), (1, 1, 1), (4,), [[], [], [0]]))
    if name == "pooling_nhwc_sum over 4":
        x, w = r(2, 8, 6, 3), torch.zeros(3, 3)
        want = F.avg_pool2d(x.permute(0, 3, 1, 2), 3, stride=1, padding=1, count_include_pad=True).permute(0, 2, 3, 1) * 9
        return (x, w, want,
                _window_program("pooling_nhwc_sum", (2, 8, 6, 3), (3, 3), (2, 8, 6, 3), (0, 1, 1, 0), (0, 1, 1, 0), (1, 1), (1, 1), (4,), [[], [0]]))
    if name == "pooling_nchw_max padded, width split":
        x, w = r(1, 2, 6, 8), torch.zeros(3, 3)
        return (x, w, F.max_pool2d(x, 3, stride=2, padding=1),
                _window_program("pooling_nchw_max", (1, 2, 6, 8), (3, 3), (1, 2, 3, 4), (0, 0, 1, 1), (0, 0, 1, 1), (2, 2), (1, 1), (2,), [[], [], [], [0]], pad_value="0xFF800000"))
    if name == "conv_2d_ngchw_fgchw grouped, width split":
        x, w = r(1, 2, 2, 8, 8), r(3, 2, 2, 3, 3)
        want = F.conv2d(x.reshape(1, 4, 8, 8), w.permute(1, 0, 2, 3, 4).reshape(6, 2, 3, 3), padding=1, groups=2).reshape(1, 2, 3, 8, 8)
        return (x, w, want,
                _window_program("conv_2d_ngchw_fgchw", (1, 2, 2, 8, 8), (3, 2, 2, 3, 3), (1, 2, 3, 8, 8), (0, 0, 0, 1, 1), (0, 0, 0, 1, 1), (1, 1), (1, 1), (2,), [[], [], [], [], [0]]))
    assert name == "conv_2d_nchw_fchw height and width on 2x2"
    x, w = r(1, 3, 8, 8), r(4, 3, 3, 3)
    return (x, w, F.conv2d(x, w, padding=1),
            _window_program("conv_2d_nchw_fchw", (1, 3, 8, 8), (4, 3, 3, 3), (1, 4, 8, 8), (0, 0, 1, 1), (0, 0, 1, 1), (1, 1), (1, 1), (2, 2), [[], [], [0], [1]]))


WINDOW_CASES = [
    "conv_1d_ncw_fcw dilated",
    "depthwise_conv_2d_nchw_chw stride 2",
    "conv_3d_ncdhw_fcdhw depth over 4",
    "pooling_nhwc_sum over 4",
    "pooling_nchw_max padded, width split",
    "conv_2d_ngchw_fgchw grouped, width split",
    "conv_2d_nchw_fchw height and width on 2x2",
]


@pytest.mark.parametrize("name", WINDOW_CASES)
def test_window_op_split_with_halos_equals_pytorch(name: str) -> None:
    from shardc.runtime.launch import run_program

    x, w, want, program = _case(name)
    ranks = int(np.prod([int(s) for s in program.split("shape = ")[1].split(")")[0].split("x")]))
    partitioned, _, _ = _compiled(program.replace("@main", "@cnn"))
    assert partitioned["shard.update_halo"] == 1 and "shard.all_gather" not in partitioned
    (got,) = run_program(program, [x.numpy(), w.numpy()], ranks=ranks)
    want = want.numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


# -----------------------------------------------------------------------------------------
# The training step (forward and backward, through the training import) with the image
# split by height: PyTorch's loss and gradients. The forward's padded convs and the
# stride-1 weight gradients exchange halos; the backward still gathers where its ops have
# no halo plan yet (the max pool's argmax and its gradient's scatter, the stride-2 conv's
# weight gradient).
# -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_training_step_equals_pytorch(ranks: int) -> None:
    import torch.nn.functional as F

    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch_train import export_train_step
    from shardc.runtime.launch import run_program

    torch.manual_seed(0)
    model = cm.SmallCNN()
    x, target = torch.randn(2, 3, 16, 16), torch.randn(2, 4, 4, 4)
    step = export_train_step(model, [x], [target], F.mse_loss)
    names = [*step.input_names, *step.target_names, *step.param_names]
    height = {"input0": [[], [], [0]], "target0": [[], [], [0]]}
    program = annotate_arguments(step.text, (ranks,), height, names=names)

    partitioned, _, _ = _compiled(program.replace("@train_step", "@cnn"))
    # conv1, conv2, conv3 forward; the weight gradients of conv1 and conv3 (stride 1): their
    # image loop is a reduction split with halos, the sum an all_reduce of the gradient;
    # conv3's input gradient (its gradient padded by an insert_slice into zeros)
    assert partitioned["shard.update_halo"] == 6

    args = [x.numpy(), target.numpy(), *[p.detach().numpy() for p in model.parameters()]]
    got = run_program(program, args, ranks=ranks)
    loss = F.mse_loss(model(x), target)
    want = [loss, *torch.autograd.grad(loss, list(model.parameters()))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.detach().numpy()
        assert np.shape(g) == w.shape
        assert float(np.abs(np.asarray(g) - w).max()) <= 1e-5 * float(np.abs(w).max())


def test_padded_image_wanted_whole_is_gathered_correctly() -> None:
    """The pad splits with halos (its only user is a conv that can split), but the conv's
    result is pinned replicated, so the conv takes the padded image whole: the halo
    layout is turned back into the padded image (cores gathered, then padded), not
    handed to a gather that would read it as an ordinary halo layout."""
    from shardc.runtime.launch import run_program

    F = torch.nn.functional
    program = _window_program("conv_2d_nchw_fchw", (1, 3, 8, 8), (4, 3, 3, 3), (1, 4, 8, 8), (0, 0, 1, 1), (0, 0, 1, 1), (1, 1), (1, 1), (2,), [[], [], [0]])
    program = program.replace(
        "  return %y : tensor<1x4x8x8xf32>",
        "  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding\n"
        "  %y0 = shard.shard %y to %r : tensor<1x4x8x8xf32>\n"
        "  return %y0 : tensor<1x4x8x8xf32>",
    )
    partitioned, _, _ = _compiled(program.replace("@main", "@cnn"))
    assert partitioned["shard.all_gather"] == 1
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(1, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    (got,) = run_program(program, [x.numpy(), w.numpy()], ranks=2)
    want = F.conv2d(x, w, padding=1).numpy()
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())
