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


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["llama", "gpt2", "opt", "vit"])
def test_forward_and_training_under_mpiexec(name):
    p = run_ranks(2, [str(MAIN), name], 600.0)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for check in ("forward dp", "forward megatron", "training losses", "training parameters"):
        assert p.stdout.count(f"{check}: OK") == 2, p.stdout[-3000:]
