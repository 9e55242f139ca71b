"""The conv and pooling named ops (`tests/filecheck/dialects/linalg/conv.mlir`, one op
per chunk) against mlir-opt: both print each other's output the same, in custom and in
generic form; and mlir-opt's `--linalg-generalize-named-ops` (MLIR's own definition of
the op: loops, maps with strides and dilations, body) is what shardc's op says, and runs
to the same numbers as shardc's named op."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.testing.normalize import normalize_ssa_names

from .conftest import ROOT, Chunk, MlirOpt, Shardc, chunk_params

pytestmark = pytest.mark.oracle

FILE = ROOT / "tests" / "filecheck" / "dialects" / "linalg" / "conv.mlir"
CHUNKS = chunk_params([FILE])


@pytest.mark.slow
@pytest.mark.parametrize("chunk", CHUNKS)
def test_roundtrip(chunk: Chunk, mlir_opt: MlirOpt, shardc: Shardc) -> None:
    theirs = mlir_opt.run(chunk.text)
    ours = shardc.run(chunk.text)
    assert normalize_ssa_names(ours) == normalize_ssa_names(theirs)
    assert normalize_ssa_names(shardc.run(theirs)) == normalize_ssa_names(ours)
    assert normalize_ssa_names(mlir_opt.run(ours)) == normalize_ssa_names(theirs)
    generic = shardc.run(chunk.text, generic=True)
    assert normalize_ssa_names(generic) == normalize_ssa_names(mlir_opt.run(chunk.text, "--mlir-print-op-generic"))
    assert normalize_ssa_names(shardc.run(generic)) == normalize_ssa_names(ours)


def _structured(text: str, name: str):  # noqa: ANN202
    from xdsl.dialects.linalg.abstract_ops import LinalgStructuredOperation

    from shardc.context import make_context
    from shardc.ir.fast_parser import FastParser

    module = FastParser(make_context(), text).parse_module()
    return next(op for op in module.walk() if isinstance(op, LinalgStructuredOperation) and op.name == name)


def _body(op) -> list[tuple[str, tuple[str, ...]]]:  # noqa: ANN001
    block = op.body.block
    names = {a: f"arg{i}" for i, a in enumerate(block.args)}
    out = []
    for inner in block.ops:
        for r in inner.results:
            names[r] = f"v{len(names)}"
        out.append((inner.name, tuple(names[v] for v in inner.operands)))
    return out


@pytest.mark.parametrize("chunk", CHUNKS)
def test_generalized_by_mlir_opt(chunk: Chunk, mlir_opt: MlirOpt) -> None:
    from shardc.runtime import compile_text
    from shardc.runtime.codegen.window import linear_form

    generalized = mlir_opt.run(chunk.text, "--linalg-generalize-named-ops")
    named = next(line.split("linalg.")[1].split()[0] for line in chunk.text.splitlines() if "= linalg." in line)
    ours = _structured(chunk.text, f"linalg.{named}")
    theirs = _structured(generalized, "linalg.generic")

    def forms(op) -> list[list[object]]:  # noqa: ANN001
        return [[linear_form(e) for e in m.data.results] for m in op.get_indexing_maps().data]

    assert forms(ours) == forms(theirs)
    assert [t.data for t in ours.get_iterator_types().data] == [t.data for t in theirs.get_iterator_types().data]
    assert _body(ours) == _body(theirs)

    # The same numbers: the named op (shardc's maps) and mlir-opt's generic
    rng = np.random.default_rng(0)
    args = []
    for t in ours.operand_types:
        shape = tuple(t.get_shape())
        if "i32" in str(t.get_element_type()):
            args.append(rng.integers(-(2**31), 2**31, size=shape, dtype=np.int64).astype(np.int32))
        else:
            args.append(rng.standard_normal(shape).astype(np.float32))
    fn = chunk.text.split("@")[1].split("(")[0]
    got = compile_text(chunk.text).call(fn, *args)
    want = compile_text(generalized).call(fn, *args)
    np.testing.assert_array_equal(got, want)
