"""tm_tensor.scan split along its scan dimension under a real MPI job:
`mpiexec -n N python tests/mpi/scan_main.py`. Every rank runs the program through
`run_program` on the MPI world (partitioned, lowered to mpi.*, one process per rank) and
checks the global results against the step-by-step definition; the programs are the
simulated-rank tests' (tests/unit/interfaces/test_tm_tensor_scan_sharding.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
from mpi4py import MPI

from shardc.runtime.execute.comm import abort_on_error
from shardc.launch import run_program

TESTS = Path(__file__).resolve().parent.parent / "unit" / "interfaces" / "test_tm_tensor_scan_sharding.py"


def load():
    spec = importlib.util.spec_from_file_location("scan_sharding", TESTS)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    m = load()
    n = MPI.COMM_WORLD.Get_size()
    grids = [(str(n), "[[], [0]]")] + ([("2x2", "[[0], [1]]"), ("2x2", "[[], [1, 0]]")] if n == 4 else [])
    rng = np.random.default_rng(0)  # the same inputs on every rank
    cases = 0
    for grid, split in grids:
        for t, combiner, step in (("f32", "arith.addf", np.add), ("f32", "arith.maximumf", np.maximum), ("i64", "arith.addi", np.add)):
            for inclusive in (True, False):
                x = rng.standard_normal((4, 8)).astype(np.float32) if t == "f32" else rng.integers(-9, 9, (4, 8))
                acc = rng.standard_normal(4).astype(x.dtype) if t == "f32" else rng.integers(-9, 9, 4)
                text = m.program(grid, split, x.shape, 1, t, combiner, inclusive)
                out, last = run_program(text, [x, acc], ranks=None, pipeline=m.LOWERED)
                want, want_last = m.stepwise(step, x, acc, 1, inclusive)
                np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
                np.testing.assert_allclose(last, want_last, rtol=1e-5, atol=1e-5)
                cases += 1
    print(f"rank {MPI.COMM_WORLD.Get_rank()}: OK scan {cases}", flush=True)


if __name__ == "__main__":
    with abort_on_error():
        main()
    sys.exit(0)
