"""tm_tensor.scan on the numpy runtime against PyTorch's cumulative ops and numpy (the
scalar definition of torch-mlir's ScanOp, written out per step): every combiner kind,
inclusive and exclusive, a general region, and torch-mlir's own export of cumsum."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.launch import ProgramError, run_program

SCAN = """\
func.func @main(%x: tensor<{shape}x{t}>, %acc: tensor<{acc_shape}{t}>) -> (tensor<{shape}x{t}>, tensor<{acc_shape}{t}>) {{
  %o = tensor.empty() : tensor<{shape}x{t}>
  %r:2 = tm_tensor.scan dimension({dim}) inclusive({inclusive}) ins(%x : tensor<{shape}x{t}>) outs(%o, %acc : tensor<{shape}x{t}>, tensor<{acc_shape}{t}>) {{
  ^bb0(%prev: {t}, %cur: {t}):
{body}
    tm_tensor.yield %s : {t}
  }} -> tensor<{shape}x{t}>, tensor<{acc_shape}{t}>
  return %r#0, %r#1 : tensor<{shape}x{t}>, tensor<{acc_shape}{t}>
}}
"""


def scan_program(shape: tuple[int, ...], dim: int, t: str, body: str, inclusive: bool) -> str:
    acc = [n for d, n in enumerate(shape) if d != dim]
    return SCAN.format(
        shape="x".join(map(str, shape)), acc_shape="".join(f"{n}x" for n in acc), t=t, dim=dim,
        inclusive="true" if inclusive else "false", body=body,
    )


def reference(step, x: np.ndarray, acc: np.ndarray, dim: int, inclusive: bool) -> tuple[np.ndarray, np.ndarray]:
    """torch-mlir's ScanOp, one step at a time along `dim`."""
    xs = np.moveaxis(x, dim, 0)
    out = np.empty_like(xs)
    out[0] = xs[0] if inclusive else acc
    for i in range(1, len(xs)):
        out[i] = step(out[i - 1], xs[i] if inclusive else xs[i - 1])
    last = out[-1] if len(xs) > 1 else acc
    return np.moveaxis(out, 0, dim), last


COMBINERS = {
    "addf": ("    %s = arith.addf %prev, %cur : f32", lambda a, b: a + b, "cumsum"),
    "mulf": ("    %s = arith.mulf %cur, %prev : f32", lambda a, b: a * b, "cumprod"),
    "maximumf": ("    %s = arith.maximumf %prev, %cur : f32", np.maximum, "cummax"),
    "minimumf": ("    %s = arith.minimumf %cur, %prev : f32", np.minimum, "cummin"),
}


@pytest.mark.parametrize("name", sorted(COMBINERS))
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_inclusive_scan_matches_torch(name: str, dim: int) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    body, _, torch_op = COMBINERS[name]
    rng = np.random.default_rng(dim)
    x = rng.uniform(0.5, 1.5, (3, 5, 4)).astype(np.float32) * rng.choice([-1, 1], (3, 5, 4)).astype(np.float32)
    acc = np.zeros([n for d, n in enumerate(x.shape) if d != dim], np.float32)
    out, last = run_program(scan_program(x.shape, dim, "f32", body, True), [x, acc])
    expected = getattr(torch, torch_op)(torch.from_numpy(x), dim)
    expected = (expected.values if torch_op in ("cummax", "cummin") else expected).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(last, expected.take(x.shape[dim] - 1, axis=dim), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(COMBINERS))
def test_exclusive_scan_starts_from_the_accumulator(name: str) -> None:
    body, step, _ = COMBINERS[name]
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    acc = rng.standard_normal(4).astype(np.float32)
    out, last = run_program(scan_program(x.shape, 1, "f32", body, False), [x, acc])
    want_out, want_last = reference(step, x, acc, 1, False)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(last, want_last)


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize(
    "body, step",
    [
        ("    %s = arith.addi %prev, %cur : i64", lambda a, b: a + b),
        ("    %s = arith.maxsi %cur, %prev : i64", np.maximum),
        ("    %s = arith.xori %prev, %cur : i64", np.bitwise_xor),
        ("    %s = arith.subi %prev, %cur : i64", lambda a, b: a - b),
        # not one op of (previous, current): stepped along the dimension on whole slices
        ("    %s = arith.subi %cur, %prev : i64", lambda a, b: b - a),
        ("    %d = arith.muli %cur, %cur : i64\n    %s = arith.addi %prev, %d : i64", lambda a, b: a + b * b),
    ],
)
def test_integer_and_general_regions(body: str, step, inclusive: bool) -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-9, 9, (5, 3)).astype(np.int64)
    acc = rng.integers(-9, 9, 3).astype(np.int64)
    out, last = run_program(scan_program(x.shape, 0, "i64", body, inclusive), [x, acc])
    want_out, want_last = reference(step, x, acc, 0, inclusive)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(last, want_last)


def test_single_step_keeps_the_initial_accumulator() -> None:
    """With one element along the dimension no step after the first writes the
    accumulator: it comes back as it went in (torch-mlir's scalar implementation)."""
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    acc = np.array([5.0, 6.0, 7.0], np.float32)
    out, last = run_program(scan_program(x.shape, 0, "f32", COMBINERS["addf"][0], True), [x, acc])
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(last, acc)


def test_memref_scan_is_refused_with_a_diagnostic(capfd: pytest.CaptureFixture[str]) -> None:
    text = """\
func.func @main(%x: memref<4xf32>, %o: memref<4xf32>, %a: memref<f32>) {
  tm_tensor.scan dimension(0) inclusive(true) ins(%x : memref<4xf32>) outs(%o, %a : memref<4xf32>, memref<f32>) {
  ^bb0(%p: f32, %q: f32):
    %s = arith.addf %p, %q : f32
    tm_tensor.yield %s : f32
  }
  return
}
"""
    z = np.zeros(4, np.float32)
    with pytest.raises(ProgramError) as e:
        run_program(text, [z, z.copy(), np.zeros((), np.float32)])
    said = str(e.value) + capfd.readouterr().err  # the diagnostic goes to stderr today
    assert "'tm_tensor.scan' at loc(" in said and "tm_tensor.scan on memrefs is not supported" in said


@pytest.mark.slow
@pytest.mark.parametrize("dim, dtype", [(1, "float32"), (0, "int64"), (-1, "float32")])
def test_torch_mlir_cumsum_export_runs(dim: int, dtype: str) -> None:
    """torch-mlir's own output for `torch.cumsum`, as it prints it, against PyTorch."""
    torch = pytest.importorskip("torch", reason="torch is not installed: pip install -e '.[torch]'")
    fx = pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed: pip install -e '.[torch]'")

    class Cumsum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim)

    x = torch.arange(24).reshape(2, 3, 4).to(getattr(torch, dtype)) - 7
    text = str(fx.export_and_import(Cumsum(), x, output_type="linalg-on-tensors"))
    assert "tm_tensor.scan" in text
    (out,) = run_program(text, [x.numpy()])
    np.testing.assert_array_equal(out, torch.cumsum(x, dim).numpy())


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize(
    "body, step",
    [
        ("    %s = arith.addi %prev, %cur : i1", np.bitwise_xor),  # i1 addition wraps
        ("    %s = arith.maxsi %prev, %cur : i1", np.bitwise_and),  # signed: true is -1
        ("    %s = arith.ori %cur, %prev : i1", np.bitwise_or),
    ],
)
def test_i1_scans_follow_arith_not_numpy_bools(body: str, step, inclusive: bool) -> None:
    x = np.array([[True, False, True, True, False], [False, True, True, False, True]])
    acc = np.array([True, False])
    out, last = run_program(scan_program(x.shape, 1, "i1", body, inclusive), [x, acc])
    want_out, want_last = reference(step, x, acc, 1, inclusive)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(last, want_last)
