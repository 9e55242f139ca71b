"""convert-shard-to-mpi stages a reduce_scatter's transposed input in a fresh buffer, as
trunk does; `forward-send-copies` (run by the runtime before it compiles) sends the
transpose itself. Both give the shard-level result, and the ZeRO step's generated Python
holds no copy of a gradient before its reduce_scatter."""

from __future__ import annotations

import re

import pytest

from shardc.passes.forward_send_copies import forward_send_copies
from shardc.runtime import compile_module
from shardc.runtime.execute.comm import run_simulated

from test_lowered_exec import Case, assert_same, collective_cases, lower, parse


def _staged_sends(module) -> int:
    """How many reduce_scatter_blocks send a buffer a linalg.copy filled."""
    count = 0
    for op in module.walk():
        if op.name == "mpi.reduce_scatter_block":
            send = op.operands[0]
            count += any(use.operation.name == "linalg.copy" and use.index == 1 for use in send.uses)
    return count



def _inner_cases() -> list[Case]:
    out = []
    for grid in [(4,), (2, 3)]:
        for c in collective_cases(grid):
            if "shard.reduce_scatter" in c.body and ("scatter_axis = 0" not in c.body and "scatter_dim = 0" not in c.body):
                out.append(c)
    return out


@pytest.mark.parametrize("case", _inner_cases(), ids=lambda c: c.id)
def test_staged_and_forwarded_reduce_scatter_agree(case: Case) -> None:
    lowered = lower(case.text())
    assert _staged_sends(lowered) == 1  # trunk's form: the copy is there after canonicalize
    staged = compile_module(lowered, "staged.mlir", fuse=False)  # sends the copy
    forwarded = compile_module(lowered, "forwarded.mlir")  # forwards it
    assert _staged_sends(lowered) == 1  # the runtime forwarded on its own clone
    shard = compile_module(parse(case.text()), "shard.mlir")
    results = {
        name: run_simulated(case.n, lambda r, cm=cm: cm.call("f", *case.inputs(r)), per_rank_args=[(r,) for r in range(case.n)])
        for name, cm in (("shard", shard), ("staged", staged), ("forwarded", forwarded))
    }
    for r in range(case.n):
        assert_same(case, r, results["shard"][r], results["staged"][r], "staged send buffer")
        assert_same(case, r, results["shard"][r], results["forwarded"][r], "forwarded send buffer")
    clone = lowered.clone()
    assert forward_send_copies(clone) == 1
    assert _staged_sends(clone) == 0
    assert not any(op.name in ("linalg.copy", "memref.dealloc") for op in clone.walk())


_SEND = re.compile(r"reduce_scatter_block(?:_\d+\(|', )(\w+), (\w+), (\w+)")
_FRESH = re.compile(r"^\s*(\w+) = _np\.empty\(", re.M)


def test_zero_step_reduce_scatters_without_a_copy() -> None:
    """The ZeRO step reduce-scatters gradients along their inner dims (c_attn, attn
    c_proj and MLP weights): convert-shard-to-mpi stages each in a copy (trunk's form,
    the test above), and the trainer's pipeline forwards them (`forward-send-copies`
    follows the conversion), so neither its lowered IR nor the generated Python sends a
    freshly allocated copy."""
    from shardc.training.gpt import GPTConfig
    from shardc.training.trainer import TrainingConfig, compile_program

    gpt = GPTConfig(n_layer=1, n_head=4, n_embd=16, block_size=4, vocab_size=8)
    cfg = TrainingConfig(gpt, per_device_batch=2, accum=1, steps=1, lr=1e-2, warmup_steps=1, eval_batches=1).shard(tp=1, zero=True, fsdp=False)
    prog = compile_program(cfg, cfg.grid(2))
    names = [stage.name for stage in prog.stages]
    assert names.index("forward-send-copies") == names.index("convert-shard-to-mpi") + 1
    assert _staged_sends(prog.module) == 0
    assert sum(op.name == "mpi.reduce_scatter_block" for op in prog.module.walk()) >= 3
    source = prog.compiled.source  # type: ignore[attr-defined]
    sends = [m.group(2) for m in _SEND.finditer(source)]
    assert len(sends) == sum(op.name == "mpi.reduce_scatter_block" for op in prog.module.walk())
    fresh = set(_FRESH.findall(source))
    assert not [s for s in sends if s in fresh], "a reduce_scatter sends a freshly allocated copy"
