"""tm_tensor against the two MLIRs that can read it. mlir-opt has no TMTensor dialect:
it reads and writes the generic form (`--allow-unregistered-dialect`), which shardc
must print exactly as it does. torch-mlir registers the dialect: its own printer is
the reference for the custom form, text for text, and shardc prints what it reads
from it unchanged (the chunks of tests/filecheck/dialects/tm_tensor/ops.mlir and live
exports of `torch.cumsum`)."""

from __future__ import annotations

import pytest

from .conftest import ROOT, Chunk, MlirOpt, Shardc, split_chunks

pytestmark = pytest.mark.oracle

CHUNKS = split_chunks(ROOT / "tests" / "filecheck" / "dialects" / "tm_tensor" / "ops.mlir")


def _torch_mlir_context():
    pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    fx = pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed: pip install -e '.[torch]'")
    from torch_mlir import ir

    return ir, fx


def _cumsum_export(fx, dim: int, dtype: str) -> str:
    import torch

    class Cumsum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim)

    return str(fx.export_and_import(Cumsum(), torch.ones(3, 5, dtype=getattr(torch, dtype)), output_type="linalg-on-tensors"))


_CONTEXT: list = []


def _context_with_tm_tensor(fx):
    """A torch-mlir context that knows tm_tensor: the one an export was made in."""
    if not _CONTEXT:
        import torch

        class Cumsum(torch.nn.Module):
            def forward(self, x):
                return torch.cumsum(x, 0)

        _CONTEXT.append(fx.export_and_import(Cumsum(), torch.ones(2), output_type="linalg-on-tensors").context)
    return _CONTEXT[0]


@pytest.mark.parametrize("chunk", CHUNKS, ids=lambda c: c.id)
def test_generic_form_as_mlir_opt(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    generic = shardc.run(chunk.text, generic=True, name=str(chunk.path))
    # mlir-opt reads shardc's generic form and writes it back unchanged ...
    assert mlir_opt.run(generic, "--mlir-print-op-generic") == generic
    # ... and shardc reads mlir-opt's and prints the module it was given
    assert shardc.run(mlir_opt.run(generic)) == shardc.run(chunk.text)


@pytest.mark.parametrize("chunk", CHUNKS, ids=lambda c: c.id)
def test_custom_form_as_torch_mlir(chunk: Chunk, shardc: Shardc) -> None:
    ir, fx = _torch_mlir_context()
    theirs = str(ir.Module.parse(chunk.text, context=_context_with_tm_tensor(fx)))
    ours = shardc.run(chunk.text, name=str(chunk.path))
    # the Python binding's str() ends with one newline, the tools' output with two
    assert ours.rstrip("\n") == theirs.rstrip("\n")
    assert shardc.run(theirs) == ours


@pytest.mark.slow
@pytest.mark.parametrize("dim, dtype", [(0, "float32"), (1, "float32"), (1, "int64")])
def test_cumsum_export_prints_back_unchanged(dim: int, dtype: str, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    _, fx = _torch_mlir_context()
    text = _cumsum_export(fx, dim, dtype)
    assert "tm_tensor.scan" in text
    assert shardc.run(text).rstrip("\n") == text.rstrip("\n")
    generic = shardc.run(text, generic=True)
    assert mlir_opt.run(generic, "--mlir-print-op-generic") == generic


def test_chunks_found() -> None:
    assert len(CHUNKS) == 3
