"""torch-mlir's linalg-on-tensors IR against mlir-opt, text for text (not up to SSA
names): the committed fixtures, the lit files of the syntax they use, and live exports
of small models. mlir-opt parses what shardc prints and prints it back unchanged, and
shardc prints what mlir-opt prints, blobs of `dense_resource` constants included."""

from pathlib import Path

import pytest

from .conftest import ROOT, Chunk, MlirOpt, Shardc, chunk_params

pytestmark = pytest.mark.oracle

FIXTURES = sorted((ROOT / "tests" / "data" / "torch_mlir").glob("*.mlir"))
DIALECTS = ROOT / "tests" / "filecheck" / "dialects"
LIT_FILES = [
    DIALECTS / "linalg" / "multi_result.mlir",
    DIALECTS / "tensor" / "reshape.mlir",
    DIALECTS / "arith" / "ops.mlir",
    DIALECTS / "math" / "ops.mlir",
    DIALECTS / "cf" / "ops.mlir",
    DIALECTS / "builtin" / "ops.mlir",
]


def _agree(text: str, mlir_opt: MlirOpt, shardc: Shardc, name: str) -> str:
    theirs = mlir_opt.run(text)
    ours = shardc.run(text, name=name)
    assert ours == theirs
    assert mlir_opt.run(ours) == ours
    assert shardc.run(theirs) == theirs
    # the generic form too (named ops' bodies included), both ways
    generic = shardc.run(text, generic=True)
    assert generic == mlir_opt.run(text, "--mlir-print-op-generic")
    assert mlir_opt.run(generic) == theirs
    return ours


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture(path: Path, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    ours = _agree(path.read_text(), mlir_opt, shardc, str(path))
    assert ours.rstrip("\n") == path.read_text().rstrip("\n")


@pytest.mark.parametrize("chunk", chunk_params(LIT_FILES))
def test_lit_chunk(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    _agree(chunk.text, mlir_opt, shardc, str(chunk.path))


def test_files_found() -> None:
    assert len(FIXTURES) >= 4 and all(p.is_file() for p in LIT_FILES)


def _models():
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    pytest.importorskip("torch_mlir", reason="torch-mlir is not installed: pip install -e '.[torch]'")
    nn, F = torch.nn, torch.nn.functional

    def module(fn):
        class _M(nn.Module):
            def forward(self, *args):
                return fn(*args)

        return _M()

    class Baked(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.Embedding(6, 4)
            self.lin = nn.Linear(4, 3)
            self.register_buffer("keep", torch.tensor([True, False, True]))

        def forward(self, i):
            return torch.where(self.keep, self.lin(self.e(i)), 0.0)

    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.randn(4, 6)
    ids = torch.tensor([2, 0, 5, 1])
    causal = torch.tril(torch.ones(6, 6, dtype=torch.bool))[:4]
    return {
        "where_masked_softmax": (module(lambda x, y: torch.where(x > 0, x, y).masked_fill(~causal, float("-inf")).softmax(-1)), (x, y), True),
        "cross_entropy": (module(lambda x, y: F.cross_entropy(x, y.softmax(-1))), (x, y), True),
        "nll_log_softmax": (module(lambda x, t: F.cross_entropy(x, t)), (x, ids), True),
        "embedding_cat": (nn.Embedding(10, 6), (ids.reshape(2, 2),), True),
        "cat_mean_var": (module(lambda x, y: torch.cat([x, y], 1).mean(-1) + x.var(-1) + y.std(0).sum()), (x, y), True),
        "layernorm_gelu": (nn.Sequential(nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 3)), (x,), True),
        "integer_ops": (module(lambda i: (i // 2) * (i % 3) + torch.clamp(i, 0, 3) + torch.maximum(i, i.flip(0))), (ids,), True),
        "casts": (module(lambda x, i: x.half().float() + x.to(torch.bfloat16).float() + i.to(torch.int32).float().sum()), (x, ids), True),
        "half_matmul": (module(lambda x: x.half() @ x.half().t()), (x,), True),
        "sdpa": (module(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True)), (torch.randn(1, 2, 4, 8),), True),
        "baked_weights": (Baked(), (torch.tensor([[1, 5], [0, 2]]),), False),
    }


MODEL_NAMES = [
    "where_masked_softmax", "cross_entropy", "nll_log_softmax", "embedding_cat", "cat_mean_var",
    "layernorm_gelu", "integer_ops", "casts", "half_matmul", "sdpa", "baked_weights",
]


@pytest.mark.slow
@pytest.mark.parametrize("name", MODEL_NAMES)
def test_live_export(name: str, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    from shardc.frontends.torch import export_module

    model, inputs, params_as_args = _models()[name]
    text = export_module(model, inputs, func_name=name, params_as_args=params_as_args).text
    ours = _agree(text, mlir_opt, shardc, name)
    if not params_as_args:
        assert "dense_resource<" in ours and "{-#\n  dialect_resources: {" in ours
