"""A model trained on BatchNorm's running statistics (eval mode, as `shardc-train` runs
a transformers ResNet): torch-mlir cannot lower `aten.native_batch_norm` with
training=False (it casts the statistics to the empty saved mean), so the training
import decomposes it (`shardc.frontends.torch_decomp`); the step's loss and gradients
must be PyTorch's (train-mode BatchNorm: test_torch_batchnorm.py)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from shardc.frontends.torch_train import export_train_step  # noqa: E402
from shardc.launch import run_program  # noqa: E402


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4)).double()
    for bn in (model[1], model[4]):  # statistics and affine parameters that are not the identity
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        nn.init.uniform_(bn.weight, 0.5, 1.5)
        nn.init.uniform_(bn.bias, -0.5, 0.5)
    return model


@pytest.mark.slow
def test_eval_batchnorm_step_equals_pytorch():
    model = _model().eval()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    target = torch.randn(2, 4, 6, 6, dtype=torch.float64)
    step = export_train_step(model, (x,), (target,), F.mse_loss)
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    loss, *grads = run_program(step.text, [x.numpy(), target.numpy(), *(state[n].detach().numpy() for n in step.param_names + step.buffer_names)], ranks=1)
    want = F.mse_loss(model(x), target)
    want.backward()
    assert abs(float(loss) - want.item()) < 1e-12 * abs(want.item())
    for n, g in zip(step.param_names, grads):
        np.testing.assert_allclose(g, state[n].grad.numpy(), rtol=0, atol=1e-12 * float(np.abs(state[n].grad.numpy()).max()), err_msg=n)
