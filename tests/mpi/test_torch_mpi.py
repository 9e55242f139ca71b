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
