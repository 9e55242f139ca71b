"""shardc-train under Slurm, on a one-node cluster this module brings up: a generated
slurm.conf and munge key in a temporary directory, munged, slurmctld and slurmd (for a
node named after this host) started in the foreground by the fixture and stopped after.

`srun -n 2 shardc-train --steps 3` trains one job (the grid from MPI's world, rank 0
alone reporting and writing the outputs) with the losses and parameters of the
single-rank run of the unsharded step; `shardc-train --np 2` inside an allocation starts
itself with srun; `--np` over the allocation and srun without an MPI plugin are one line
each. Skipped, with the reason, only where Slurm's and munge's binaries are absent
(`.ci/system-deps` installs them: `apt-get install slurm-wlm munge`) or not root.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("srun", "salloc", "sinfo")
MODEL = ["--n-layer", "1", "--n-head", "4", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2",
         "--steps", "3", "--lr", "1e-2", "--eval-every", "0", "--quiet"]
TRAIN = [sys.executable, "-m", "shardc.tools.train"]


@dataclass
class Cluster:
    conf: Path
    logs: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI_", "PMIX_", "OMPI_"))}
        env.update(SLURM_CONF=str(self.conf), PYTHONUNBUFFERED="1", **extra)
        return env

    def run(self, cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env())

    def log_tail(self) -> str:
        return "".join(f"\n== {f.name}\n" + "\n".join(f.read_text(errors="replace").splitlines()[-10:]) for f in sorted(self.logs.glob("*.log")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _slurm_conf(d: Path, host: str, munge_socket: Path) -> str:
    ctld, slurmd = _free_port(), _free_port()
    # Job ids of their own per cluster: MPICH names its shared-memory segment after the
    # PMI job (`<jobid>.<step>`), and ranks ended by a signal (the SIGTERM test's) leave
    # it in /dev/shm. A later cluster on the machine counting from job 1 again met that
    # segment, and its job's ranks failed or hung in MPI_Init ("Message from rank 1 and
    # tag 7 truncated"): the SIGTERM test failed on every run after its first.
    first_job = random.SystemRandom().randrange(1_000, 60_000_000)
    return f"""\
ClusterName=shardc-test
FirstJobId={first_job}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
MpiDefault=pmi2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
SlurmctldPort={ctld}
SlurmdPort={slurmd}
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _which(name: str) -> str | None:
    """Slurm's daemons live in sbin, often not on a user's PATH."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin{os.pathsep}/sbin")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    missing = [b for b in (*DAEMONS, *CLIENTS) if _which(b) is None]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge (.ci/system-deps does)")
    if os.geteuid() != 0:
        pytest.skip("a one-node Slurm needs root to start slurmd")
    which = lambda b: str(_which(b))  # noqa: E731
    d = tmp_path_factory.mktemp("slurm")
    for sub in ("state", "spool", "log", "munge"):
        (d / sub).mkdir()
    (d / "munge").chmod(0o755)
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = d / "munge" / "socket"
    host = socket.gethostname().split(".")[0]
    conf = d / "slurm.conf"
    conf.write_text(_slurm_conf(d, host, sock))
    c = Cluster(conf, d / "log")
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen([which("munged"), "-F", "-f", f"--key-file={key}", f"--socket={sock}", f"--pid-file={d}/munge/pid",
                                       f"--seed-file={d}/munge/seed", f"--log-file={d}/log/munged.log"], env=c.env()))
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert procs[0].poll() is None and time.monotonic() < deadline, "munged did not start" + c.log_tail()
            time.sleep(0.05)
        procs.append(subprocess.Popen([which("slurmctld"), "-D", "-f", str(conf)], env=c.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([which("slurmd"), "-D", "-f", str(conf)], env=c.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 90
        state = ""
        while state not in ("idle", "mixed"):
            assert all(p.poll() is None for p in procs), f"a Slurm daemon exited (state {state!r})" + c.log_tail()
            assert time.monotonic() < deadline, f"node {host} not idle after 90 s (state {state!r})" + c.log_tail()
            time.sleep(0.5)
            p = c.run([which("sinfo"), "-h", "-N", "-o", "%T"], timeout=30)
            state = p.stdout.strip().rstrip("*")
        reason = _mpi_under_srun_fails(c, which("srun"))
        if reason:
            pytest.skip(f"MPICH cannot start 2 ranks under this machine's Slurm (PMI2), with no shardc code involved: {reason}")
        yield c
    finally:
        if len(procs) == 3 and all(p.poll() is None for p in procs):
            _end_every_job(c, which)
        for p in reversed(procs):
            p.terminate()
        for p in reversed(procs):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _end_every_job(c: Cluster, which) -> None:
    """Kill what the cluster still runs before its daemons stop: a rank of a step whose
    srun timed out (the probe below) outlives slurmd, reparented to init, and would
    spin on a core for the rest of the session (seen: an hour of 50% CPU under CI)."""
    try:
        jobs = c.run([which("squeue"), "-h", "-o", "%i"], timeout=30).stdout.split()
        if not jobs:
            return
        c.run([which("scancel"), "--full", "--signal=KILL", *jobs], timeout=30)
        c.run([which("scancel"), *jobs], timeout=30)
        deadline = time.monotonic() + 30
        while c.run([which("squeue"), "-h", "-o", "%i"], timeout=30).stdout.split() and time.monotonic() < deadline:
            time.sleep(0.5)
    except subprocess.TimeoutExpired:
        pass


def _mpi_under_srun_fails(c: Cluster, srun: str) -> str | None:
    """Why two ranks of a bare mpi4py allreduce cannot run under `srun --mpi=pmi2` here
    (seen on one Intel VM, with the base commit too: UCX rejects the address PMI2 carries,
    "failed to unpack address, invalid bandwidth 0.00", or a message arrives truncated,
    and the job hangs), else None."""
    hello = "from mpi4py import MPI; print(MPI.COMM_WORLD.allreduce(1))"
    try:
        p = c.run([srun, "-n", "2", "--mpi=pmi2", sys.executable, "-c", hello], timeout=60)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        text = out.decode(errors="replace") if isinstance(out, bytes) else str(out)
        return "hung for 60 s: " + " ".join(text.split())[-200:]
    if p.returncode != 0 or p.stdout.split() != ["2", "2"]:
        return f"exit {p.returncode}: " + " ".join((p.stdout + p.stderr).split())[-200:]
    return None


def _reference(n: int, args: list[str]):
    from shardc.tools.train import arg_parser
    from shardc.training.gpt_source import configure
    from shardc.training.trainer import reference_losses

    a: argparse.Namespace = arg_parser().parse_args(args)
    cfg, grid, _, train, _ = configure(a, n, n)
    return grid, reference_losses(cfg, train, grid)


def test_srun_trains_one_job(cluster: Cluster, tmp_path: Path) -> None:
    p = cluster.run(["srun", "-n", "2", *TRAIN, *MODEL, "--out", str(tmp_path)])
    assert p.returncode == 0, p.stdout + p.stderr + cluster.log_tail()
    assert p.stdout.count("shardc-train: loss") == 1, p.stdout  # rank 0 alone reports
    grid, (ref_losses, ref_params) = _reference(2, MODEL)
    assert f"shardc-train: 2 ranks, grid {grid}" in p.stdout, p.stdout
    losses = [float(r["loss"]) for r in csv.DictReader(open(tmp_path / "loss.csv"))]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-5)
    got = np.load(tmp_path / "params.npz")
    for path, ref in ref_params.items():
        np.testing.assert_allclose(got[path], ref, rtol=1e-4, atol=2e-5, err_msg=path)


def test_np_inside_an_allocation_uses_srun(cluster: Cluster, tmp_path: Path) -> None:
    p = cluster.run(["salloc", "-n", "2", *TRAIN, "--np", "2", *MODEL, "--out", str(tmp_path)])
    assert p.returncode == 0, p.stdout + p.stderr + cluster.log_tail()
    assert "shardc-train: 2 ranks, grid" in p.stdout and p.stdout.count("shardc-train: loss") == 1, p.stdout
    assert len(list(csv.DictReader(open(tmp_path / "loss.csv")))) == 3


def test_np_over_the_allocation_is_one_line(cluster: Cluster, tmp_path: Path) -> None:
    p = cluster.run(["salloc", "-n", "2", *TRAIN, "--np", "4", *MODEL, "--out", str(tmp_path)])
    assert p.returncode == 1, p.stdout + p.stderr
    errors = [line for line in p.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("shardc-train: error: --np 4 is more than the 2 tasks of Slurm job "), p.stderr
    assert errors[0].endswith("(SLURM_NTASKS): allocate more (salloc/sbatch -n 4) or pass --np 2"), p.stderr


def test_sigterm_stops_an_srun_job(cluster: Cluster, tmp_path: Path) -> None:
    """`scancel`'s SIGTERM to `shardc-train --np 2` inside an allocation: srun and its tasks
    end, one line says where --resume continues (issue 32)."""
    import psutil

    out = tmp_path / "run"
    args = ["salloc", "-n", "2", *TRAIN, "--np", "2", *MODEL, "--steps", "100000", "--checkpoint-every", "5", "--out", str(out)]
    job = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cluster.env())
    try:
        deadline = time.monotonic() + 240
        while not (out / "checkpoints" / "step-00000010" / "manifest.json").exists():
            assert job.poll() is None and time.monotonic() < deadline, cluster.log_tail()
            time.sleep(0.01)
        launcher = next(p for p in psutil.Process(job.pid).children(recursive=True) if "shardc.tools.train" in " ".join(p.cmdline()))
        launcher.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    time.sleep(2)
    left = [p for p in psutil.process_iter(["cmdline", "status"]) if str(out) in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert not left, [p.info["cmdline"] for p in left]
    # srun's tasks are slurmstepd's children, not the launcher's: it does not count them
    assert "shardc-train: stopped by SIGTERM: the job's ranks ended; --resume continues from step " in err, err + cluster.log_tail()


def test_srun_without_an_mpi_plugin_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    p = cluster.run(["srun", "-n", "2", "--mpi=none", *TRAIN, *MODEL, "--out", str(tmp_path)])
    assert p.returncode != 0
    assert "shardc-train: error: the launcher started 2 ranks (SLURM_STEP_NUM_TASKS) but MPI sees 1: srun found no MPI plugin" in p.stderr, p.stderr
    assert not (tmp_path / "loss.csv").exists()


def test_sbatch_example_script(cluster: Cluster, tmp_path: Path) -> None:
    """examples/slurm/train.sbatch on this one node (the README's several-node script,
    here with 1 node x 2 tasks and a tiny model)."""
    script = Path(__file__).resolve().parent.parent.parent / "examples" / "slurm" / "train.sbatch"
    out = tmp_path / "run"
    env = cluster.env(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # shardc-train
        VENV=sys.prefix, OUT=str(out), STEPS="3", SHARDC_ARGS=" ".join(MODEL),
    )
    p = subprocess.run(["sbatch", "-W", "-N", "1", "--ntasks-per-node=2", f"--output={tmp_path}/job.log", str(script)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    log = (tmp_path / "job.log").read_text() if (tmp_path / "job.log").exists() else ""
    assert p.returncode == 0, p.stdout + p.stderr + log + cluster.log_tail()
    assert "shardc-train: 2 ranks, grid (batch=1, shard=2)" in log and log.count("shardc-train: loss") == 1, log
    assert len(list(csv.DictReader(open(out / "loss.csv")))) == 3
    assert (out / "checkpoints").is_dir()
