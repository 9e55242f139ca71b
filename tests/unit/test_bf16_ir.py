"""bf16 through the parser and printer: what mlir-opt 22.1.8 prints for the same input
(its output pasted here; tests/oracle/cases/bf16.mlir checks against the binary itself
where the oracle is installed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SOURCE = """
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x3xbf16>) -> (tensor<4x3xf32>, bf16, bf16, bf16, tensor<3xbf16>, tensor<2xbf16>) {
  %t = arith.truncf %a : tensor<4x8xf32> to tensor<4x8xbf16>
  %c = arith.constant dense<1.5> : tensor<4x3xbf16>
  %d = arith.constant dense<[[1.0, 2.0, 3.0], [0.1, -2.5, 1.0e+30], [0.0, -0.0, 3.3], [1.0, 2.0, 3.0]]> : tensor<4x3xbf16>
  %s = arith.constant 0.1 : bf16
  %nan = arith.constant 0x7FC0 : bf16
  %tiny = arith.constant 1.0e-40 : bf16
  %l = arith.constant dense<[0xFF80, 1.00390625, 0x0001]> : tensor<3xbf16>
  %h = arith.constant dense<"0x803F0040"> : tensor<2xbf16>
  %m = linalg.matmul ins(%t, %b : tensor<4x8xbf16>, tensor<8x3xbf16>) outs(%c : tensor<4x3xbf16>) -> tensor<4x3xbf16>
  %x = arith.addf %m, %d : tensor<4x3xbf16>
  %r = arith.extf %x : tensor<4x3xbf16> to tensor<4x3xf32>
  return %r, %s, %nan, %tiny, %l, %h : tensor<4x3xf32>, bf16, bf16, bf16, tensor<3xbf16>, tensor<2xbf16>
}
"""

EXPECTED = """module {
  func.func @f(%arg0: tensor<4x8xf32>, %arg1: tensor<8x3xbf16>) -> (tensor<4x3xf32>, bf16, bf16, bf16, tensor<3xbf16>, tensor<2xbf16>) {
    %0 = arith.truncf %arg0 : tensor<4x8xf32> to tensor<4x8xbf16>
    %cst = arith.constant dense<1.500000e+00> : tensor<4x3xbf16>
    %cst_0 = arith.constant dense<[[1.000000e+00, 2.000000e+00, 3.000000e+00], [1.000980e-01, -2.500000e+00, 1.000260e+30], [0.000000e+00, -0.000000e+00, 3.296880e+00], [1.000000e+00, 2.000000e+00, 3.000000e+00]]> : tensor<4x3xbf16>
    %cst_1 = arith.constant 1.000980e-01 : bf16
    %cst_2 = arith.constant 0x7FC0 : bf16
    %cst_3 = arith.constant 9.183550e-41 : bf16
    %cst_4 = arith.constant dense<[0xFF80, 1.000000e+00, 9.183550e-41]> : tensor<3xbf16>
    %cst_5 = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xbf16>
    %1 = linalg.matmul ins(%0, %arg1 : tensor<4x8xbf16>, tensor<8x3xbf16>) outs(%cst : tensor<4x3xbf16>) -> tensor<4x3xbf16>
    %2 = arith.addf %1, %cst_0 : tensor<4x3xbf16>
    %3 = arith.extf %2 : tensor<4x3xbf16> to tensor<4x3xf32>
    return %3, %cst_1, %cst_2, %cst_3, %cst_4, %cst_5 : tensor<4x3xf32>, bf16, bf16, bf16, tensor<3xbf16>, tensor<2xbf16>
  }
}

"""


def _opt(text: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shardc.tools.opt", *args, "-"], input=text, capture_output=True, text=True, timeout=300)


def test_bf16_prints_as_mlir_opt_does() -> None:
    done = _opt(SOURCE)
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED


def test_bf16_output_is_a_fixed_point() -> None:
    done = _opt(EXPECTED)
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED


def test_large_bf16_constant_prints_as_hex() -> None:
    """Past mlir-opt's elision threshold a dense bf16 list prints as its little-endian blob."""
    values = ", ".join(f"{1.0 + i / 128:.6f}" for i in range(120))
    text = f"func.func @g() -> tensor<120xbf16> {{\n  %c = arith.constant dense<[{values}]> : tensor<120xbf16>\n  return %c : tensor<120xbf16>\n}}\n"
    done = _opt(text)
    assert done.returncode == 0, done.stderr
    blob = "".join(f"{0x3F80 + i:04X}" for i in range(120))  # 1 + i/128: the bf16 bits 0x3F80 + i
    swapped = "".join(blob[k + 2 : k + 4] + blob[k : k + 2] for k in range(0, len(blob), 4))
    assert f'dense<"0x{swapped}"> : tensor<120xbf16>' in done.stdout


@pytest.mark.parametrize("bad", ["arith.constant dense<[1.0, 2.0]> : tensor<3xbf16>", "arith.constant 0x7FC00 : bf16"])
def test_bad_bf16_constants_are_diagnosed(bad: str) -> None:
    done = _opt(f"func.func @h() {{\n  %c = {bad}\n  return\n}}\n")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "error" in done.stderr
