"""The resharding planner against mlir-opt 22.1.8.

mlir-opt's wheel has no `test-grid-resharding-partition` (test passes are not built),
but `shard-partition` reshards with the same functions: a function whose argument is
annotated with one sharding and then, for users, with another, partitions to exactly the
reshard ops between the two. For generated pairs that 22.1.8 handles (1-D grids for
split axes changes, which is all its `reshard` supports; halo changes on any grid) we
check:

* our emitter, building the same partitioned function from our plan, prints exactly
  what mlir-opt prints (after renaming SSA values);
* our `test-grid-resharding-partition` emits the same ops, except what its folding
  removes (identity tensor.cast / tensor.extract_slice), as mlir-opt's greedy driver does.
"""

from __future__ import annotations

import itertools
import re

import pytest
from xdsl.builder import Builder
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.rewriter import InsertPoint

from shardc.context import make_context
from shardc.dialects.shard import Sharding, ShardOp, lookup_grid
from shardc.ir.printer import module_to_string
from shardc.passes.resharding import emit_resharding, plan_resharding
from shardc.passes.test_resharding import TestReshardingPass
from shardc.testing.normalize import normalize_ssa_names
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found"),
]

SEPARATOR = "// -----"
PARTITION = "--pass-pipeline=builtin.module(func.func(shard-partition))"


def _axes_text(axes) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, sub)) + "]" for sub in axes) + "]"


def _sharding_text(axes, halos) -> str:
    text = f"split_axes = {_axes_text(axes)}"
    return text + (f" halo_sizes = [{', '.join(map(str, halos))}]" if halos else "")


def _case(grid: str, shape: str, src, tgt) -> str:
    t = f"tensor<{shape}xf32>"
    return f"""shard.grid @grid(shape = {grid})
func.func @f(%arg0: {t}) -> {t} {{
  %s0 = shard.sharding @grid {_sharding_text(*src)} : !shard.sharding
  %0 = shard.shard %arg0 to %s0 : {t}
  %s1 = shard.sharding @grid {_sharding_text(*tgt)} : !shard.sharding
  %1 = shard.shard %0 to %s1 annotate_for_users : {t}
  %2 = shard.shard %1 to %s1 : {t}
  return %2 : {t}
}}
"""


def generate_cases() -> list[str]:
    cases: list[str] = []
    # split axes changes on 1-D grids: replicated or split along one dim, every pair
    for grid, shape in [("2", "6"), ("4", "8x12"), ("2", "4x?x6"), ("4", "8x4x16")]:
        rank = shape.count("x") + 1
        options = [(((),), ())] + [(tuple(((0,) if d == k else ()) for d in range(k + 1)), ()) for k in range(rank)]
        for src, tgt in itertools.product(options, options):
            cases.append(_case(grid, shape, src, tgt))
    # halo changes: same split axes, leading split dims, target halos not all zero
    halos = [(), (1, 0), (0, 2), (2, 1)]
    for a, b in itertools.product(halos, halos[1:]):
        if a != b:
            cases.append(_case("4", "8x12", (((0,),), a), (((0,),), b)))
    for a, b in [((1, 2, 0, 1), (2, 1, 1, 1)), ((), (1, 1, 1, 1)), ((0, 1, 1, 0), (1, 0, 0, 1))]:
        cases.append(_case("2x2", "8x12", (((0,), (1,)), a), (((0,), (1,)), b)))
    return cases


def _ours_partitioned(ctx: Context, text: str) -> str:
    """The partitioned function shard-partition would make, built from our plan."""
    module = Parser(ctx, text).parse_module()
    old = next(op for op in module.body.ops if isinstance(op, func.FuncOp))
    src_op, tgt_op = [op for op in old.walk() if isinstance(op, ShardOp)][:2]
    grid = lookup_grid(src_op, Sharding.of(src_op.sharding).grid)
    assert grid is not None
    gtype = src_op.result.type
    assert isinstance(gtype, TensorType)
    src, tgt = Sharding.of(src_op.sharding), Sharding.of(tgt_op.sharding)
    shape, gshape = gtype.get_shape(), grid.shape_tuple
    plan = plan_resharding(src, tgt, shape, gshape)
    in_type = TensorType(gtype.get_element_type(), src.shard_shape(shape, gshape))
    block = Block(arg_types=[in_type])
    result = emit_resharding(Builder(InsertPoint.at_end(block)), plan, block.args[0])
    block.add_op(func.ReturnOp(result))
    new = func.FuncOp("f", ((in_type,), (result.type,)), Region(block))
    module.body.block.insert_op_before(new, old)
    module.body.block.erase_op(old, safe_erase=False)
    module.verify()
    return module_to_string(module)


def _ours_test_pass(ctx: Context, text: str) -> str:
    module = Parser(ctx, text).parse_module()
    TestReshardingPass().apply(ctx, module)
    module.verify()
    return module_to_string(module)


_IDENTITY_CAST = re.compile(r"tensor\.cast %\S+ : (\S+) to \1$")
_IDENTITY_SLICE = re.compile(r"tensor\.extract_slice %\S+\[0(, 0)*\] .* : (\S+) to \2$")
_KEPT = ("shard.all_", "shard.update_halo", "tensor.")


def _collective_lines(text: str, drop_identities: bool) -> list[str]:
    lines = []
    for line in text.splitlines():
        body = line.strip().split(" = ", 1)[-1]
        if not body.startswith(_KEPT):
            continue
        if drop_identities and (_IDENTITY_CAST.search(body) or _IDENTITY_SLICE.search(body)):
            continue
        lines.append(re.sub(r"%[\w.$-]+", "%_", body))
    return lines


def _mlir_opt_outputs(cases: list[str]) -> list[str]:
    result = run_mlir_opt("--split-input-file", PARTITION, "-", stdin=f"\n{SEPARATOR}\n".join(cases))
    assert result.returncode == 0, result.stderr
    chunks = result.stdout.split(SEPARATOR + "\n")
    assert len(chunks) == len(cases)
    return chunks


CASES = generate_cases()


@pytest.fixture(scope="module")
def expected() -> list[str]:
    return _mlir_opt_outputs(CASES)


@pytest.fixture(scope="module")
def ctx() -> Context:
    return make_context()


def test_enough_cases():
    assert len(CASES) > 50


@pytest.mark.parametrize("index", range(len(CASES)))
def test_emitter_matches_shard_partition(index: int, expected: list[str], ctx: Context):
    ours = _ours_partitioned(ctx, CASES[index])
    assert normalize_ssa_names(ours) == normalize_ssa_names(expected[index]), CASES[index]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_test_pass_emits_the_same_ops(index: int, expected: list[str], ctx: Context):
    ours = _collective_lines(_ours_test_pass(ctx, CASES[index]), drop_identities=False)
    assert ours == _collective_lines(expected[index], drop_identities=True), CASES[index]
