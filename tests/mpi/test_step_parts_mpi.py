"""The GPT step's parts compiled on two ranks at once under `mpiexec -n 2`
(`shardc.training.split_compile`): rank 1 compiles `@adamw_step` and `@loss` while rank 0
compiles `@train_step`; the joined entry is the one a single process makes, a warm run
hits it, and a rank whose part fails makes every rank fail with a one-line error."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from _mpiexec import run_ranks

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

DRIVER = str(Path(__file__).with_name("step_parts_main.py"))


def _run(cache: Path, *args: str):
    env = {"SHARDC_CACHE_DEBUG": "1", "SHARDC_CACHE_DIR": str(cache)}
    os.environ.pop("SHARDC_CACHE", None)
    return run_ranks(2, [DRIVER, *args], timeout=300, **env)


def _objects(text: str) -> list[dict]:
    """The JSON objects the ranks printed (two ranks' lines may run together)."""
    dec, out, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        obj, end = dec.raw_decode(text, at)
        out.append(obj)
        at = text.find("{", end)
    return out


def _counts(stderr: str) -> dict[str, int]:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("shardc: compile cache: ")]
    return {kind: sum(f": {kind} " in ln for ln in lines) for kind in ("miss", "hit", "received")}


def _in_process_source(cache: Path, monkeypatch) -> str:
    """The generated source of the same parted compile in this process."""
    from shardc.runtime.codegen.parts import compile_parts_cached
    from shardc.training import split_compile
    from shardc.training.gpt import GPTConfig, param_specs
    from shardc.training.optimizer import step_donation
    from shardc.training.trainer import TrainingConfig

    monkeypatch.setenv("SHARDC_CACHE_DIR", str(cache))
    cfg = TrainingConfig(GPTConfig(n_layer=1, n_head=2, n_embd=16, block_size=8, vocab_size=32), per_device_batch=2, steps=1)
    grid = cfg.grid(2, 2)
    parts = [split_compile._part(cfg.model, cfg.microbatch(grid), grid, cfg.policy, cfg.plan, cfg.dtype, cfg.opt, n) for n in split_compile.PARTS]  # pyright: ignore[reportPrivateUsage]
    got = compile_parts_cached("b" * 64, parts, split_compile._merge_meta, "train_step", donate=step_donation(len(param_specs(cfg.model))))  # pyright: ignore[reportPrivateUsage]
    return got.compiled.source


def test_two_ranks_compile_the_parts_then_hit(tmp_path, monkeypatch):
    cold = _run(tmp_path / "cache")
    assert cold.returncode == 0, cold.stderr[-3000:]
    c = json.loads(cold.stdout.strip().splitlines()[-1])
    assert c["sources"] == ["compiled", "broadcast"] and len(c["hashes"]) == 1
    assert _counts(cold.stderr) == {"miss": 1, "hit": 0, "received": 1}, cold.stderr
    assert "compiling in 2 part(s)" in cold.stderr
    (entry,) = (tmp_path / "cache").rglob("*.entry")
    warm = _run(tmp_path / "cache")
    assert warm.returncode == 0, warm.stderr[-3000:]
    w = json.loads(warm.stdout.strip().splitlines()[-1])
    assert w["sources"] == ["cache", "broadcast"] and w["hashes"] == c["hashes"] and w["losses"] == c["losses"]
    assert list((tmp_path / "cache").rglob("*.entry")) == [entry]
    # one process compiling both parts makes the same code as the two ranks did
    assert hashlib.sha256(_in_process_source(tmp_path / "other", monkeypatch).encode()).hexdigest() == c["hashes"][0]


@pytest.mark.parametrize("fail_rank", [0, 1])
def test_a_failing_part_fails_every_rank_cleanly(tmp_path, fail_rank):
    p = _run(tmp_path / "cache", "--fail-rank", str(fail_rank))
    assert p.returncode != 0
    errors = {d["rank"]: d["error"] for d in _objects(p.stdout)}
    assert errors[fail_rank] == f"RuntimeError: part refused on rank {fail_rank}"
    other = 1 - fail_rank
    assert errors[other] == f"PeerFailed: rank {fail_rank} failed to compile train_step: RuntimeError: part refused on rank {fail_rank}"
    assert "Traceback" not in p.stderr
    assert not list((tmp_path / "cache").rglob("*.entry"))
