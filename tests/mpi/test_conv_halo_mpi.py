"""A CNN split by image height under a real `mpiexec -n 2`: torch-mlir's export, the image
argument annotated, `shardc-run --pipeline shard-to-mpi-pipeline` (halos exchanged by
neighbour send/recv). The result must equal PyTorch's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from _mpiexec import run_ranks  # noqa: E402
from shardc.testing import conv_models as cm  # noqa: E402


@pytest.mark.mpi
def test_height_split_cnn_under_mpiexec(tmp_path: Path) -> None:
    model, inputs, exported = cm.small_cnn_export(batch=2, size=16)
    program = tmp_path / "cnn.mlir"
    program.write_text(cm.height_split_program(exported, 2))
    np.savez(tmp_path / "args.npz", **exported.arguments(model, inputs))
    out = tmp_path / "out"
    proc = run_ranks(
        2,
        ["-m", "shardc.tools.run", str(program), "--pipeline", "shard-to-mpi-pipeline",
         "--inputs", str(tmp_path / "args.npz"), "--output", str(out), "--quiet"],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(out / "result0.npy")
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert got.shape == want.shape
    assert float(np.abs(got - want).max()) <= 1e-5 * float(np.abs(want).max())


@pytest.mark.mpi
def test_height_split_training_step_under_mpiexec(tmp_path: Path) -> None:
    """The CNN's training step (forward and backward) with the image split by height on 2
    MPI ranks: PyTorch's loss and gradients."""
    import torch.nn.functional as F

    from shardc.frontends.annotate import annotate_arguments
    from shardc.frontends.torch_train import export_train_step

    torch.manual_seed(0)
    model = cm.SmallCNN()
    x, target = torch.randn(2, 3, 16, 16), torch.randn(2, 4, 4, 4)
    step = export_train_step(model, [x], [target], F.mse_loss)
    names = [*step.input_names, *step.target_names, *step.param_names]
    program = tmp_path / "step.mlir"
    program.write_text(annotate_arguments(step.text, (2,), {"input0": [[], [], [0]], "target0": [[], [], [0]]}, names=names))
    arrays = [x.numpy(), target.numpy(), *[p.detach().numpy() for p in model.parameters()]]
    np.savez(tmp_path / "args.npz", **{f"arg{i}": a for i, a in enumerate(arrays)})
    out = tmp_path / "out"
    proc = run_ranks(
        2,
        ["-m", "shardc.tools.run", str(program), "--pipeline", "shard-to-mpi-pipeline",
         "--inputs", str(tmp_path / "args.npz"), "--output", str(out), "--quiet"],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loss = F.mse_loss(model(x), target)
    want = [loss, *torch.autograd.grad(loss, list(model.parameters()))]
    for i, w in enumerate(want):
        got = np.load(out / f"result{i}.npy")
        w = w.detach().numpy()
        assert got.shape == w.shape
        assert float(np.abs(got - w).max()) <= 1e-5 * float(np.abs(w).max())
