"""sharding-propagation stays linear when many ops have no sharding interface (issue 32,
item 9: 5,000 tensor `arith` ops took 144 s and printed 20,000 warning lines), and says
so in one warning: the first op, the count, and the next few by location."""

from __future__ import annotations

import contextlib
import io
import time

import pytest

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.passes.sharding_propagation import ShardingPropagationPass


def _chain(n: int) -> str:
    """`n` tensor `arith.addf` ops (no sharding interface), each reading the previous one
    and the same argument (a value with `n` users), after an annotated argument."""
    lines = [
        "shard.grid @grid(shape = 2)",
        "func.func @f(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {",
        "  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding",
        "  %x0 = shard.shard %a to %s : tensor<8x8xf32>",
        *(f"  %x{i + 1} = arith.addf %x{i}, %a : tensor<8x8xf32>" for i in range(n)),
        f"  return %x{n} : tensor<8x8xf32>",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _propagate(n: int) -> tuple[float, str, object]:
    ctx = make_context()
    module = LocatingParser(ctx, _chain(n), "chain.mlir").parse_module()
    err = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(err):
        ShardingPropagationPass().apply(ctx, module)
    return time.perf_counter() - t0, err.getvalue(), module


@pytest.mark.slow
def test_one_summary_warning_for_all_ops_without_an_interface():
    _, err, module = _propagate(2000)
    warnings = [line for line in err.splitlines() if ": warning: " in line]
    assert len(warnings) == 1, err[:2000]
    (line,) = warnings
    assert line.startswith("chain.mlir:5:9: warning: 'arith.addf' has no sharding interface: it runs fully replicated")
    assert "; so do 1999 more ops without one ('arith.addf' at 6:9, 'arith.addf' at 7:9, " in line
    assert line.endswith(", and 1994 more)")
    # every one of them was still annotated: each addf's result has its producer annotation
    from xdsl.dialects import arith

    from shardc.dialects.shard import ShardOp

    adds = [op for op in module.walk() if isinstance(op, arith.AddfOp)]
    assert len(adds) == 2000 and all(any(isinstance(u.operation, ShardOp) for u in op.result.uses) for op in adds)


def test_one_op_without_an_interface_keeps_its_message():
    _, err, _ = _propagate(1)
    warnings = [line for line in err.splitlines() if ": warning: " in line]
    assert warnings == [
        "chain.mlir:5:9: warning: 'arith.addf' has no sharding interface: it runs fully replicated, its operands and results resharded at its boundary"
    ]


@pytest.mark.slow
def test_time_grows_linearly_with_ops_without_an_interface():
    small = min(_propagate(500)[0] for _ in range(2))
    large = min(_propagate(2000)[0] for _ in range(2))
    assert large < 10, f"2,000 ops took {large:.1f} s"
    # quadratic would be 16x; linear 4x (measured 3.4x)
    assert large / small < 8, f"500 ops: {small:.2f} s, 2,000 ops: {large:.2f} s ({large / small:.1f}x)"
