"""Differential test of sharding-propagation against mlir-opt 22.1.8.

Random annotated programs (`shardc.testing.gen_programs`, fixed seeds) go through
`sharding-propagation{traversal=X}` in mlir-opt and in shardc (in-process); the outputs
must be equal after renaming SSA values. Two comparisons per program:

* propagation alone: shardc's output must be exactly mlir-opt's;
* propagation then `cse`: mlir-opt's `cse` is applied to shardc's output too, since
  xDSL's cse does not treat linalg ops on tensors as pure (it neither merges nor erases
  them), which is a cse difference, not a propagation one.

Programs on which mlir-opt crashes (an assertion: users annotating one value with
different shardings) must make shardc fail with a diagnostic.

SHARDC_ORACLE_PROGRAMS sets the number of programs (default 200).
"""

from __future__ import annotations

import os
from io import StringIO

import pytest
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.printer import print_module
from shardc.passes.sharding_propagation import ShardingPropagationPass
from shardc.testing.gen_programs import generate_program, traversal_for
from shardc.testing.normalize import normalize_ssa_names
from shardc.testing.oracle import find_mlir_opt, run_mlir_opt

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.skipif(find_mlir_opt() is None, reason="mlir-opt not found"),
]

NUM_PROGRAMS = int(os.environ.get("SHARDC_ORACLE_PROGRAMS", "200"))
BATCH = 25
SEPARATOR = "// -----"

# Where 22.1.8 and trunk differ we follow trunk; cases (by seed) whose expected output
# therefore differs from 22.1.8 are listed here with the reason. None are known for the
# generated op set: the propagation sources of 22.1.8 and trunk agree on it.
TRUNK_DIFFERS: dict[int, str] = {}


def _pipeline(traversal: str, cse: bool) -> str:
    passes = f"func.func(sharding-propagation{{traversal={traversal}}})"
    return f"--pass-pipeline=builtin.module({passes}{',cse' if cse else ''})"


def _mlir_opt_chunks(texts: list[str], *args: str) -> list[str | None]:
    """mlir-opt on each program (one call per batch; per program if the batch fails)."""
    joined = f"\n{SEPARATOR}\n".join(texts)
    result = run_mlir_opt("--split-input-file", *args, stdin=joined)
    if result.returncode == 0:
        chunks = result.stdout.split(SEPARATOR + "\n")
        if len(chunks) == len(texts):
            return chunks
    outputs: list[str | None] = []
    for text in texts:
        single = run_mlir_opt(*args, stdin=text)
        outputs.append(single.stdout if single.returncode == 0 else None)
    return outputs


def _shardc(text: str, traversal: str) -> str | None:
    ctx = make_context()
    module = Parser(ctx, text).parse_module()
    module.verify()
    try:
        ShardingPropagationPass(traversal=traversal, complete=False).apply(ctx, module)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a failed propagation (diagnostics were emitted)
        return None
    out = StringIO()
    print_module(module, out)
    return out.getvalue()


def _batches() -> list[tuple[str, list[int]]]:
    by_traversal: dict[str, list[int]] = {}
    for seed in range(NUM_PROGRAMS):
        by_traversal.setdefault(traversal_for(seed), []).append(seed)
    return [
        (traversal, seeds[i : i + BATCH])
        for traversal, seeds in by_traversal.items()
        for i in range(0, len(seeds), BATCH)
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("traversal", "seeds"), _batches(), ids=lambda v: str(v))
def test_propagation_matches_mlir_opt(traversal: str, seeds: list[int]) -> None:
    texts = [generate_program(seed) for seed in seeds]
    expected = _mlir_opt_chunks(texts, _pipeline(traversal, cse=False))
    expected_cse = _mlir_opt_chunks(texts, _pipeline(traversal, cse=True))
    ours = [_shardc(text, traversal) for text in texts]
    ours_cse = _mlir_opt_chunks([o or "" for o in ours], "--cse")
    mismatches: list[str] = []
    for seed, exp, exp_cse, got, got_cse in zip(seeds, expected, expected_cse, ours, ours_cse):
        if seed in TRUNK_DIFFERS:
            continue
        if exp is None:
            if got is not None:
                mismatches.append(f"seed {seed}: mlir-opt failed, shardc succeeded")
            continue
        if got is None:
            mismatches.append(f"seed {seed}: shardc failed, mlir-opt succeeded")
            continue
        if normalize_ssa_names(exp) != normalize_ssa_names(got):
            mismatches.append(f"seed {seed}: outputs differ")
        elif exp_cse is None or got_cse is None or normalize_ssa_names(
            exp_cse
        ) != normalize_ssa_names(got_cse):
            mismatches.append(f"seed {seed}: outputs differ after cse")
    assert not mismatches, "\n".join(mismatches)


# Trunk's test cases where its algorithm succeeds, in the default mode (with the
# completion): values read by several ops (an unannotated argument, a result), weight-
# stationary layers that replicate a contracted result. 22.1.8 agrees with trunk on them.
DEFAULT_MODE_PROGRAMS = {
    "weight_stationary_zero_point": """
shard.grid @line(shape = ?)
func.func @f(%x: tensor<3x6x10xf32>, %w1: tensor<3x10x12xf32>, %w2: tensor<3x12x10xf32>, %zp: tensor<1xf32>) -> tensor<3x6x10xf32> {
  %last = shard.sharding @line split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %last : tensor<3x6x10xf32>
  %w1s = shard.shard %w1 to %last : tensor<3x10x12xf32>
  %h = tosa.matmul %xs, %w1s, %zp, %zp : (tensor<3x6x10xf32>, tensor<3x10x12xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x6x12xf32>
  %a = tosa.tanh %h : (tensor<3x6x12xf32>) -> tensor<3x6x12xf32>
  %mid = shard.sharding @line split_axes = [[], [0]] : !shard.sharding
  %w2s = shard.shard %w2 to %mid : tensor<3x12x10xf32>
  %y = tosa.matmul %a, %w2s, %zp, %zp : (tensor<3x6x12xf32>, tensor<3x12x10xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<3x6x10xf32>
  %ys = shard.shard %y to %last : tensor<3x6x10xf32>
  return %ys : tensor<3x6x10xf32>
}
""",
    "argument_read_twice": """
shard.grid @g(shape = 2x2)
func.func @f(%x: tensor<8x6xf32>, %y: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %r = tosa.add %x, %y : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %s = shard.sharding @g split_axes = [[0], [1]] : !shard.sharding
  %a = shard.shard %r to %s : tensor<8x6xf32>
  %e = tosa.exp %y : (tensor<8x6xf32>) -> tensor<8x6xf32>
  %m = tosa.add %a, %e : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  return %m : tensor<8x6xf32>
}
""",
    "result_read_twice": """
shard.grid @g(shape = 2x4)
func.func @f(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %t = tosa.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %p = tosa.abs %t : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = tosa.exp %t : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = shard.sharding @g split_axes = [[1], [0]] : !shard.sharding
  %qs = shard.shard %q to %s : tensor<4x8xf32>
  return %p, %qs : tensor<4x8xf32>, tensor<4x8xf32>
}
""",
}


@pytest.mark.parametrize("name", sorted(DEFAULT_MODE_PROGRAMS))
def test_default_mode_matches_mlir_opt_after_cse(name: str) -> None:
    import subprocess
    import sys

    text = DEFAULT_MODE_PROGRAMS[name]
    pipeline = "--pass-pipeline=builtin.module(func.func(sharding-propagation,cse))"
    expected = run_mlir_opt(pipeline, stdin=text)
    assert expected.returncode == 0, expected.stderr
    ours = subprocess.run(
        [sys.executable, "-m", "shardc.tools.opt", "-", pipeline],
        input=text, capture_output=True, text=True, timeout=120,
    )
    assert ours.returncode == 0, ours.stderr
    assert normalize_ssa_names(ours.stdout) == normalize_ssa_names(expected.stdout)
