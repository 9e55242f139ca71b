"""One convolution layer as torch-mlir imports it, run by shardc's runtime against
PyTorch eager on 1 thread, in the same run (interleaved; medians and ratios):

  conv forward:   nn.Conv2d(c, c, 3, padding=1) on (batch, c, size, size)
                  (tensor.pad + linalg.conv_2d_nchw_fchw + the bias);
  max pool:       F.max_pool2d(x, 2) (linalg.pooling_nchw_max);
  conv step:      loss and gradients of mse(conv(x), target) (export_train_step:
                  the forward, and the weight's gradient as a convolution);
  resnet step:    the same for a stem conv, a residual block (two 3x3 convs) and a
                  downsampling block (3x3 stride-2 convs, a 1x1 stride-2 shortcut):
                  input gradients (transposed convolutions) and strided windows too;
  depthwise:      nn.Conv2d(c, c, 7, padding=3, groups=c) (ConvNeXt's), forward, and
                  its training step as a first layer (no input gradient);
  pool step:      max and average pool 2x2 of a per-channel scaled image, the scale's
                  gradient (both pools' backward: a scatter-add, a transposed conv).

Not a test. Needs the [torch] extra.

    python bench/conv_layer.py [--batch 16 --channels 64 --size 32 --repeats 10] [--cpu-time]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402


CLOCK = time.perf_counter


def _interleaved(ours, theirs, repeats: int) -> tuple[float, float]:
    t_ours: list[float] = []
    t_theirs: list[float] = []
    ours(), theirs()  # warm up (compile, allocator, BLAS)
    for k in range(repeats):
        for fn, out in ((ours, t_ours), (theirs, t_theirs)) if k % 2 == 0 else ((theirs, t_theirs), (ours, t_ours)):
            t0 = CLOCK()
            fn()
            out.append(CLOCK() - t0)
    return statistics.median(t_ours), statistics.median(t_theirs)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--cpu-time", action="store_true", help="time by the process's CPU time (a machine shared with other jobs), not wall time")
    a = p.parse_args(argv)
    global CLOCK
    if a.cpu_time:
        CLOCK = time.process_time

    import torch
    import torch.nn.functional as F
    from torch_mlir import fx

    from shardc.frontends.torch_train import export_train_step
    from shardc.runtime import compile_text

    torch.set_num_threads(1)
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(a.channels, a.channels, 3, padding=1)
    x = torch.randn(a.batch, a.channels, a.size, a.size)
    target = torch.randn(a.batch, a.channels, a.size, a.size)
    xn, tn = x.numpy(), target.numpy()
    params = [q.detach().numpy() for q in conv.parameters()]

    class Pool(torch.nn.Module):
        def forward(self, v):
            return F.max_pool2d(v, 2)

    class Block(torch.nn.Module):
        """A ResNet basic block (no batch norm): two 3x3 convs and the shortcut, a 1x1
        conv where the block downsamples."""

        def __init__(self, c_in: int, c_out: int, stride: int) -> None:
            super().__init__()
            self.conv1 = torch.nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1)
            self.conv2 = torch.nn.Conv2d(c_out, c_out, 3, padding=1)
            self.short = torch.nn.Conv2d(c_in, c_out, 1, stride=stride) if stride != 1 or c_in != c_out else None

        def forward(self, v):
            y = self.conv2(F.relu(self.conv1(v)))
            return F.relu(y + (v if self.short is None else self.short(v)))

    class ScaledPools(torch.nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(c, 1, 1))

        def forward(self, v):
            v = v * self.scale
            return F.max_pool2d(v, 2) + F.avg_pool2d(v, 2)

    c = a.channels
    pools = ScaledPools(c)
    pool_target = torch.randn(a.batch, c, a.size // 2, a.size // 2)
    pool_params = [q.detach().numpy() for q in pools.parameters()]
    pool_tn = pool_target.numpy()
    resnet = torch.nn.Sequential(torch.nn.Conv2d(c, c, 3, padding=1), torch.nn.ReLU(), Block(c, c, 1), Block(c, c, 2))
    depthwise = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
    with torch.no_grad():
        res_target = torch.randn(resnet(x).shape)
    res_params = [q.detach().numpy() for q in resnet.parameters()]
    dw_params = [q.detach().numpy() for q in depthwise.parameters()]
    res_tn = res_target.numpy()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fwd = compile_text(str(fx.export_and_import(conv, x, output_type="linalg-on-tensors")))
        pool = compile_text(str(fx.export_and_import(Pool(), x, output_type="linalg-on-tensors")))
        step = compile_text(export_train_step(conv, (x,), (target,), F.mse_loss).text)
        res_step = compile_text(export_train_step(resnet, (x,), (res_target,), F.mse_loss).text)
        dw_fwd = compile_text(str(fx.export_and_import(depthwise, x, output_type="linalg-on-tensors")))
        dw_step = compile_text(export_train_step(depthwise, (x,), (target,), F.mse_loss).text)
        pool_step = compile_text(export_train_step(pools, (x,), (pool_target,), F.mse_loss).text)

    def torch_step():
        conv.zero_grad()
        F.mse_loss(conv(x), target).backward()

    def torch_res_step():
        resnet.zero_grad()
        F.mse_loss(resnet(x), res_target).backward()

    def torch_dw_step():
        depthwise.zero_grad()
        F.mse_loss(depthwise(x), target).backward()

    def torch_pool_step():
        pools.zero_grad()
        F.mse_loss(pools(x), pool_target).backward()

    rows = []
    with torch.no_grad():
        rows.append(("conv forward", *_interleaved(lambda: fwd.call("main", xn), lambda: conv(x), a.repeats)))
        rows.append(("max pool 2x2", *_interleaved(lambda: pool.call("main", xn), lambda: F.max_pool2d(x, 2), a.repeats)))
        rows.append(("depthwise 7x7 forward", *_interleaved(lambda: dw_fwd.call("main", xn), lambda: depthwise(x), a.repeats)))
    rows.append(("conv step (fwd+bwd)", *_interleaved(lambda: step.call("train_step", xn, tn, *params), torch_step, a.repeats)))
    rows.append(("resnet step", *_interleaved(lambda: res_step.call("train_step", xn, res_tn, *res_params), torch_res_step, a.repeats)))
    rows.append(("pool step (max + avg)", *_interleaved(lambda: pool_step.call("train_step", xn, pool_tn, *pool_params), torch_pool_step, a.repeats)))
    rows.append(("depthwise 7x7 step", *_interleaved(lambda: dw_step.call("train_step", xn, tn, *dw_params), torch_dw_step, a.repeats)))
    clock = "CPU time" if a.cpu_time else "wall time"
    print(f"batch {a.batch}, {a.channels} channels, {a.size}x{a.size}, 3x3 kernel, 1 thread ({clock}, median of {a.repeats})")
    print(f"{'':24}{'shardc ms':>10}{'torch ms':>10}{'ratio':>8}")
    for name, ours, theirs in rows:
        print(f"{name:24}{ours * 1e3:10.1f}{theirs * 1e3:10.1f}{ours / theirs:8.2f}")
    np.testing.assert_allclose(fwd.call("main", xn), conv(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw_fwd.call("main", xn), depthwise(x).detach().numpy(), rtol=1e-4, atol=1e-4)
    torch_res_step()
    _, *grads = res_step.call("train_step", xn, res_tn, *res_params)
    for (name, q), g in zip(resnet.named_parameters(), grads):
        np.testing.assert_allclose(g, q.grad.numpy(), rtol=1e-3, atol=1e-5, err_msg=name)


if __name__ == "__main__":
    main()
