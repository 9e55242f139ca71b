"""The completion's memo of the sharding interface over ops alike (sharding_propagation's
`Completion.option_for` / `annotations_for`): it must answer what the interface answers,
and it must actually spare the work on a program of repeated ops (the benchmark chain)."""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.dialects import func
from xdsl.dialects.builtin import IndexType, TensorType, f32, i32
from xdsl.parser import Parser

import shardc.interfaces.sharding as sharding_interface
import shardc.passes.sharding_propagation as sp
from shardc.context import make_context
from shardc.dialects.shard import ShardOp
from shardc.frontends.annotate import annotate_arguments
from shardc.interfaces.sharding import (
    collect_diagnostics,
    get_sharding_interface,
    pass_cache,
)
from shardc.testing.gen_open_programs import FEATURES, generate_open_program
from shardc.testing.gen_programs import generate_chain

DATA = Path(__file__).resolve().parents[2] / "data" / "torch_mlir"


def _traversed(text: str):
    """Each function of `text` after upstream's traversals, with a fresh Completion."""
    module = Parser(make_context(), text).parse_module()
    for function in [f for f in module.ops if isinstance(f, func.FuncOp)]:
        block = function.body.blocks.first
        if block is None:
            continue
        explicit = {op for op in block.ops if isinstance(op, ShardOp)}
        sp.propagate_function(function, "backward-forward", False, complete=False)
        yield sp.Completion(function, explicit, False)


def _same_option(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return (a.sharding_array, a.grid, a.empty) == (b.sharding_array, b.grid, b.empty)


def _check(completion: sp.Completion) -> int:
    """Compare memoized and direct answers for every sharding pattern the completion
    asks about (each neighbour alone, everything read at once); returns the count."""
    checked = 0
    for op in completion.ops:
        impl = get_sharding_interface(op)
        if impl is None:
            continue
        n, m = len(op.operands), len(op.results)
        seen, own, demands = completion.around(op)
        patterns = [(list(seen), [o[0] if o else (d[0][0] if d else None) for o, d in zip(own, demands)])]
        for i, s in enumerate(seen):
            if s is not None:
                patterns.append(([s if j == i else None for j in range(n)], [None] * m))
        for j, (o, d) in enumerate(zip(own, demands)):
            for s in [o[0]] if o else [x for x, _ in d]:
                patterns.append(([None] * n, [s if k == j else None for k in range(m)]))
        for operands, results in patterns:
            with collect_diagnostics():
                direct = impl.get_sharding_option(op, operands, results)
            memo = completion.option_for(impl, op, operands, results)
            assert _same_option(memo, direct), op
            # Twice: a hit hands out a fresh option, unchanged by what callers did.
            if memo is not None:
                memo.sharding_array.append([99])
            assert _same_option(completion.option_for(impl, op, operands, results), direct)
            if direct is None or direct.empty or direct.grid is None:
                continue
            with collect_diagnostics():
                expected = impl.get_sharding_annotations(op, direct)
            assert completion.annotations_for(impl, op, direct) == expected, op
            checked += 1
    return checked


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_memo_answers_as_the_interface_on_open_programs(seed):
    text = generate_open_program(seed, FEATURES, num_ops=12)
    with pass_cache():
        for completion in _traversed(text):
            _check(completion)


@pytest.mark.slow
def test_memo_answers_as_the_interface_on_torch_gpt():
    import numpy as np

    names = [k for k in np.load(DATA / "gpt.npz").keys() if k != "result"]
    plan = {"idx": [[0]], "blocks.0.fc.weight": [[1]], "blocks.0.out.weight": [[], [1]]}
    text = annotate_arguments((DATA / "gpt.mlir").read_text(), (2, 2), plan, names=names)
    with pass_cache():
        assert sum(_check(c) for c in _traversed(text)) > 50


def test_type_key_tells_ranks_from_scalars():
    keys = [
        sp._type_key(TensorType(f32, [4])),
        sp._type_key(TensorType(f32, [])),
        sp._type_key(TensorType(f32, [4, 4])),
        sp._type_key(f32),
        sp._type_key(TensorType(i32, [4, 4])),
    ]
    assert keys[:4] == [1, 0, 2, -1]
    assert keys[4] == keys[2]  # element types are not read
    assert sp._type_key(IndexType()) == -1
    # A rank-1 tensor and a scalar must not share a key (True == 1 in a dict).
    assert sp._type_key(TensorType(f32, [4])) is not True


@pytest.mark.slow
def test_completion_computes_each_pattern_once_on_a_chain(monkeypatch):
    """A chain of 300 alike ops: the completion asks the interface a handful of times,
    not once per op (the speed of `complete=true` on bench/propagation.py)."""
    calls = {"annotations": 0, "counting": False}
    default = sharding_interface.default_get_sharding_annotations

    def counted(*args):
        if calls["counting"]:
            calls["annotations"] += 1
        return default(*args)

    complete = sp.complete_function

    def counting_completion(*args):
        calls["counting"] = True
        try:
            complete(*args)
        finally:
            calls["counting"] = False

    monkeypatch.setattr(sharding_interface, "default_get_sharding_annotations", counted)
    monkeypatch.setattr(sp, "complete_function", counting_completion)
    ctx = make_context()
    module = Parser(ctx, generate_chain(300)).parse_module()
    sp.ShardingPropagationPass().apply(ctx, module)
    assert 0 < calls["annotations"] <= 10
    shards = [op for op in module.walk() if isinstance(op, ShardOp)]
    assert len(shards) > 4 * 300  # and the program did get completed
