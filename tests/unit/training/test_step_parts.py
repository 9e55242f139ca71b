"""The training step compiled in parts (`shardc.training.split_compile`,
`shardc.runtime.codegen.parts`): the parts lower to the whole module's functions byte for byte
and compute the same numbers; the joined entry is stored, hit and checked like any
other; what cannot be joined is refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from shardc.ir.printer import module_to_string
from shardc.runtime.codegen.cache import CorruptEntry, DiskCache, Entry, load_bindings, make_key
from shardc.runtime.execute.code_check import generated_namespace
from shardc.runtime.execute.comm import run_simulated
from shardc.runtime.codegen.cache import join_modules
from shardc.runtime.codegen.parts import compile_parts_cached, join_entries, scope
from shardc.training import split_compile
from shardc.training.gpt import GPTConfig, init_params, param_specs
from shardc.training.optimizer import step_donation
from shardc.training.spmd import RankState, StepProgram
from shardc.training.trainer import TrainingConfig, compile_program

CFG = TrainingConfig(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32), per_device_batch=2, steps=1)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    return tmp_path / "cache"


def _setup():
    grid = CFG.grid(2, 2)
    batch = CFG.microbatch(grid)
    parts = [split_compile._part(CFG.model, batch, grid, CFG.policy, CFG.plan, CFG.dtype, CFG.opt, names) for names in split_compile.PARTS]  # pyright: ignore[reportPrivateUsage]
    return grid, batch, parts


def _parted(key: str, parts, donate):
    return compile_parts_cached(key, parts, split_compile._merge_meta, "train_step", donate=donate)  # pyright: ignore[reportPrivateUsage]


def _train(prog: StepProgram, params, batch) -> list:
    def one(rank: int):
        st = RankState(prog, rank, params)
        losses = [st.train_step([batch], 1e-2) for _ in range(2)]
        return losses, [p.copy() for p in st.params]

    return run_simulated(2, one, per_rank_args=[(0,), (1,)])


@pytest.mark.slow
def test_parts_lower_to_the_whole_step_and_train_the_same(cache):
    grid, batch, parts = _setup()
    whole = StepProgram.build(CFG.model, batch, grid, CFG.policy, CFG.plan, CFG.dtype, CFG.opt)
    donate = step_donation(len(whole.specs))
    got = _parted("a" * 64, parts, donate)
    assert got.source == "compiled"
    assert module_to_string(got.module()) == module_to_string(whole.module)
    assert dict(got.compiled.pynames) == dict(whole.compiled.pynames)
    for sym in ("train_step", "adamw_step"):
        assert got.compiled.functions[sym].shardc_donated == whole.compiled.functions[sym].shardc_donated  # type: ignore[attr-defined]
    parted = dataclasses.replace(whole, compiled=got.compiled)
    rng = np.random.default_rng(0)
    data = (rng.integers(0, 32, (batch, 8)).astype(np.int32), rng.integers(0, 32, (batch, 8)).astype(np.int32))
    params = init_params(CFG.model, 0, np.float32)
    a, b = _train(whole, params, data), _train(parted, params, data)
    for r in range(2):
        assert a[r][0] == b[r][0]
        assert all(np.array_equal(x, y) for x, y in zip(a[r][1], b[r][1]))


@pytest.mark.slow
def test_parted_entry_is_stored_hit_and_scoped(cache):
    _, _, parts = _setup()
    key = make_key("test-parts", n=1)
    first = _parted(key, parts, step_donation(len(param_specs(CFG.model))))
    entry = DiskCache.default().get(key)  # type: ignore[union-attr]
    assert entry is not None and len(entry.pools) == 2 and len(entry.lowered_parts) == 2
    second = _parted(key, [lambda: pytest.fail("a hit builds nothing")] * 2, {})
    assert (first.source, second.source) == ("compiled", "cache")
    assert second.compiled.source == first.compiled.source
    # part 1's globals are all scoped, part 0's none: the two pools cannot collide
    cut = entry.pools[0]
    names0 = set(load_bindings(entry.bindings[:cut])) - set(generated_namespace())
    names1 = set(load_bindings(entry.bindings[cut:])) - set(generated_namespace())
    assert names0 and names1 and all(n.startswith("_p1__") for n in names1) and not any("__" in n for n in names0)
    assert "_p1__" not in entry.source[: entry.source.index("\ndef fn__adamw__step")]


@pytest.mark.slow
def test_part_lengths_must_fit(cache):
    _, _, parts = _setup()
    key = make_key("test-parts", n=2)
    _parted(key, parts, {})
    entry = DiskCache.default().get(key)  # type: ignore[union-attr]
    for field in ("pools", "lowered_parts"):
        bad = dataclasses.replace(entry, **{field: [n + 1 for n in getattr(entry, field)]})
        with pytest.raises(CorruptEntry, match="bad part lengths"):
            Entry.decode(bad.encode(), key)


@pytest.mark.slow
def test_joining_refuses_what_does_not_join(cache):
    _, _, parts = _setup()
    key = make_key("test-parts", n=3)
    _parted(key, parts, {})
    entry = DiskCache.default().get(key)  # type: ignore[union-attr]
    from shardc.runtime.codegen.builder import CompileError

    with pytest.raises(CorruptEntry, match="in two parts"):
        join_entries(key, [entry, entry], split_compile._merge_meta)  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(CompileError, match="cannot donate arguments of @nowhere"):
        join_entries(key, [entry], lambda metas: metas[0], {"nowhere": {0: 0}})
    from shardc.runtime.codegen.parts import compile_part

    a = compile_part(key, 0, lambda: _grid_module("@grid(shape = 2)"), "m", True, None)
    b = compile_part(key, 1, lambda: _grid_module("@grid(shape = 4)"), "m", True, None)
    from shardc.runtime.codegen.cache import parse_lowered

    with pytest.raises(CorruptEntry, match="declare grid differently"):
        join_modules([parse_lowered(a.lowered), parse_lowered(b.lowered)])
    same = join_modules([parse_lowered(a.lowered), parse_lowered(a.lowered)])
    assert [op.name for op in same.ops] == ["shard.grid"]


def _grid_module(grid: str):
    from shardc.runtime.codegen.cache import parse_lowered

    return parse_lowered(f"module {{\n  shard.grid {grid}\n}}\n"), {}


def test_scopes():
    from shardc.runtime.codegen.builder import ModuleCodegen

    assert (scope(0), scope(3)) == ("", "p3__")
    with pytest.raises(ValueError, match="bad scope"):
        ModuleCodegen(None, "p1")  # type: ignore[arg-type]
    cg = ModuleCodegen(None, "p2__")  # type: ignore[arg-type]
    assert cg.const(object(), "k") == "_p2__k_0"


@pytest.mark.slow
def test_compile_program_alone_is_the_whole_step(cache):
    """Without a communicator of several ranks nothing is split (same entry as before)."""
    grid, batch, _ = _setup()
    a = compile_program(CFG, grid)
    b = StepProgram.build(CFG.model, batch, grid, CFG.policy, CFG.plan, CFG.dtype, CFG.opt)
    assert (a.cached, b.cached) == ("compiled", "cache")
