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


def _compiled(text: str, first: tuple[str, ...] = ()):
    """(collectives after partition, after lowering, the partitioned text); `first`:
    passes run before the pipeline."""
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.training.pipeline import PIPELINE, count_collectives, run_pipeline

    module = LocatingParser(make_context(), text, "<cnn>").parse_module()
    stages = run_pipeline(module, (*first, *PIPELINE[:2]), keep_text=True)
    partitioned = count_collectives(module)["cnn"]
    run_pipeline(module, PIPELINE[2:])
    return partitioned, count_collectives(module)["cnn"], stages[-1].text


@pytest.mark.slow
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
    from shardc.launch import run_program

    model, inputs, exported = cnn
    program = cm.height_split_program(exported, ranks)
    (got,) = run_program(program, cm.arguments(model, inputs, exported), ranks=ranks)
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_non_dividing_height_is_one_located_error() -> None:
    from shardc.launch import ProgramError, run_program

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
    from shardc.launch import run_program

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
# split by height: PyTorch's loss and gradients, with halos and no gather anywhere.
# -----------------------------------------------------------------------------------------


# the rewrites that keep the training step split (shardc/passes/scatter_windows.py,
# expand_before_pad.py), then run's default pipeline
_FIRST = ("scatter-windows", "expand-shapes-before-pads")
_RUN_PIPELINE = ",".join((*_FIRST, "sharding-propagation", "shard-partition", "canonicalize", "cse"))


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_training_step_equals_pytorch(ranks: int) -> None:
    import torch.nn.functional as F

    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch_train import export_train_step
    from shardc.launch import run_program

    torch.manual_seed(0)
    model = cm.SmallCNN()
    x, target = torch.randn(2, 3, 16, 16), torch.randn(2, 4, 4, 4)
    step = export_train_step(model, [x], [target], F.mse_loss)
    names = [*step.input_names, *step.target_names, *step.param_names]
    height = {"input0": [[], [], [0]], "target0": [[], [], [0]]}
    program = annotate_arguments(step.text, (ranks,), height, names=names)

    partitioned, _, text = _compiled(program.replace("@train_step", "@cnn"), _FIRST)
    # Halos: conv1, conv2, conv3 forward; the weight gradients of conv1, conv2 (stride 2:
    # a grouped conv of the padded input, the pad after its reshape) and conv3: their
    # image loop is a reduction split with halos, the sum an all_reduce of the gradient;
    # the input gradients of conv3 and conv2 (the gradient padded, and for stride 2
    # dilated, by an insert_slice into zeros).
    assert partitioned["shard.update_halo"] == 8
    # The max pool's indices read their windows of conv2's split output locally, and its
    # gradient (scatter-windows) writes each rank's rows: nothing is gathered at all,
    # and the only other collectives sum parameter gradients and the loss.
    assert "tm_tensor.scatter" not in text
    assert "shard.all_gather" not in partitioned and "shard.all_to_all" not in partitioned
    # A weight gradient may be summed in its transposed layout (compare sizes); conv2's
    # (stride 2) is the training import's grouped conv, one 4x4-window gradient per
    # sample (groups = batch), cropped to 3x3 and summed over the batch after the
    # all_reduce: [Cin, batch, Cout, 4, 4], a weight-sized value whatever the image size.
    param_sizes = {p.numel() for p in model.parameters()} | {1}
    reduced = [line.rsplit("-> ", 1)[1] for line in text.splitlines() if "shard.all_reduce" in line]
    assert len(reduced) == partitioned["shard.all_reduce"] == 7
    per_sample = [t for t in reduced if t == "tensor<8x2x8x4x4xf32>"]
    assert len(per_sample) == 1
    for type_ in reduced:
        shape = [int(d) for d in type_.split("<")[1].split(">")[0].split("x")[:-1]]
        assert int(np.prod(shape)) in param_sizes or type_ in per_sample, type_

    args = [x.numpy(), target.numpy(), *[p.detach().numpy() for p in model.parameters()]]
    got = run_program(program, args, ranks=ranks, pipeline=_RUN_PIPELINE)
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
    from shardc.launch import run_program

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


# -----------------------------------------------------------------------------------------
# A body that reads a pooling window of a split tensor with tensor.extract (torch-mlir's
# max_pool2d_with_indices): the tensor follows the output-row loop with a stride, each
# rank reads its own rows, nothing is gathered, and the indices stay global.
# -----------------------------------------------------------------------------------------

_POOL_INDICES = """
#in = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
#win = affine_map<(d0, d1, d2, d3, d4, d5) -> (d4, d5)>
shard.grid @grid(shape = RANKS)
func.func @main(%x: tensor<2x3x8x6xf32>) -> (tensor<2x3x4x3xf32>, tensor<2x3x4x3xi64>) {
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<2x3x8x6xf32>
  %c2 = arith.constant 2 : index
  %c6 = arith.constant 6 : index
  %ninf = arith.constant 0xFF800000 : f32
  %none = arith.constant -1 : i64
  %e = tensor.empty() : tensor<2x3x4x3xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<2x3x4x3xf32>) -> tensor<2x3x4x3xf32>
  %k = tensor.empty() : tensor<2x2xf32>
  %m = linalg.pooling_nchw_max {dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>} ins(%xs, %k : tensor<2x3x8x6xf32>, tensor<2x2xf32>) outs(%f : tensor<2x3x4x3xf32>) -> tensor<2x3x4x3xf32>
  %ie = tensor.empty() : tensor<2x3x4x3xi64>
  %if = linalg.fill ins(%none : i64) outs(%ie : tensor<2x3x4x3xi64>) -> tensor<2x3x4x3xi64>
  %ki = tensor.empty() : tensor<2x2xi64>
  %i = linalg.generic {indexing_maps = [#in, #win, #in], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%m, %ki : tensor<2x3x4x3xf32>, tensor<2x2xi64>) outs(%if : tensor<2x3x4x3xi64>) {
  ^bb0(%in: f32, %unused: i64, %out: i64):
    %n = linalg.index 0 : index
    %c = linalg.index 1 : index
    %oh = linalg.index 2 : index
    %kh = linalg.index 4 : index
    %h0 = arith.muli %oh, %c2 : index
    %h = arith.addi %h0, %kh : index
    %ow = linalg.index 3 : index
    %kw = linalg.index 5 : index
    %w0 = arith.muli %ow, %c2 : index
    %w = arith.addi %w0, %kw : index
    %v = tensor.extract %xs[%n, %c, %h, %w] : tensor<2x3x8x6xf32>
    %hit = arith.cmpf oeq, %v, %in : f32
    %row = arith.muli %h, %c6 : index
    %flat = arith.addi %w, %row : index
    %flat64 = arith.index_cast %flat : index to i64
    %new = arith.select %hit, %flat64, %out : i64
    %first = arith.cmpi eq, %out, %none : i64
    %r = arith.select %first, %new, %out : i64
    linalg.yield %r : i64
  } -> tensor<2x3x4x3xi64>
  return %m, %i : tensor<2x3x4x3xf32>, tensor<2x3x4x3xi64>
}
"""


@pytest.mark.parametrize("ranks", [2, 4])
def test_pool_indices_read_their_window_locally(ranks: int) -> None:
    from shardc.launch import run_program

    program = _POOL_INDICES.replace("RANKS", str(ranks))
    partitioned, _, text = _compiled(program.replace("@main", "@cnn"))
    assert "shard.all_gather" not in partitioned and "shard.update_halo" not in partitioned
    # the extract reads the local rows of the split image
    extract = next(line for line in text.splitlines() if "tensor.extract " in line)
    assert extract.endswith(f": tensor<2x3x{8 // ranks}x6xf32>")
    x = torch.randn(2, 3, 8, 6, generator=torch.Generator().manual_seed(3))
    got_values, got_indices = run_program(program, [x.numpy()], ranks=ranks)
    want_values, want_indices = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
    assert np.array_equal(got_values, want_values.numpy())
    assert np.array_equal(got_indices, want_indices.numpy())


# -----------------------------------------------------------------------------------------
# A strided insert_slice into zeros (the input gradient of a stride-2 conv: the gradient
# dilated, padded, convolved) splits by height with halos: a transposed convolution.
# -----------------------------------------------------------------------------------------

_DILATED_CONV = """
shard.grid @grid(shape = RANKS)
func.func @main(%x: tensor<1x2x8x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x16x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<1x2x8x4xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<1x2x18x10xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x2x18x10xf32>) -> tensor<1x2x18x10xf32>
  %d = tensor.insert_slice %xs into %z[0, 0, 1, 1] [1, 2, 8, 4] [1, 1, 2, 2] : tensor<1x2x8x4xf32> into tensor<1x2x18x10xf32>
  %oe = tensor.empty() : tensor<1x3x16x8xf32>
  %of = linalg.fill ins(%zero : f32) outs(%oe : tensor<1x3x16x8xf32>) -> tensor<1x3x16x8xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%d, %w : tensor<1x2x18x10xf32>, tensor<3x2x3x3xf32>) outs(%of : tensor<1x3x16x8xf32>) -> tensor<1x3x16x8xf32>
  return %y : tensor<1x3x16x8xf32>
}
"""


@pytest.mark.parametrize("ranks", [2, 4])
def test_strided_insert_slice_splits_with_halos(ranks: int) -> None:
    from shardc.launch import run_program

    program = _DILATED_CONV.replace("RANKS", str(ranks))
    partitioned, _, text = _compiled(program.replace("@main", "@cnn"))
    assert partitioned["shard.update_halo"] == 1 and "shard.all_gather" not in partitioned
    # each rank dilates its own rows (8 / ranks of them) into its block plus one halo row
    # on each side
    assert f"tensor<1x2x{16 // ranks + 2}x10xf32>" in text
    g = torch.Generator().manual_seed(4)
    x, wt = torch.randn(1, 2, 8, 4, generator=g), torch.randn(2, 3, 3, 3, generator=g)
    w = wt.permute(1, 0, 2, 3).flip(2, 3)  # the transposed conv's weight as a conv's
    (got,) = run_program(program, [x.numpy(), w.contiguous().numpy()], ranks=ranks)
    want = torch.nn.functional.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1).numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


def test_strided_insert_slice_wanted_whole_is_gathered_correctly() -> None:
    """The dilated gradient split with halos, its conv pinned replicated: the cores
    (already dilated) are gathered and padded, not dilated twice."""
    from shardc.launch import run_program

    program = _DILATED_CONV.replace("RANKS", "2").replace(
        "  return %y : tensor<1x3x16x8xf32>",
        "  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding\n"
        "  %d0 = shard.shard %d to %r annotate_for_users : tensor<1x2x18x10xf32>\n"
        "  %y2 = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%d0, %w : tensor<1x2x18x10xf32>, tensor<3x2x3x3xf32>) outs(%of : tensor<1x3x16x8xf32>) -> tensor<1x3x16x8xf32>\n"
        "  %sum = arith.addf %y, %y2 : tensor<1x3x16x8xf32>\n"
        "  return %sum : tensor<1x3x16x8xf32>",
    )
    partitioned, _, _ = _compiled(program.replace("@main", "@cnn"))
    assert partitioned["shard.all_gather"] >= 1
    g = torch.Generator().manual_seed(5)
    x, wt = torch.randn(1, 2, 8, 4, generator=g), torch.randn(2, 3, 3, 3, generator=g)
    w = wt.permute(1, 0, 2, 3).flip(2, 3)
    (got,) = run_program(program, [x.numpy(), w.contiguous().numpy()], ranks=2)
    want = 2 * torch.nn.functional.conv_transpose2d(x, wt, stride=2, padding=1, output_padding=1).numpy()
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


# -----------------------------------------------------------------------------------------
# Training (train_module, AdamW) with every image split by height over the replicas
# (data_dim=2): 3 steps equal torch.optim.AdamW, the step exchanging halos only.
# -----------------------------------------------------------------------------------------


def _torch_adamw(model, batches, loss_fn, lr: float = 1e-2):
    import copy

    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return m, losses


def check_height_split_training(model, batches, loss_fn, ranks: int, halos: int) -> None:
    """train_module with the images split by height on `ranks` simulated ranks equals
    torch.optim.AdamW (losses, parameters) and its step exchanges `halos` halos and
    gathers nothing."""
    from shardc.frontends.torch_train import TorchTraining

    job = TorchTraining.prepare(model, batches, loss_fn, world=ranks, steps=len(batches), lr=1e-2, data_dim=2)
    counts = job.program.shard_collectives["train_step"]
    assert counts["shard.update_halo"] == halos
    assert not any(k.startswith(("shard.all_gather", "shard.all_to_all")) for k in counts), counts
    result = job.run()
    m, want = _torch_adamw(model, batches, loss_fn)
    np.testing.assert_allclose(result.losses, want, rtol=1e-5)
    for k, v in m.named_parameters():
        np.testing.assert_allclose(result.params[k], v.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_cnn_trains_like_torch_adamw(ranks: int) -> None:
    torch.manual_seed(0)
    model = cm.SmallCNN()
    batches = [(torch.randn(2, 3, 16, 16), torch.randn(2, 4, 4, 4)) for _ in range(3)]
    check_height_split_training(model, batches, torch.nn.functional.mse_loss, ranks, halos=8)


# -----------------------------------------------------------------------------------------
# A ResNet-style network (conv_models.SmallResNet: residual adds, a stride-2 block with a
# 1x1 stride-2 shortcut, global average pooling, a linear head) split by height.
# -----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_resnet_forward_equals_pytorch(ranks: int) -> None:
    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch import export_module
    from shardc.launch import run_program

    torch.manual_seed(0)
    model = cm.SmallResNet()
    x = torch.randn(2, 3, 16, 16)
    exported = export_module(model, (x,), func_name="cnn", input_names=["x"])
    program = annotate_arguments(exported.text, (ranks,), {"x": [[], [], [0]]}, names=exported.arg_names)
    partitioned, _, text = _compiled(program)
    # the five 3x3 convs exchange halos (the 1x1 stride-2 shortcut needs none); the
    # global average pool sums each rank's rows: one all_reduce of [batch, C, 1, 1]
    assert partitioned["shard.update_halo"] == 5
    assert "shard.all_gather" not in partitioned and "shard.all_to_all" not in partitioned
    assert partitioned["shard.all_reduce"] == 1
    assert [line.rsplit("-> ", 1)[1] for line in text.splitlines() if "shard.all_reduce" in line] == ["tensor<2x8x1x1xf32>"]
    (got,) = run_program(program, cm.arguments(model, (x,), exported), ranks=ranks)
    with torch.no_grad():
        want = model(x).numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [2, 4])
def test_height_split_resnet_trains_like_torch_adamw(ranks: int) -> None:
    torch.manual_seed(0)
    model = cm.SmallResNet()
    batches = [(torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2,))) for _ in range(3)]
    # forward 5, the weight gradients of the five 3x3 convs 5, the input gradients of
    # conv2, conv1, down2 and down1 (padded, down1's dilated too) 4; the shortcut's
    # stride-2 input gradient is dilated without padding: local, no halo
    check_height_split_training(model, batches, torch.nn.functional.cross_entropy, ranks, halos=14)
