import numpy as np
import pytest

from shardc.runtime.codegen import cache
from shardc.runtime import compile_text


@pytest.fixture
def run():
    """run(mlir_text, fn_name, *args) -> compiled function result (via CompiledModule.call)."""

    def _run(text: str, name: str, *args):
        return compile_text(text).call(name, *args)

    return _run


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def _own_cache(tmp_path, monkeypatch):
    """An empty compile-cache directory of the test's own, with the cache on (the cache
    tests mark themselves to use it)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(d))
    monkeypatch.delenv("SHARDC_CACHE", raising=False)
    cache._WARNED.clear()  # pyright: ignore[reportPrivateUsage]
    yield d


@pytest.fixture(params=["mkl", "openblas"])
def blas_library(request, monkeypatch):
    """Every product through this BLAS however small (the thresholds are about speed);
    skipped where the library does not load (MKL: the [fast] extra)."""
    from shardc.runtime.execute.kernels import blas

    if blas._loaded(request.param) is None:  # pyright: ignore[reportPrivateUsage]
        pytest.skip(f"{request.param} not loadable here (MKL: the [fast] extra): products run numpy's matmul")
    monkeypatch.setattr(blas, "MIN_FLOPS", 0)
    monkeypatch.setattr(blas, "MIN_MATRIX_FLOPS", 0)
    monkeypatch.setenv("SHARDC_BLAS", request.param)
    return request.param
