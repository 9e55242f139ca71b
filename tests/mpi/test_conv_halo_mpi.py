"""CNNs split by image height under a real `mpiexec -n 2`: torch-mlir's export, the image
argument annotated, `shardc-run --pipeline shard-to-mpi-pipeline` (halos exchanged by
neighbour send/recv), forward and training step; and `train_module(data_dim=2)` for 3
AdamW steps. The results must equal PyTorch's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from _mpiexec import run_ranks  # noqa: E402
from shardc.testing import conv_models as cm  # noqa: E402

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's


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
    # the rewrites that keep the step split by height (no gather), then the lowering
    pipeline = "scatter-windows,expand-shapes-before-pads,shard-to-mpi-pipeline"
    proc = run_ranks(
        2,
        ["-m", "shardc.tools.run", str(program), "--pipeline", pipeline,
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


_TRAIN = """
import sys
import numpy as np
import torch
import torch.nn.functional as F
from mpi4py import MPI
from shardc.frontends.torch_train import TorchTraining
from shardc.testing import conv_models as cm

torch.manual_seed(0)
if sys.argv[2] == "resnet":
    model, loss_fn = cm.SmallResNet(), F.cross_entropy
    batches = [(torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2,))) for _ in range(3)]
else:
    model, loss_fn = cm.SmallCNN(), F.mse_loss
    batches = [(torch.randn(2, 3, 16, 16), torch.randn(2, 4, 4, 4)) for _ in range(3)]
job = TorchTraining.prepare(model, batches, loss_fn, world=None, steps=3, lr=1e-2, data_dim=2)
counts = job.program.shard_collectives["train_step"]
result = job.run()
if MPI.COMM_WORLD.Get_rank() == 0:
    np.savez(sys.argv[1], losses=np.array(result.losses), halos=counts["shard.update_halo"],
             gathers=sum(v for k, v in counts.items() if k.startswith("shard.all_gather")), **result.params)
"""


@pytest.mark.mpi
@pytest.mark.parametrize("net,halos", [("cnn", 8), ("resnet", 14)])
def test_height_split_training_with_adamw_under_mpiexec(tmp_path: Path, net: str, halos: int) -> None:
    """train_module on 2 MPI ranks, every image split by height (data_dim=2): 3 AdamW
    steps equal torch.optim.AdamW (losses and parameters); the step exchanges its halos
    (counted as in tests/unit/interfaces/test_conv_sharding.py) and gathers nothing."""
    import copy

    import torch.nn.functional as F

    script = tmp_path / "train.py"
    script.write_text(_TRAIN)
    out = tmp_path / "result.npz"
    proc = run_ranks(2, [str(script), str(out), net], timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(np.load(out))
    assert int(got["halos"]) == halos and int(got["gathers"]) == 0

    torch.manual_seed(0)
    if net == "resnet":
        model, loss_fn = cm.SmallResNet(), F.cross_entropy
        batches = [(torch.randn(2, 3, 16, 16), torch.randint(0, 5, (2,))) for _ in range(3)]
    else:
        model, loss_fn = cm.SmallCNN(), F.mse_loss
        batches = [(torch.randn(2, 3, 16, 16), torch.randn(2, 4, 4, 4)) for _ in range(3)]
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    want = []
    for x, y in batches:
        opt.zero_grad()
        loss = loss_fn(m(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    np.testing.assert_allclose(got["losses"], want, rtol=1e-5)
    for k, v in m.named_parameters():
        np.testing.assert_allclose(got[k], v.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
