"""Lowered shard ops under a real MPI job (`mpiexec -n 2` and `-n 4`, 1-D and 2-D grids).

A fixed sample of tests/unit/lowering/test_lowered_exec.py's cases runs on every rank
three ways: the shard-level program on MPIComm's shard kernels, the program after
`convert-shard-to-mpi --canonicalize` on the mpi kernels (mpi4py), and the program
lowered for this rank alone (DLTI); each rank checks its own results. Halos of a
megabyte and more check that upstream's send-before-receive order goes through.
The MLP example runs end to end under `mpiexec -n 4`.

    mpiexec -n 4 python tests/mpi/test_lowered_mpi.py worker 2x2
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MPIEXEC = shutil.which("mpiexec")


def _exec_module():
    spec = importlib.util.spec_from_file_location("test_lowered_exec", ROOT / "tests/unit/lowering/test_lowered_exec.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def sample(m, grid: tuple[int, ...]) -> list:
    """Up to three cases per op (first, middle, last of its variants), every halo case
    and the big halos."""
    groups: dict[str, list] = {}
    for c in m.cases(grid):
        groups.setdefault(c.id.split("-")[0], []).append(c)
    out = []
    for name, group in groups.items():
        if name == "update_halo" or name == "all_reduce":
            picked = group if name == "update_halo" else group[:: max(1, len(group) // 6)]
        else:
            picked = [group[0], group[len(group) // 2], group[-1]]
        if name in ("all_gather", "reduce_scatter"):  # trunk's memref forms, over the widest group
            picked.append([c for c in group if "-memref-" in c.id][-1])
        out += [c for i, c in enumerate(picked) if c not in picked[:i]]
    return out + m.halo_cases(grid, big=True)


def worker(grid: tuple[int, ...]) -> int:
    from mpi4py import MPI

    from shardc.runtime.execute.comm import MPIComm, abort_on_error, use_comm

    world = MPI.COMM_WORLD
    rank = world.Get_rank()
    m = _exec_module()
    done = 0
    with abort_on_error(world), use_comm(MPIComm(world)):
        for case in sample(m, grid):
            runner = m.Runner(case, world_rank=rank)
            want = runner.call("shard", rank)
            m.assert_same(case, rank, want, runner.call("lowered", rank), "lowered, under MPI")
            m.assert_same(case, rank, want, runner.call("dlti", rank), "lowered for its rank, under MPI")
            done += 1
        world.Barrier()
    print(f"rank {rank}: OK {done}", flush=True)
    return 0


# =========================================================================================
# pytest side
# =========================================================================================

pytestmark = [pytest.mark.mpi, pytest.mark.slow]  # mpiexec jobs that import and compile on every rank: the quick tier keeps test_comm_mpi's


def _mpiexec(n: int, args: list[str], timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess:
    if MPIEXEC is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    try:
        return subprocess.run([MPIEXEC, "-n", str(n), *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"mpiexec -n {n} timed out after {timeout}s (deadlock?)\n{(e.stdout or b'')[-2000:]!r}")


@pytest.mark.parametrize("grid", ["2", "4", "2x2"])
def test_lowered_ops_under_mpiexec(grid: str) -> None:
    n = int(np.prod([int(g) for g in grid.split("x")]))
    p = _mpiexec(n, [sys.executable, str(Path(__file__)), "worker", grid], timeout=400)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count(": OK ") == n, p.stdout


def mlp_inputs(directory: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    values = {
        "x": rng.standard_normal((16, 32)).astype(np.float32),
        "w1": rng.standard_normal((32, 64)).astype(np.float32),
        "w2": rng.standard_normal((64, 32)).astype(np.float32),
    }
    for name, v in values.items():
        np.save(directory / f"{name}.npy", v)
    return values


def mlp_reference(v: dict[str, np.ndarray]) -> np.ndarray:
    return np.maximum(v["x"] @ v["w1"], 0) @ v["w2"]


def test_mlp_example_under_mpiexec(tmp_path: Path) -> None:
    """README's example: the pipeline run inside shardc-run, and the file lowered by
    shardc-opt; both take and give global arrays (the lowered file through the shardings
    shard-to-mpi-pipeline records on its arguments and result)."""
    v = mlp_inputs(tmp_path)
    inputs = [f"--input={k}={tmp_path / k}.npy" for k in v]
    run = [sys.executable, "-m", "shardc.tools.run"]
    p = _mpiexec(4, [*run, str(ROOT / "examples/mlp.mlir"), "--entry", "mlp", "--pipeline", "shard-to-mpi-pipeline", *inputs, "--output", str(tmp_path / "global")], timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    want = mlp_reference(v)
    np.testing.assert_allclose(np.load(tmp_path / "global/result0.npy"), want, rtol=1e-4, atol=1e-4)

    lowered = tmp_path / "lowered.mlir"
    opt = subprocess.run([sys.executable, "-m", "shardc.tools.opt", str(ROOT / "examples/mlp.mlir"), "--shard-to-mpi-pipeline", "-o", str(lowered)], capture_output=True, text=True, timeout=300)
    assert opt.returncode == 0, opt.stderr
    # the printed lowered program names its arguments %arg0.. (by position)
    by_position = [f"--input=arg{k}={tmp_path / n}.npy" for k, n in enumerate(("x", "w1", "w2"))]
    p = _mpiexec(4, [*run, str(lowered), *by_position, "--output", str(tmp_path / "lowered")], timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines() == [f"wrote {tmp_path / 'lowered'}/result0.npy: 16x32 f32"], p.stdout  # rank 0 only
    got = np.load(tmp_path / "lowered/result0.npy")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, np.load(tmp_path / "global/result0.npy"), rtol=1e-6, atol=1e-5)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "worker":
        sys.exit(worker(tuple(int(g) for g in sys.argv[2].split("x"))))
    sys.exit(pytest.main([__file__, *sys.argv[1:]]))
