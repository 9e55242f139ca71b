"""`set_blas_threads` reaches numpy's own OpenBLAS (the library `blas.openblas_path` names),
so the trainer's one-thread setting holds for the library the step's matmuls use."""

import ctypes

from shardc.runtime.execute.kernels.blas import openblas_path
from shardc.training.train import set_blas_threads


def test_sets_and_reports_numpy_openblas_threads():
    path = openblas_path()
    assert path is not None and "numpy.libs" in path
    get = ctypes.CDLL(path).scipy_openblas_get_num_threads64_
    get.restype = ctypes.c_int
    before = get()
    old = set_blas_threads(2)
    try:
        assert old == before
        assert get() == 2
        assert set_blas_threads(1) == 2
        assert get() == 1
    finally:
        set_blas_threads(old)
