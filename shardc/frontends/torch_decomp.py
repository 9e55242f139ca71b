"""Decompositions the training import adds to torch-mlir's table, for backward ops that
torch-mlir 20261001 cannot lower to linalg, or lowers wrongly.

`aten.avg_pool2d_backward` (the gradient of `nn.AvgPool2d` / `F.avg_pool2d`) is left as
is by torch's and torch-mlir's tables and torch-mlir then fails on it (`failed to
legalize operation 'torch.constant.bool'`). Average pooling is linear: its gradient is
the output gradient divided by each window's divisor, spread back over the window by a
transposed depthwise convolution with a kernel of ones (which torch-mlir lowers to a
`linalg.conv_2d_ngchw_gfchw` or `depthwise` op), cut to the input's rows and columns.
The divisor comes from the same sum over a mask of the counted positions (the padded
image with `count_include_pad`, else the image alone; with `ceil_mode` the windows
hanging past the padding count only what they cover, as PyTorch does).

`aten.convolution_backward` with groups (grouped and depthwise convolutions): torch-mlir
fails to import it (`tensor.expand_shape` of a static 0, a filter of the wrong shape)
or computes a weight gradient of the ungrouped shape. Both gradients are grouped
forward convolutions, which torch-mlir lowers (`linalg.conv_2d_ngchw_gfchw`): the
input's is the transposed convolution of the output gradient; the weight's convolves
the input, batch and channels exchanged, with the output gradient as filter (stride and
dilation exchanged), as the ungrouped lowering does, one group per group. With unit
stride the input's gradient is a forward grouped convolution instead (each group's
filter transposed and flipped, padded by dilation * (kernel - 1) - padding): torch-mlir
fails on the transposed form of a depthwise filter (a rank-5 `tensor.collapse_shape`:
ConvNeXt's 7x7 depthwise convolutions after a projection).

`aten.native_batch_norm` in training form (train-mode BatchNorm with running
statistics) updates `running_mean` and `running_var` in place, but its schema does not
say so: functionalization passes it through as a pure op and torch-mlir imports it as
one, so the update is lost. `native_batch_norm_training` computes the batch statistics
with plain aten ops and writes the new running statistics with `copy_` (momentum
average, the variance unbiased as PyTorch keeps it), a mutation that a functionalizing
retrace turns into values (`export_train_step` returns them as the step's updated
buffers). The normalized output and the saved mean and inverse standard deviation are
native_batch_norm's, so its backward is unchanged. Its eval form (BatchNorm in eval mode
traced by make_fx: the held-out loss) is imported by torch-mlir with a cast of the
statistics to shape 0 that fails to lower, so it is written out in aten ops too.
"""

from __future__ import annotations

from typing import Any


def training_decompositions() -> dict[Any, Any]:
    """The forward export's table (`shardc.frontends.torch.decomposition_table`) and this
    module's additions."""
    import torch

    from shardc.frontends.torch import decomposition_table

    table = decomposition_table()
    table[torch.ops.aten.avg_pool2d_backward.default] = avg_pool2d_backward
    table[torch.ops.aten.convolution_backward.default] = grouped_convolution_backward
    table[torch.ops.aten.native_batch_norm.default] = native_batch_norm_training
    return table


def _pair(v: Any, default: Any = None) -> tuple[int, int]:
    if v is None or (hasattr(v, "__len__") and len(v) == 0):
        v = default
    return (int(v[0]), int(v[-1])) if hasattr(v, "__len__") else (int(v), int(v))


def _divisors(h: int, w: int, oh: int, ow: int, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, count_include_pad: bool) -> Any:
    """Each output position's divisor: how many positions of its window are counted
    (the padded image, or the image alone), a constant of the shapes."""
    import numpy as np

    reach_h, reach_w = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    mask = np.zeros((max(reach_h, h + 2 * ph), max(reach_w, w + 2 * pw)), np.float64)
    if count_include_pad:
        mask[: h + 2 * ph, : w + 2 * pw] = 1
    else:
        mask[ph : ph + h, pw : pw + w] = 1
    windows = np.lib.stride_tricks.sliding_window_view(mask, (kh, kw))[::sh, ::sw][:oh, :ow]
    return windows.sum(axis=(-2, -1))


def avg_pool2d_backward(
    grad_output: Any, x: Any, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool, count_include_pad: bool, divisor_override: Any
) -> Any:
    import torch
    import torch.nn.functional as F

    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    *lead, h, w = x.shape
    oh, ow = grad_output.shape[-2:]
    g = grad_output.reshape(-1, 1, oh, ow)
    if divisor_override:
        g = g / divisor_override
    else:
        g = g / torch.as_tensor(_divisors(h, w, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad), dtype=g.dtype)
    spread = F.conv_transpose2d(g, x.new_ones(1, 1, kh, kw), stride=(sh, sw))
    spread = spread[..., ph : ph + h, pw : pw + w]
    got_h, got_w = spread.shape[-2:]
    if (got_h, got_w) != (h, w):  # windows that end before the image does
        spread = F.pad(spread, (0, w - got_w, 0, h - got_h))
    return spread.reshape(*lead, h, w).to(torch.promote_types(grad_output.dtype, x.dtype))


def grouped_convolution_backward(
    grad_output: Any, x: Any, weight: Any, bias_sizes: Any, stride: Any, padding: Any, dilation: Any,
    transposed: bool, output_padding: Any, groups: int, output_mask: Any,
) -> Any:
    """`aten.convolution_backward` of a grouped convolution (not transposed) as grouped
    forward convolutions; other convolutions are left to torch-mlir."""
    import torch.nn.functional as F

    if groups == 1 or transposed:
        return NotImplemented
    nd = x.dim() - 2
    conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    conv_t = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
    stride, padding, dilation = (list(v) * nd if len(v) == 1 else list(v) for v in (stride, padding, dilation))
    n, c_in = x.shape[:2]
    c_out = weight.shape[0]
    kernel = list(weight.shape[2:])
    spatial, out_spatial = list(x.shape[2:]), list(grad_output.shape[2:])
    cg, fg = c_in // groups, c_out // groups
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        # the rows the transposed convolution leaves short of the input (strides that do
        # not divide): output_padding
        reach = [(o - 1) * s - 2 * p + d * (k - 1) + 1 for o, s, p, d, k in zip(out_spatial, stride, padding, dilation, kernel)]
        extra = [size - r for size, r in zip(spatial, reach)]
        flipped_padding = [d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding)]
        if all(v == 1 for v in stride) and min(flipped_padding) >= 0:
            # unit stride: a forward grouped convolution with each group's filter
            # transposed and flipped (torch-mlir fails on the transposed grouped form of
            # a depthwise filter: a rank-5 collapse_shape)
            w_t = weight.reshape(groups, fg, cg, *kernel).transpose(1, 2).reshape(groups * cg, fg, *kernel).flip(list(range(2, 2 + nd)))
            grad_input = conv(grad_output, w_t, padding=flipped_padding, dilation=dilation, groups=groups)
        else:
            grad_input = conv_t(grad_output, weight, stride=stride, padding=padding, output_padding=extra, groups=groups, dilation=dilation)
    if output_mask[1]:
        # input as (cg, groups * n, spatial): batch and channels exchanged, per group
        xs = x.reshape(n, groups, cg, *spatial).transpose(0, 2).reshape(cg, groups * n, *spatial)
        # output gradient as the filter: (groups * fg, n, out_spatial)
        gs = grad_output.reshape(n, groups, fg, *out_spatial).permute(1, 2, 0, *range(3, 3 + nd)).reshape(groups * fg, n, *out_spatial)
        gw = conv(xs, gs, stride=dilation, padding=padding, dilation=stride, groups=groups)  # (cg, groups * fg, >= kernel)
        gw = gw[(slice(None), slice(None), *(slice(0, k) for k in kernel))]
        grad_weight = gw.reshape(cg, groups, fg, *kernel).permute(1, 2, 0, *range(3, 3 + nd)).reshape(c_out, cg, *kernel)
    if output_mask[2]:
        grad_bias = grad_output.sum([0, *range(2, 2 + nd)])
    return grad_input, grad_weight, grad_bias


def native_batch_norm_training(
    x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, training: bool, momentum: float, eps: float
) -> Any:
    """`aten.native_batch_norm` with running statistics in training: the update of the
    statistics as a visible `copy_`. In eval form (normalized by the running statistics,
    which torch-mlir imports with a shape-0 cast it cannot lower) plain aten ops, the
    saved statistics empty as native_batch_norm's; without running statistics, left to
    torch-mlir."""
    if running_mean is None or running_var is None:
        return NotImplemented
    if not training:
        shape = [1, x.shape[1], *([1] * (x.dim() - 2))]
        out = (x - running_mean.reshape(shape)) * (running_var.reshape(shape) + eps).rsqrt()
        if weight is not None:
            out = out * weight.reshape(shape)
        if bias is not None:
            out = out + bias.reshape(shape)
        return out, x.new_zeros(0), x.new_zeros(0)
    dims = [0, *range(2, x.dim())]
    shape = [1, x.shape[1], *([1] * (x.dim() - 2))]
    count = x.numel() // x.shape[1]
    mean = x.mean(dims)
    centered = x - mean.reshape(shape)
    var = (centered * centered).mean(dims)
    rstd = (var + eps).rsqrt()
    out = centered * rstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    unbiased = var * (count / max(count - 1, 1))
    running_mean.copy_(running_mean * (1 - momentum) + mean.to(running_mean.dtype) * momentum)
    running_var.copy_(running_var * (1 - momentum) + unbiased.to(running_var.dtype) * momentum)
    return out, mean, rstd
