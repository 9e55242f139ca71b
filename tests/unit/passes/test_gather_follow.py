"""Gathers whose table follows a loop: a tensor a linalg body reads with `tensor.extract`
keeps a split of a dimension every extract indexes with `linalg.index d` (of the same
extent), read at the local index; other dimensions (token ids) are gathered, read at the
global index. Each program runs unsharded and on simulated ranks (partitioned and
MPI-lowered) on the same inputs and must agree; the partitioned IR shows which way the
table went.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import numpy as np
import pytest

from shardc.frontends.annotate import annotate_arguments
from shardc.interfaces.linalg import captured_loop_dims
from shardc.ir import diagnostics
from shardc.ir.diagnostics import DiagnosticEngine
from shardc.ir.printer import module_to_string
from shardc.launch import run_program
from shardc.tools.cli import apply_passes, parse_module, pipeline_passes
from shardc.tools.verification import verify

DATA = Path(__file__).resolve().parents[2] / "data" / "torch_mlir"


def lookup(grid: str, ids_split: str, table_split: str, rows: int, emb: int, extent: int | None = None) -> str:
    """out[b, s, e] = table[ids[b, s], e] + e: the column index is also used globally."""
    extent = extent or emb
    out = f"tensor<4x8x{extent}xf32>"
    table = f"tensor<{rows}x{emb}xf32>"
    return f"""shard.grid @g(shape = {grid})
func.func @f(%ids: tensor<4x8xi64>, %table: {table}) -> {out} {{
  %si = shard.sharding @g split_axes = {ids_split} : !shard.sharding
  %st = shard.sharding @g split_axes = {table_split} : !shard.sharding
  %i = shard.shard %ids to %si : tensor<4x8xi64>
  %t = shard.shard %table to %st : {table}
  %c{rows} = arith.constant {rows} : index
  %e = tensor.empty() : {out}
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}} ins(%i : tensor<4x8xi64>) outs(%e : {out}) {{
  ^bb0(%in: i64, %o: f32):
    %row = arith.index_cast %in : i64 to index
    %ok = arith.cmpi ult, %row, %c{rows} : index
    cf.assert %ok, "row in range"
    %col = linalg.index 2 : index
    %c64 = arith.index_cast %col : index to i64
    %cc = arith.index_cast %c64 : i64 to index
    %x = tensor.extract %t[%row, %cc] : {table}
    %cf = arith.sitofp %c64 : i64 to f32
    %y = arith.addf %x, %cf : f32
    linalg.yield %y : f32
  }} -> {out}
  return %r : {out}
}}
"""


def partitioned_module(text: str):
    with diagnostics.engine_scope(DiagnosticEngine(stream=StringIO())):
        module = parse_module(text, "gather.mlir")
        apply_passes(module, pipeline_passes("sharding-propagation,shard-partition"))
    return module


def partitioned(text: str) -> str:
    return module_to_string(partitioned_module(text))


def _source(value) -> str:
    """What an index is computed from, through index casts: `local` for linalg.index
    itself, `global` for linalg.index plus the process's offset."""
    while value.owner.name == "arith.index_cast":
        value = value.owner.operands[0]
    if value.owner.name == "linalg.index":
        return "local"
    if value.owner.name == "arith.addi" and value.owner.operands[0].owner.name == "linalg.index":
        return "global"
    return value.owner.name


def check_equal(text: str, rows: int, emb: int) -> None:
    rng = np.random.default_rng(rows * emb)
    ids = rng.integers(0, rows, (4, 8)).astype(np.int64)
    table = rng.standard_normal((rows, emb)).astype(np.float32)
    report = verify(text, inputs=[ids, table], stage="all", name="gather.mlir")
    assert report.ok, report.summary()


# Split on the loop-indexed column: the table stays split, nothing is gathered.
FOLLOWED = {
    "2-ranks": ("2", "[[]]", "[[], [0]]", 5, 8, "tensor<5x4xf32>"),
    "4-ranks": ("4", "[[]]", "[[], [0]]", 5, 8, "tensor<5x2xf32>"),
    "2x2-batch-and-column": ("2x2", "[[0]]", "[[], [1]]", 5, 8, "tensor<5x4xf32>"),
    "2x2-column-over-both-axes": ("2x2", "[[]]", "[[], [1, 0]]", 7, 8, "tensor<7x2xf32>"),
}


@pytest.mark.parametrize("case", list(FOLLOWED), ids=list(FOLLOWED))
def test_table_split_on_the_loop_indexed_dim_stays_split(case: str) -> None:
    grid, ids_split, table_split, rows, emb, local = FOLLOWED[case]
    text = lookup(grid, ids_split, table_split, rows, emb)
    module = partitioned_module(text)
    out = module_to_string(module)
    assert "shard.all_gather" not in out and "shard.all_to_all" not in out, out
    # The extract reads the local table at the local column (the casts cloned from the
    # un-offset linalg.index); sitofp reads the global column.
    extract = next(line for line in out.splitlines() if "tensor.extract" in line)
    assert extract.rstrip().endswith(local), out
    ops = {op.name: op for op in module.walk()}
    assert _source(ops["tensor.extract"].operands[2]) == "local", out
    assert _source(ops["arith.sitofp"].operands[0]) == "global", out
    check_equal(text, rows, emb)


# The table is gathered (read whole, at global indices) and the result still agrees.
GATHERED = {
    # Rows are indexed by token ids, not by a loop.
    "rows-split-2": ("2", "[[0]]", "[[0]]", 6, 8, None),
    "rows-split-2x2": ("2x2", "[[0]]", "[[1]]", 6, 8, None),
    # The table has more columns than the loop reading them: not followed.
    "wider-than-the-loop": ("2", "[[0]]", "[[], [0]]", 5, 8, 4),
    # The column's grid axis already splits the batch loop.
    "axis-taken-by-the-batch": ("2x2", "[[0]]", "[[], [0]]", 5, 8, None),
}


@pytest.mark.parametrize("case", list(GATHERED), ids=list(GATHERED))
def test_table_read_whole_otherwise(case: str) -> None:
    grid, ids_split, table_split, rows, emb, extent = GATHERED[case]
    text = lookup(grid, ids_split, table_split, rows, emb, extent)
    out = partitioned(text)
    assert "shard.all_gather %arg1" in out, out
    extract = next(line for line in out.splitlines() if "tensor.extract" in line)
    assert extract.rstrip().endswith(f"tensor<{rows}x{emb}xf32>"), out
    check_equal(text, rows, emb)


def test_replicated_table_is_sliced_for_a_split_loop() -> None:
    """A replicated table read by a lookup whose column loop is split (the result is
    annotated so): each rank slices its columns locally and reads them locally."""
    text = lookup("4", "[[]]", "[[]]", 5, 8).replace(
        "  return %r :", "  %s2 = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding\n"
        "  %ra = shard.shard %r to %s2 : tensor<4x8x8xf32>\n  return %ra :"
    )
    out = partitioned(text)
    assert "shard.all_slice %arg1 on @g grid_axes = [0] slice_axis = 1 : tensor<5x8xf32> -> tensor<5x2xf32>" in out, out
    assert "shard.all_gather" not in out, out
    check_equal(text, 5, 8)


# ---- the analysis --------------------------------------------------------------------


def _dims(body: str, table: str = "tensor<5x8xf32>", extra_args: str = "") -> list[tuple[int | None, ...]]:
    text = f"""func.func @f(%t: {table}{extra_args}) -> tensor<4x8xf32> {{
  %e = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}} outs(%e : tensor<4x8xf32>) {{
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
{body}
  }} -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}}
"""
    module = parse_module(text, "dims.mlir")
    generic = next(op for op in module.walk() if op.name == "linalg.generic")
    return list(captured_loop_dims(generic).values())


def test_analysis_follows_linalg_index_of_the_same_extent() -> None:
    # Row 0 is indexed by loop 0 (extent 4) but the table has 5 rows: not followed.
    assert _dims("    %x = tensor.extract %t[%i, %j] : tensor<5x8xf32>\n    linalg.yield %x : f32") == [(None, 1)]
    assert _dims("    %x = tensor.extract %t[%i, %j] : tensor<4x8xf32>\n    linalg.yield %x : f32", "tensor<4x8xf32>") == [(0, 1)]


def test_analysis_through_wide_casts_only() -> None:
    wide = "    %a = arith.index_cast %j : index to i64\n    %b = arith.index_cast %a : i64 to index\n"
    assert _dims(wide + "    %x = tensor.extract %t[%i, %b] : tensor<5x8xf32>\n    linalg.yield %x : f32") == [(None, 1)]
    # An i3 holds 0..3 only: a column index up to 7 may wrap.
    narrow = "    %a = arith.index_cast %j : index to i3\n    %b = arith.index_cast %a : i3 to index\n"
    assert _dims(narrow + "    %x = tensor.extract %t[%i, %b] : tensor<5x8xf32>\n    linalg.yield %x : f32") == []


def test_analysis_needs_every_extract_to_agree() -> None:
    body = (
        "    %x = tensor.extract %t[%i, %j] : tensor<8x8xf32>\n"
        "    %y = tensor.extract %t[%j, %j] : tensor<8x8xf32>\n"
        "    %z = arith.addf %x, %y : f32\n    linalg.yield %z : f32"
    )
    # Dimension 1 is read at %j by both; dimension 0 at %i and at %j.
    assert _dims(body, "tensor<8x8xf32>") == [(None, 1)]
    # One loop followed by one dimension at most.
    same = "    %x = tensor.extract %t[%j, %j] : tensor<8x8xf32>\n    linalg.yield %x : f32"
    assert _dims(same, "tensor<8x8xf32>") == [(1, None)]


def test_analysis_skips_tensors_used_otherwise() -> None:
    body = (
        "    %c1 = arith.constant 1 : index\n"
        "    %n = tensor.dim %t, %c1 : tensor<5x8xf32>\n"
        "    %x = tensor.extract %t[%c1, %j] : tensor<5x8xf32>\n    linalg.yield %x : f32"
    )
    assert _dims(body) == []


# ---- real IR: torch-mlir's GPT, its tied embedding split on n_embd -------------------


def _gpt(grid: tuple[int, ...], shardings: dict) -> tuple[str, list[np.ndarray], np.ndarray]:
    data = np.load(DATA / "gpt.npz")
    names = [k for k in data.files if k != "result"]
    text = annotate_arguments((DATA / "gpt.mlir").read_text(), grid, shardings, names=names)
    return text, [data[k] for k in names], data["result"]


GPT_PLANS = {
    "wte-column-4": ((4,), {"wte.weight": [[], [0]]}),
    "tokens-batch-wte-column-2x2": ((2, 2), {"idx": [[0]], "wte.weight": [[], [1]]}),
}


@pytest.mark.slow
@pytest.mark.parametrize("plan", list(GPT_PLANS), ids=list(GPT_PLANS))
def test_torch_gpt_with_wte_split_on_n_embd(plan: str) -> None:
    """torch-mlir's 1-layer nanoGPT (committed IR and PyTorch's result): wte, read by
    the embedding gather at `linalg.index 2` and by the tied head, split on n_embd
    over 4 simulated ranks. The lookup reads its local columns (no all_gather of wte
    before it) and the result is PyTorch's."""
    grid, shardings = GPT_PLANS[plan]
    text, inputs, want = _gpt(grid, shardings)
    report = verify(text, inputs=inputs, stage="all", rtol=1e-3, atol=1e-4, name="gpt.mlir")
    assert report.ok, report.summary()
    (got,) = run_program(text, {f"arg{i}": a for i, a in enumerate(inputs)}, ranks=4)
    assert float(np.abs(got - want).max()) < 1e-4
    out = partitioned(text)
    wte = "tensor<32x4xf32>" if grid == (4,) else "tensor<32x8xf32>"
    assert f"%arg1: {wte}" in out, out
    lookup_line = next(line for line in out.splitlines() if "tensor.extract %arg1[" in line)
    assert lookup_line.rstrip().endswith(wte), out
    assert "shard.all_gather %arg1 " not in out, out


# ---- the completion's cost rule ------------------------------------------------------

DISAGREEING_USERS = """shard.grid @g(shape = 2)
func.func @f(%ids: tensor<4x8xi64>, %table: tensor<ROWSx8xf32>) -> (tensor<4x8x8xf32>, tensor<4x8x8xf32>) {
  %st = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %t = shard.shard %table to %st : tensor<ROWSx8xf32>
  %e = tensor.empty() : tensor<4x8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%ids : tensor<4x8xi64>) outs(%e : tensor<4x8x8xf32>) {
  ^bb0(%in: i64, %o: f32):
    %row = arith.index_cast %in : i64 to index
    %col = linalg.index 2 : index
    %x = tensor.extract %t[%row, %col] : tensor<ROWSx8xf32>
    linalg.yield %x : f32
  } -> tensor<4x8x8xf32>
  %s0 = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %s2 = shard.sharding @g split_axes = [[], [], [0]] : !shard.sharding
  %u0 = shard.shard %r to %s0 annotate_for_users : tensor<4x8x8xf32>
  %u2 = shard.shard %r to %s2 annotate_for_users : tensor<4x8x8xf32>
  %a = tosa.abs %u0 : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %b = tosa.abs %u2 : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  return %a, %b : tensor<4x8x8xf32>, tensor<4x8x8xf32>
}
"""


@pytest.mark.parametrize(("rows", "kept"), [(64, True), (5, False)])
def test_completion_counts_the_bytes_of_the_table(rows: int, kept: bool) -> None:
    """Users that disagree leave the lookup to the completion. Gathering a 64-row table
    (1 KiB per rank) costs more than moving the lookup's result to the batch-split user
    (256 B): the lookup follows the table's column split. A 5-row table (80 B) is
    cheaper to gather than the result is to move: the lookup runs replicated."""
    text = DISAGREEING_USERS.replace("ROWS", str(rows))
    out = partitioned(text)
    assert ("shard.all_gather %arg1" not in out) == kept, out
    assert (f"tensor.extract %arg1[%5, %6] : tensor<{rows}x4xf32>" in out) == kept, out
    check_equal(text, rows, 8)
