"""transformers models as their classes build them (Llama, GPT-2, OPT with its cumsum
positions, ViT with its patch convolution), under `mpiexec -n 2`: forward data parallel
and Megatron tensor parallel, and 3 AdamW steps data parallel, equal to PyTorch (see
transformers_zoo_main.py)."""

from pathlib import Path

import pytest
from _mpiexec import run_ranks

pytest.importorskip("torch", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("torch_mlir", reason="needs the [torch] extra: pip install -e '.[torch]'")
pytest.importorskip("transformers", reason="needs transformers (the [torch] extra)")

pytestmark = pytest.mark.slow  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

MAIN = Path(__file__).resolve().parent / "transformers_zoo_main.py"


NAMES = ["llama", "gpt2", "opt", "vit"]
CHECKS = ("forward dp", "forward megatron", "training losses", "training parameters")


@pytest.fixture(scope="module")
def job():
    """One `mpiexec -n 2` job checks every model (each rank imports torch and transformers
    once, not once per model); each test reads its model's lines."""
    return run_ranks(2, [str(MAIN), *NAMES], 1200.0)


@pytest.mark.mpi
@pytest.mark.parametrize("name", NAMES)
def test_forward_and_training_under_mpiexec(job, name):
    for check in CHECKS:
        assert job.stdout.count(f"{name} {check}: OK") == 2, job.stdout[-3000:] + job.stderr[-3000:]
    # a failure of another model is that model's test's; every check passing, the job exits 0
    every_ok = all(job.stdout.count(f"{n} {c}: OK") == 2 for n in NAMES for c in CHECKS)
    assert job.returncode == 0 or not every_ok, job.stdout[-3000:] + job.stderr[-3000:]
