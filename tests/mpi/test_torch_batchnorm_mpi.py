"""Train-mode BatchNorm trained by `train_module` under a real `mpiexec -n 2` (the batch
split over the MPI ranks): the statistics are the global batch's (an MPI allreduce, as
SyncBatchNorm), so losses, parameters and running statistics equal PyTorch's on one
process with torch.optim.AdamW."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from _mpiexec import run_ranks  # noqa: E402

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

_MODEL = """
import torch
from torch import nn
import torch.nn.functional as F


def make():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
        nn.Linear(4 * 6 * 6, 8, bias=False), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3),
    )
    batches = [(torch.randn(8, 3, 6, 6) + 0.5, torch.randint(0, 3, (8,))) for _ in range(3)]
    return model, batches
"""

_TRAIN = """
import sys
import numpy as np
import torch.nn.functional as F
from bn_model import make
from shardc.frontends.torch_train import train_module

model, batches = make()
result = train_module(model, batches, F.cross_entropy, world=None, steps=3, lr=1e-2)
from mpi4py import MPI
if MPI.COMM_WORLD.Get_rank() == 0:
    state = {k: v.numpy() for k, v in result.state_dict(model).items()}
    np.savez(sys.argv[1], losses=np.asarray(result.losses), **state)
"""


@pytest.mark.mpi
def test_batchnorm_training_under_mpiexec(tmp_path: Path) -> None:
    (tmp_path / "bn_model.py").write_text(_MODEL)
    (tmp_path / "train.py").write_text(_TRAIN)
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        from bn_model import make
    finally:
        sys.path.remove(str(tmp_path))
    out = tmp_path / "out.npz"
    proc = run_ranks(2, [str(tmp_path / "train.py"), str(out)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(out)
    model, batches = make()
    m = copy.deepcopy(model)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    np.testing.assert_allclose(got["losses"], losses, rtol=1e-5, atol=1e-6)
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(got[k], v.numpy(), rtol=2e-5, atol=2e-6, err_msg=k)
    assert int(got["1.num_batches_tracked"]) == 3
