"""`run_lowerings`, convert-shard-to-mpi's worklist over just the ops of its lowering
table, leaves exactly the IR xDSL's PatternRewriteWalker with the dispatching pattern
leaves (the walker it replaced), and reports a failing lowering the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import module_to_string
from shardc.lowering.shard_to_mpi import _Dispatch, _run, run_lowerings  # pyright: ignore[reportPrivateUsage]
from shardc.lowering.shard_to_mpi_collectives import COLLECTIVE_PATTERNS
from shardc.lowering.shard_to_mpi_indices import INDEX_PATTERNS
from shardc.passes.partition import ShardPartitionPass
from shardc.passes.sharding_propagation import ShardingPropagationPass

ROOT = Path(__file__).resolve().parents[3]
TABLE = {**COLLECTIVE_PATTERNS, **INDEX_PATTERNS}


def _chunks() -> list[tuple[str, str]]:
    out = []
    for name in ("shard-to-mpi-collectives", "shard-to-mpi-indices", "shard-to-mpi-p2p-collectives", "shard-to-mpi-vector"):
        text = (ROOT / "tests" / "filecheck" / "lowering" / f"{name}.mlir").read_text()
        out += [(f"{name}#{i}", chunk) for i, chunk in enumerate(text.split("// -----"))]
    # The chunks that hold an op of the table (some are only shardings or grid shapes).
    return [(n, c) for n, c in out if any(type(op) in TABLE for op in _parse(c).walk())]


def _partitioned_chain() -> str:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from pipeline_compile import program  # pyright: ignore[reportMissingImports]
    finally:
        sys.path.pop(0)
    ctx = make_context()
    module = LocatingParser(ctx, program(120), "chain.mlir").parse_module()
    ShardingPropagationPass().apply(ctx, module)
    ShardPartitionPass().apply(ctx, module)
    return module_to_string(module)


def _parse(text: str) -> ModuleOp:
    return LocatingParser(make_context(), text, "in.mlir").parse_module()


CASES = [*_chunks(), ("partitioned-chain", _partitioned_chain())]


def test_cases_cover_the_table() -> None:
    kinds = {type(op).__name__ for _, text in CASES for op in _parse(text).walk() if type(op) in TABLE}
    assert len(CASES) >= 6 and {"AllReduceOp", "AllGatherOp", "AllToAllOp", "NeighborsLinearIndicesOp"} <= kinds, kinds


@pytest.mark.parametrize("name,text", CASES, ids=[n for n, _ in CASES])
def test_same_ir_as_xdsl_walker(name: str, text: str) -> None:
    walked, listed = _parse(text), _parse(text)
    _run(walked, [_Dispatch(TABLE)])
    run_lowerings(listed, TABLE)
    assert module_to_string(listed, generic=True) == module_to_string(walked, generic=True), name
    assert not any(type(op) in TABLE for op in listed.walk())


def test_lowering_created_by_a_lowering_is_lowered() -> None:
    """An op of the table that a lowering inserts is visited too (the walker pushes
    inserted ops), before the ops after it in the module."""
    seen: list[str] = []
    text = """
    shard.grid @g(shape = 4)
    func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %0 = shard.all_reduce %a on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      %1 = shard.all_reduce %0 on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      return %0, %1 : tensor<4xf32>, tensor<4xf32>
    }
    """
    from shardc.dialects import shard

    def first(op, rewriter):  # type: ignore[no-untyped-def]
        seen.append(f"all_reduce {op.results[0].name_hint or ''}".strip())
        index = shard.ProcessLinearIndexOp("g")
        rewriter.insert_op(index)
        TABLE[shard.AllReduceOp](op, rewriter)

    def index(op, rewriter):  # type: ignore[no-untyped-def]
        seen.append("process_linear_index")
        TABLE[shard.ProcessLinearIndexOp](op, rewriter)

    table = {shard.AllReduceOp: first, shard.ProcessLinearIndexOp: index}
    module = _parse(text)
    run_lowerings(module, table)
    assert seen == ["all_reduce", "process_linear_index", "all_reduce", "process_linear_index"]
    walked = _parse(text)
    seen.clear()
    _run(walked, [_Dispatch(table)])
    assert seen == ["all_reduce", "process_linear_index", "all_reduce", "process_linear_index"]
    assert module_to_string(module, generic=True) == module_to_string(walked, generic=True)


def test_failing_lowering_reports_like_the_walker() -> None:
    text = """
    shard.grid @g(shape = 4)
    func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
      %0 = shard.all_reduce %a on @g grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
      return %0 : tensor<4xf32>
    }
    """
    from shardc.dialects import shard

    def broken(op, rewriter):  # type: ignore[no-untyped-def]
        raise ValueError("no lowering today")

    table = {shard.AllReduceOp: broken}
    raised = []
    for run in (lambda m: run_lowerings(m, table), lambda m: _run(m, [_Dispatch(table)])):
        with pytest.raises(Exception) as info:  # noqa: PT011 - compared below
            run(_parse(text))
        notes = "\n".join(getattr(info.value, "__notes__", []))
        raised.append((type(info.value), str(info.value), notes))
    assert raised[0] == raised[1]
    assert raised[0][:2] == (ValueError, "no lowering today")
    assert "Error while applying pattern: no lowering today" in raised[0][2]
