"""One convolution layer as torch-mlir imports it, run by shardc's runtime against
PyTorch eager on 1 thread, in the same run (interleaved; medians and ratios):

  conv forward:   nn.Conv2d(c, c, 3, padding=1) on (batch, c, size, size)
                  (tensor.pad + linalg.conv_2d_nchw_fchw + the bias);
  max pool:       F.max_pool2d(x, 2) (linalg.pooling_nchw_max);
  conv step:      loss and gradients of mse(conv(x), target) (export_train_step:
                  the forward, and the input's and weight's gradients as convolutions).

Not a test. Needs the [torch] extra.

    python bench/conv_layer.py [--batch 16 --channels 64 --size 32 --repeats 10]
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


def _interleaved(ours, theirs, repeats: int) -> tuple[float, float]:
    t_ours: list[float] = []
    t_theirs: list[float] = []
    ours(), theirs()  # warm up (compile, allocator, BLAS)
    for k in range(repeats):
        for fn, out in ((ours, t_ours), (theirs, t_theirs)) if k % 2 == 0 else ((theirs, t_theirs), (ours, t_ours)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(t_ours), statistics.median(t_theirs)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=10)
    a = p.parse_args(argv)

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

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fwd = compile_text(str(fx.export_and_import(conv, x, output_type="linalg-on-tensors")))
        pool = compile_text(str(fx.export_and_import(Pool(), x, output_type="linalg-on-tensors")))
        step = compile_text(export_train_step(conv, (x,), (target,), F.mse_loss).text)

    def torch_step():
        conv.zero_grad()
        F.mse_loss(conv(x), target).backward()

    rows = []
    with torch.no_grad():
        rows.append(("conv forward", *_interleaved(lambda: fwd.call("main", xn), lambda: conv(x), a.repeats)))
        rows.append(("max pool 2x2", *_interleaved(lambda: pool.call("main", xn), lambda: F.max_pool2d(x, 2), a.repeats)))
    rows.append(("conv step (fwd+bwd)", *_interleaved(lambda: step.call("train_step", xn, tn, *params), torch_step, a.repeats)))
    print(f"batch {a.batch}, {a.channels} channels, {a.size}x{a.size}, 3x3 kernel, 1 thread (median of {a.repeats})")
    print(f"{'':22}{'shardc ms':>10}{'torch ms':>10}{'ratio':>8}")
    for name, ours, theirs in rows:
        print(f"{name:22}{ours * 1e3:10.1f}{theirs * 1e3:10.1f}{ours / theirs:8.2f}")
    np.testing.assert_allclose(fwd.call("main", xn), conv(x).detach().numpy(), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    main()
