"""torch-mlir's export of PyTorch models, annotated at a few arguments, run by
`shardc-run --pipeline shard-to-mpi-pipeline` under a real `mpiexec` (2 and 4 ranks):
the README's path end to end. The result must equal PyTorch's (max abs diff < 1e-4)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")

import torch  # noqa: E402

from shardc.frontends.annotate import annotate_arguments  # noqa: E402
from shardc.testing import torch_models as tm  # noqa: E402

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MPIEXEC = shutil.which("mpiexec")

CASES = {
    "mlp-megatron-4": (lambda: tm.mlp_export(batch=8), (2, 2), {"x": [[0]], "fc1.weight": [[1]], "fc2.weight": [[], [1]]}),
    "gpt-batch-2": (lambda: tm.gpt_export(batch=4), (2,), {"idx": [[0]]}),
    "gpt-megatron-4": (
        lambda: tm.gpt_export(batch=4),
        (2, 2),
        {"idx": [[0]], "blocks.0.fc.weight": [[1]], "blocks.0.out.weight": [[], [1]]},
    ),
}


@pytest.mark.mpi
@pytest.mark.parametrize("case", list(CASES))
def test_exported_model_under_mpiexec(tmp_path: Path, case: str) -> None:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    make, grid, shardings = CASES[case]
    model, inputs, exported = make()
    program = tmp_path / "model.mlir"
    program.write_text(annotate_arguments(exported.text, grid, shardings, names=exported.arg_names))
    np.savez(tmp_path / "args.npz", **exported.arguments(model, inputs))
    n = int(np.prod(grid))
    out = tmp_path / "out"
    proc = subprocess.run(
        [MPIEXEC, "-n", str(n), sys.executable, "-m", "shardc.tools.run", str(program),
         "--pipeline", "shard-to-mpi-pipeline", "--inputs", str(tmp_path / "args.npz"),
         "--output", str(out), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(out / "result0.npy")
    with torch.no_grad():
        want = model(*inputs).numpy()
    assert float(np.abs(got - want).max()) < 1e-4


_TRAIN = """
import sys
import numpy as np
import torch
import torch.nn.functional as F
from shardc.frontends.torch_train import train_module
from shardc.testing import torch_models as tm
from shardc.training.axis import ShardingPlan, ShardingPolicy
from shardc.training.checkpoint import CheckpointOptions

out, tp, fsdp, resume = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
torch.manual_seed(0)
model = tm.MLP().double()
batches = [(torch.randn(8, 16, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)) for _ in range(4)]
axes = {r"fc1\\.weight": ("n_hidden", None), r"fc1\\.bias": ("n_hidden",), r"fc2\\.weight": (None, "n_hidden")}
result = train_module(
    model, batches, F.mse_loss, axes=axes, plan=ShardingPlan(tp_rules={"n_hidden": "shard"}),
    policy=ShardingPolicy(tp, True, fsdp), world=None, steps=4, lr=1e-2, no_decay=[r".*\\.bias"],
    checkpoint=CheckpointOptions(out + "/ck", every=2, keep=3), resume=resume or None,
)
from mpi4py import MPI
if MPI.COMM_WORLD.Get_rank() == 0:
    np.savez(out + "/result.npz", losses=np.array(result.losses), **result.params)
"""


@pytest.mark.mpi
def test_train_module_under_mpiexec_with_resume(tmp_path: Path) -> None:
    """train_module on the MPI world (4 ranks, tp=2, FSDP), then resumed from its step-2
    checkpoint on 2 ranks (ZeRO data parallel): both equal torch.optim.AdamW with the
    same two parameter groups, float64, 1e-9."""
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    import copy

    import torch.nn.functional as F

    script = tmp_path / "train.py"
    script.write_text(_TRAIN)

    def run(n: int, out: Path, tp: int, fsdp: bool, resume: str) -> dict:
        out.mkdir(exist_ok=True)
        proc = subprocess.run(
            [MPIEXEC, "-n", str(n), sys.executable, str(script), str(out), str(tp), "1" if fsdp else "0", resume],
            capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return dict(np.load(out / "result.npz"))

    full = run(4, tmp_path / "a", 2, True, "")
    resumed = run(2, tmp_path / "b", 1, False, str(tmp_path / "a" / "ck" / "step-00000002"))

    torch.manual_seed(0)
    model = tm.MLP().double()
    batches = [(torch.randn(8, 16, dtype=torch.float64), torch.randn(8, 8, dtype=torch.float64)) for _ in range(4)]
    m = copy.deepcopy(model)
    named = list(m.named_parameters())
    opt = torch.optim.AdamW([
        {"params": [p for n, p in named if not n.endswith(".bias")]},
        {"params": [p for n, p in named if n.endswith(".bias")], "weight_decay": 0.0},
    ], lr=1e-2)
    want = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        want.append(loss.item())
    for got in (full, resumed):
        np.testing.assert_allclose(got["losses"], want, rtol=0, atol=1e-9)
        for n, p in m.named_parameters():
            np.testing.assert_allclose(got[n], p.detach().numpy(), rtol=0, atol=1e-9, err_msg=n)
