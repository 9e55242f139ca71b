"""`SHARDC_BLAS=auto`: the faster library measured once per machine and kept
(`shardc.runtime.execute.kernels.blas_choice`), one answer for every process that reads it, and
rank 0's answer for every rank of a run (`blas.agree`)."""

from __future__ import annotations

import json
import os

import pytest

from shardc.runtime.execute.kernels import blas, blas_choice


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty cache directory and no choice made yet in this process."""
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    monkeypatch.setenv("SHARDC_BLAS", "auto")
    monkeypatch.setattr(blas, "_ACTIVE", {})
    monkeypatch.setattr(blas, "_AGREED", [])
    return tmp_path / "cache"


def _libs():
    return {n: lib for n in blas.LIBRARIES if (lib := blas._loaded(n)) is not None}  # pyright: ignore[reportPrivateUsage]


def _need_both():
    if len(_libs()) < 2:
        pytest.skip("needs both MKL (the [fast] extra) and numpy's OpenBLAS loadable")


@pytest.mark.parametrize("faster", ["mkl", "openblas"])
def test_the_faster_library_is_chosen_and_kept(fresh, monkeypatch, faster):
    _need_both()
    slower = "openblas" if faster == "mkl" else "mkl"
    monkeypatch.setattr(blas_choice, "measure", lambda libs: {faster: 1.0, slower: 1.5})
    assert blas.active_name() == faster
    (record,) = fresh.glob("blas-choice-*.json")
    kept = json.loads(record.read_text())
    assert kept["choice"] == faster and kept["seconds"] == {faster: 1.0, slower: 1.5}
    assert (record.stat().st_mode & 0o777) == 0o600

    def no_measuring(libs):
        raise AssertionError("measured again although the answer was kept")

    monkeypatch.setattr(blas_choice, "measure", no_measuring)
    monkeypatch.setattr(blas, "_ACTIVE", {})  # as a new process would start
    assert blas.active_name() == faster


def test_the_first_answer_kept_wins(fresh, monkeypatch):
    """A process that measured otherwise still runs what the file says: the ranks on one
    machine agree even when their own measurements would not."""
    _need_both()
    fresh.mkdir(mode=0o700)
    (fresh / f"blas-choice-{blas_choice.key(blas.library_files())}.json").write_text(json.dumps({"choice": "mkl"}))
    monkeypatch.setattr(blas_choice, "measure", lambda libs: {"mkl": 9.0, "openblas": 1.0})
    assert blas.active_name() == "mkl"
    monkeypatch.setattr(blas, "_ACTIVE", {})
    (fresh / f"blas-choice-{blas_choice.key(blas.library_files())}.json").unlink()
    assert blas.active_name() == "openblas"  # deleted: measured again


def test_a_damaged_record_is_measured_over(fresh, monkeypatch):
    _need_both()
    fresh.mkdir(mode=0o700)
    path = fresh / f"blas-choice-{blas_choice.key(blas.library_files())}.json"
    path.write_text("{not json")
    monkeypatch.setattr(blas_choice, "measure", lambda libs: {"mkl": 2.0, "openblas": 1.0})
    assert blas.active_name() == "openblas"


def test_nothing_kept_with_the_cache_off(fresh, monkeypatch):
    _need_both()
    monkeypatch.setenv("SHARDC_CACHE", "0")
    calls = []
    monkeypatch.setattr(blas_choice, "measure", lambda libs: calls.append(1) or {"mkl": 1.0, "openblas": 2.0})
    assert blas.active_name() == "mkl" and calls == [1]
    assert not fresh.exists() or not list(fresh.glob("blas-choice-*"))


def test_the_key_follows_what_the_speed_depends_on(monkeypatch):
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.delenv("SHARDC_BLAS_THREADS", raising=False)
    base = blas_choice.key(blas.library_files())
    assert blas_choice.key(blas.library_files()) == base
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert blas_choice.key(blas.library_files()) != base
    monkeypatch.delenv("OPENBLAS_CORETYPE")
    monkeypatch.setenv("SHARDC_BLAS_THREADS", "2")
    assert blas_choice.key(blas.library_files()) != base


def test_the_measurement_times_every_library():
    libs = _libs()
    if not libs:
        pytest.skip("no BLAS loadable with ctypes here")
    seconds = blas_choice.measure(libs)
    assert set(seconds) == set(libs) and all(0 < s < 10 for s in seconds.values())


class _World:
    def __init__(self, rank, size, root_says):
        self.rank, self.size, self.root_says, self.sent = rank, size, root_says, []

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def bcast(self, value, root=0):
        self.sent.append(value)
        return value if self.rank == root else self.root_says


def test_agree_takes_rank_0s_choice(fresh, monkeypatch):
    _need_both()
    monkeypatch.setattr(blas_choice, "measure", lambda libs: {"mkl": 2.0, "openblas": 1.0})
    assert blas.active_name() == "openblas"
    w = _World(1, 2, "mkl")
    blas.agree(w)
    assert w.sent == [None] and blas.active_name() == "mkl"
    root = _World(0, 2, None)
    blas.agree(root)
    assert root.sent == ["mkl"]  # rank 0 sends what it runs
    monkeypatch.setenv("SHARDC_BLAS", "openblas")  # an explicit choice stays
    blas.agree(_World(1, 2, "mkl"))
    assert blas.active_name() == "openblas"


def test_unknown_value_warns_once_and_means_auto(fresh, monkeypatch, capsys):
    monkeypatch.setenv("SHARDC_BLAS", "fastest")
    monkeypatch.setattr(blas, "_warned", set())
    name = blas.active_name()
    blas.active_name()
    err = capsys.readouterr().err
    assert err == "shardc: warning: SHARDC_BLAS='fastest' is not one of auto, mkl, openblas, numpy; using auto\n"
    assert name in ("mkl", "openblas", "numpy")


def test_openblas_runs_on_the_threads_asked(tmp_path):
    """Loading numpy's OpenBLAS sets its thread count for the process (1 unless asked)."""
    import subprocess
    import sys

    code = (
        "import ctypes, json, numpy as np; from shardc.runtime.execute.kernels import blas;"
        "a = np.ones((256, 256), np.float32); blas.matmul(a, a, np.empty_like(a));"
        "lib = ctypes.CDLL(blas.openblas_path());"
        "print(json.dumps([blas.active_path(), lib.scipy_openblas_get_num_threads64_()]))"
    )
    for threads, word in (("1", "1 thread;"), ("2", "2 threads;")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDC_BLAS")}
        env.update(SHARDC_BLAS="openblas", SHARDC_BLAS_THREADS=threads)
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        path, running = json.loads(r.stdout.strip().splitlines()[-1])
        if path.startswith("numpy"):
            pytest.skip("numpy's OpenBLAS is not loadable here")
        assert path.startswith("OpenBLAS") and word in path and running == int(threads)


def test_a_compiled_module_holds_numpys_openblas_at_the_runtimes_threads(tmp_path):
    """A program without a float32 product through `blas` (bf16 products run on oneDNN)
    runs numpy's own OpenBLAS on the runtime's threads from its compile, and from a cache
    hit's load in a fresh process: OpenBLAS's default (`OPENBLAS_NUM_THREADS` here, a
    thread per core otherwise) made two ranks on two cores 2.2x slower."""
    import subprocess
    import sys

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: OpenBLAS runs one thread whatever it is told")
    code = (
        "import ctypes, json; from shardc.context import make_context; from shardc.ir.fast_parser import FastParser;"
        "from shardc.runtime.codegen.cache import compile_module_cached; from shardc.runtime.execute.kernels import blas;"
        "get = ctypes.CDLL(blas.openblas_path()).scipy_openblas_get_num_threads64_;"
        "before = get();"
        "m = FastParser(make_context(), 'func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\\n  return %a : tensor<4xf32>\\n}').parse_module();"
        "cm = compile_module_cached(m, 't');"
        "print(json.dumps([before, get(), type(cm).__name__]))"
    )
    for threads, kind in (("1", "CompiledModule"), ("1", "CachedModule"), ("2", "CachedModule")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHARDC_BLAS")}
        env.update(OPENBLAS_NUM_THREADS="3", SHARDC_BLAS_THREADS=threads, SHARDC_CACHE_DIR=str(tmp_path))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        before, held, made = json.loads(r.stdout.strip().splitlines()[-1])
        assert before > 1  # OPENBLAS_NUM_THREADS, capped at the cores
        assert (held, made) == (int(threads), kind)
