"""The input gradient of a grouped or depthwise convolution inside a network (ConvNeXt's
7x7 depthwise convolutions after a projection): torch-mlir cannot import the transposed
grouped convolution of a depthwise filter (a rank-5 `tensor.collapse_shape`), so with
unit stride the training import writes it as a forward grouped convolution with each
group's filter transposed and flipped (`shardc.frontends.torch_decomp`). Loss and every
gradient against PyTorch, float64."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch.nn as nn  # noqa: E402

from shardc.frontends.torch_train import export_train_step  # noqa: E402
from shardc.launch import run_program  # noqa: E402

CASES = {
    # name: (layers before the grouped conv's input, input shape)
    "depthwise-7x7-kernel-wider-than-image": (lambda: nn.Sequential(nn.Conv2d(4, 4, 1), nn.Conv2d(4, 4, 7, padding=3, groups=4)), (2, 4, 4, 4)),
    "groups2-dilation2-channel-multiplier": (lambda: nn.Sequential(nn.Conv2d(4, 4, 1), nn.Conv2d(4, 8, 3, padding=2, dilation=2, groups=2)), (2, 4, 9, 9)),
    "depthwise-1d-uneven-padding": (lambda: nn.Sequential(nn.Conv1d(4, 4, 1), nn.Conv1d(4, 4, 3, padding=0, groups=4)), (2, 4, 9)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_grouped_conv_input_gradient_equals_pytorch(name):
    build, shape = CASES[name]
    torch.manual_seed(0)
    model = build().double()
    x = torch.randn(*shape, dtype=torch.float64)
    step = export_train_step(model, (x,), (), lambda out: out.pow(2).sum())
    loss, *grads = run_program(step.text, [x.numpy(), *(p.detach().numpy() for p in model.parameters())], ranks=1)
    want = model(x).pow(2).sum()
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-12 * abs(want.item())
    for (n, p), g in zip(model.named_parameters(), grads):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=0, atol=1e-12 * float(np.abs(p.grad.numpy()).max()), err_msg=n)
