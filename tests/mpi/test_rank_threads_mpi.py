"""Each rank of a bf16 dp=2 step computes on its own thread only (rank_threads_main.py
measures it): a library thread team per rank (oneDNN's OpenMP, MKL, OpenBLAS) puts
four busy threads on a 2-core machine, and the team's spinning workers take the other
rank's core (measured: 2 ranks, 6 small steps, 0.45 s wall with one thread per rank,
6.2 s with SHARDC_BLAS_THREADS=2). The environment's OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS are removed: the runtime has to hold its libraries to one thread
by itself, as under a plain `mpiexec` of shardc-train."""

import re

import pytest
from _mpiexec import run_ranks

pytestmark = pytest.mark.mpi

UNSET = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "SHARDC_BLAS_THREADS")


def _run(monkeypatch: pytest.MonkeyPatch, **env: str):
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    return run_ranks(2, ["tests/mpi/rank_threads_main.py"], 300, **env)


def test_each_rank_computes_on_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _run(monkeypatch)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.count(": OK ") == 2, p.stdout + p.stderr


def test_a_thread_team_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: with SHARDC_BLAS_THREADS=2 the products run on a team, and the check
    says so (where oneDNN is loaded: it runs the bf16 products with OpenMP)."""
    p = _run(monkeypatch, SHARDC_BLAS_THREADS="2")
    assert p.returncode == 0, p.stdout + p.stderr
    if "oneDNN absent" in p.stdout:
        pytest.skip("oneDNN is not loaded here: the bf16 products have no OpenMP team to see")
    lines = re.findall(r"rank \d: (OK|FAIL) .*", p.stdout)
    assert lines and "FAIL" in lines, p.stdout + p.stderr
