"""scatter-windows (shardc/passes/scatter_windows.py): the max pool's gradient scatter,
as the training import emits it, becomes a windowed generic where the pool's windows do
not overlap, and the step still equals PyTorch; overlapping windows keep their scatter."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class _Pool(nn.Module):
    def __init__(self, kernel: int, stride: int, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.pool = nn.MaxPool2d(kernel, stride, padding)

    def forward(self, x):
        return self.pool(self.conv(x))


def _step(kernel: int, stride: int, padding: int = 0):
    from shardc.frontends.torch_train import export_train_step

    torch.manual_seed(0)
    model = _Pool(kernel, stride, padding)
    x = torch.randn(2, 2, 8, 8)
    with torch.no_grad():
        target = torch.randn_like(model(x))
    return model, x, target, export_train_step(model, [x], [target], F.mse_loss)


def _rewritten(text: str) -> tuple[int, str]:
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string
    from shardc.passes.scatter_windows import scatters_in_windows

    module = LocatingParser(make_context(), text, "<step>").parse_module()
    count = scatters_in_windows(module)
    module.verify()
    return count, module_to_string(module)


def _check(model, x, target, got) -> None:
    loss = F.mse_loss(model(x), target)
    want = [loss, *torch.autograd.grad(loss, list(model.parameters()))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.detach().numpy()
        assert float(np.abs(np.asarray(g) - w).max()) <= 1e-5 * float(np.abs(w).max())


@pytest.mark.slow
@pytest.mark.parametrize("kernel,stride", [(2, 2), (2, 4)])
def test_non_overlapping_pool_gradient_is_a_windowed_generic(kernel: int, stride: int) -> None:
    from shardc.launch import run_program

    model, x, target, step = _step(kernel, stride)
    assert "tm_tensor.scatter" in step.text
    count, text = _rewritten(step.text)
    assert count == 1 and "tm_tensor.scatter" not in text
    args = [x.numpy(), target.numpy(), *[p.detach().numpy() for p in model.parameters()]]
    _check(model, x, target, run_program(text, args))


def test_overlapping_pool_keeps_its_scatter() -> None:
    from shardc.launch import run_program

    model, x, target, step = _step(3, 2, 1)
    count, text = _rewritten(step.text)
    assert count == 0 and "tm_tensor.scatter" in text
    args = [x.numpy(), target.numpy(), *[p.detach().numpy() for p in model.parameters()]]
    _check(model, x, target, run_program(text, args))


@pytest.mark.slow
def test_pass_runs_from_shardc_opt(tmp_path) -> None:
    import subprocess
    import sys

    _, _, _, step = _step(2, 2)
    source = tmp_path / "step.mlir"
    source.write_text(step.text)
    proc = subprocess.run(
        [sys.executable, "-m", "shardc.tools.opt", str(source), "--scatter-windows"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tm_tensor.scatter" not in proc.stdout and "tensor.expand_shape" in proc.stdout
