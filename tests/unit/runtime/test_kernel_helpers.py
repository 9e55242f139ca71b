"""The compiled kernels' shared machinery (`kernels/fused_run.py`): the fused and row
kernels' helpers jit-compiled by one function, a kernel's identity made in one place,
and `KernelRefused`, the one error a caller takes its numpy path on (anything else,
`UnsafeCodeError` first, reaches the user: tests/unit/security/test_kernel_sources.py)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from shardc.runtime.execute import horizontal_run
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.execute.kernels import fused_run, rows_run, vecmath
from shardc.runtime.execute.structured_run import StructuredSpec

needs_numba = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")

SRC = "def kernel(q0, w0):\n    n = w0.shape\n    for i0 in range(n[0]):\n        w0[i0] = q0[i0] * np.float32(3)\n"
PROGRAM = """
func.func @f(%x: tensor<64x64xf32>, %y: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %y : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %a : f32
    %t = arith.mulf %s, %s : f32
    linalg.yield %t : f32
  } -> tensor<64x64xf32>
  return %r : tensor<64x64xf32>
}
"""


@needs_numba
def test_both_kinds_of_helpers_come_from_one_function_with_their_source_hash(monkeypatch, tmp_path):
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fused_run, "_HELPERS", {})
    kinds: list[str] = []
    real = fused_run.jit_helpers
    monkeypatch.setattr(fused_run, "jit_helpers", lambda kind, *a: kinds.append(kind) or real(kind, *a))
    h1, f1 = fused_run.kernel_helpers()  # pyright: ignore[reportPrivateUsage]
    h2, f2 = rows_run._row_helpers()  # pyright: ignore[reportPrivateUsage]
    assert kinds == ["helpers", "rowhelpers"]
    assert set(f1) == {"exp32", "tanh32", "erf32"} and set(f2) == {"rsum32", "rsum64", "rnan", "rmax", "rmin"}
    files = {p.name[0]: p for p in (tmp_path / "kernels").glob("*.py")}  # h_ (helpers), r_ (rowhelpers)
    assert hashlib.sha256(files["h"].read_text().encode()).hexdigest() == h1
    assert hashlib.sha256(files["r"].read_text().encode()).hexdigest() == h2
    b = np.array([1.0, np.nan, 3.0], np.float32)
    assert np.isnan(f2["rmax"](b, 3, np.float32(-np.inf)))  # rmax calls the compiled rnan
    assert f2["rsum32"](np.ones(5, np.float32), 5, np.float32(1)) == 6
    assert abs(f1["exp32"](1.0) - np.e) < 1e-6
    assert fused_run.kernel_helpers() is not None and kinds == ["helpers", "rowhelpers", "helpers"]  # kept: nothing compiled again
    assert len(fused_run._HELPERS) == 2  # pyright: ignore[reportPrivateUsage]


@needs_numba
def test_a_kernels_file_is_named_by_vecmath_its_helpers_and_its_source(monkeypatch, tmp_path):
    """What a kernel calls is part of its identity (numba's cache sees only its text):
    the row kernel's file name hashes vecmath's version, both helper kits and the source."""
    monkeypatch.setenv("SHARDC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(rows_run, "_COMPILED", {})
    monkeypatch.setattr(fused_run, "_COMPILED", {})
    h1, _ = fused_run.kernel_helpers()  # pyright: ignore[reportPrivateUsage]
    h2, _ = rows_run._row_helpers()  # pyright: ignore[reportPrivateUsage]
    out = np.empty(4, np.float32)
    rows_run._compile(SRC)(np.arange(4, dtype=np.float32), out)  # pyright: ignore[reportPrivateUsage]
    fused_run.compile_kernel(SRC)(np.arange(4, dtype=np.float32), out)  # pyright: ignore[reportPrivateUsage]
    assert np.array_equal(out, [0, 3, 6, 9])
    for kind, ids in (("rowkernel", [h1, h2]), ("kernel", [h1])):
        digest = hashlib.sha256("\n".join([vecmath.VERSION, *ids, SRC]).encode()).hexdigest()[:24]
        assert (tmp_path / "kernels" / f"{kind[0]}_{digest}.py").read_text() == SRC


def _boom(*a, **k):  # type: ignore[no-untyped-def]
    raise OSError("disk full")


@needs_numba
def test_a_refused_kernel_takes_the_numpy_path_everywhere(monkeypatch):
    """numba (or writing its file) failing is `KernelRefused`: the fused kernel, the row
    kernel and the grouped update each take their numpy path, with the same results."""
    monkeypatch.setattr(fused_run, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(rows_run, "MIN_ELEMENTS", 0)
    monkeypatch.setattr(fused_run, "_COMPILED", {})
    monkeypatch.setattr(rows_run, "_COMPILED", {})
    monkeypatch.setattr(fused_run, "_module", _boom)
    with pytest.raises(fused_run.KernelRefused, match="disk full"):
        fused_run.njit_kernel("kernel", SRC, ())
    cm = compile_text(PROGRAM)
    (spec,) = [v for v in cm.functions["f"].__globals__.values() if isinstance(v, StructuredSpec) and v.kind == "elementwise"]
    assert spec.fused is not None
    x, y = (np.random.default_rng(k).standard_normal((64, 64)).astype(np.float32) for k in range(2))
    assert spec.fused([x, y, np.empty_like(x)], (64, 64)) is None and spec.fused._failed  # pyright: ignore[reportPrivateUsage]
    np.testing.assert_array_equal(cm.call("f", x, y), ((x * y + x) * (x * y + x)))
    row = rows_run.RowKernel(SRC, (64, 64), [("array", 0)], [((64, 64), "float32")], {0: (64, 64)})
    assert row([x]) is None and row._failed  # pyright: ignore[reportPrivateUsage]
    group = horizontal_run.Group(members=[], source=SRC)
    assert horizontal_run._load(group) is False and group._failed  # pyright: ignore[reportPrivateUsage]


def test_errors_other_than_a_refusal_reach_the_caller(monkeypatch):
    """Only `KernelRefused` is caught: a bug elsewhere is not hidden behind the numpy path."""
    monkeypatch.setattr(fused_run, "compile_kernel", lambda src: (_ for _ in ()).throw(ValueError("a bug")))
    group = horizontal_run.Group(members=[], source=SRC)
    with pytest.raises(ValueError, match="a bug"):
        horizontal_run._load(group)  # pyright: ignore[reportPrivateUsage]
    assert not group._failed  # pyright: ignore[reportPrivateUsage]


def test_the_kernels_switch_is_read_on_every_call(monkeypatch):
    """`enabled` keeps its answer only while `SHARDC_KERNELS` is unchanged: every write
    through `os.environ` (set, changed, removed) is seen by the next call."""
    monkeypatch.delenv("SHARDC_KERNELS", raising=False)
    on = fused_run._numba() is not None  # pyright: ignore[reportPrivateUsage]
    assert fused_run.enabled() is on and fused_run.enabled() is on
    for value, want in (("numpy", False), ("NumPy", False), ("auto", on), ("", on), ("numpy", False)):
        monkeypatch.setenv("SHARDC_KERNELS", value)
        assert fused_run.enabled() is want, value
        assert fused_run.enabled() is want, value
    monkeypatch.delenv("SHARDC_KERNELS")
    assert fused_run.enabled() is on
