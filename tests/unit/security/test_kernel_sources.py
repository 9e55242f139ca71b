"""Kernel sources are data until checked: a cache hit takes the fused and row kernels'
source text from the entry, and compiling it runs it as a module. A forged text is
refused (UnsafeCodeError, nothing of it runs) instead of compiled, or quietly sent to the
numpy path where a forgery would go unnoticed."""

from __future__ import annotations

import numpy as np
import pytest

from shardc.runtime.execute.code_check import UnsafeCodeError
from shardc.runtime.codegen.compile import compile_text
from shardc.runtime.execute.kernels import fused_run, rows_run
from shardc.runtime.execute.structured_run import StructuredSpec

pytestmark = pytest.mark.skipif(fused_run._numba() is None, reason="numba (the [fast] extra) is not installed")  # pyright: ignore[reportPrivateUsage]

N = 256  # 64K elements: above both kernels' size floors


def hostile(marker) -> str:
    return f"import os\nopen({str(marker)!r}, 'w').close()\ndef kernel(*args):\n    pass\n"


PROGRAM = f"""
func.func @f(%a: tensor<{N}x{N}xf32>, %b: tensor<{N}x{N}xf32>) -> tensor<{N}x{N}xf32> {{
  %e = tensor.empty() : tensor<{N}x{N}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}}
      ins(%a, %b : tensor<{N}x{N}xf32>, tensor<{N}x{N}xf32>) outs(%e : tensor<{N}x{N}xf32>) {{
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = math.exp %s : f32
    linalg.yield %t : f32
  }} -> tensor<{N}x{N}xf32>
  return %r : tensor<{N}x{N}xf32>
}}
"""


def test_a_forged_fused_kernel_source_is_refused_before_it_runs(tmp_path):
    cm = compile_text(PROGRAM)
    (spec,) = [v for v in cm.functions["f"].__globals__.values() if isinstance(v, StructuredSpec) and v.kind == "elementwise"]
    kernel = spec.fused
    assert kernel is not None
    nests = [st for st in kernel.stages if st.source is not None]
    assert nests
    marker = tmp_path / "ran"
    for st in nests:  # what a forged entry would decode to: its text, nothing compiled yet
        st.source, st.fn = hostile(marker), None
    a = np.ones((N, N), np.float32)
    with pytest.raises(UnsafeCodeError):
        kernel([a, a, np.empty_like(a)], (N, N))
    assert not marker.exists()


def test_a_forged_row_kernel_source_is_refused_before_it_runs(tmp_path):
    marker = tmp_path / "ran"
    kernel = rows_run.RowKernel(hostile(marker), (N, N), [("array", 0)], [((N, N), "float32")], {0: (N, N)})
    with pytest.raises(UnsafeCodeError):
        kernel([np.ones((N, N), np.float32)])
    assert not marker.exists()
    assert kernel.fn is None


def test_a_forged_grouped_update_kernel_source_is_refused_before_it_runs(tmp_path):
    from shardc.runtime.execute import horizontal_run

    marker = tmp_path / "ran"
    group = horizontal_run.Group(members=[], source=hostile(marker))
    with pytest.raises(UnsafeCodeError):
        horizontal_run._load(group)  # pyright: ignore[reportPrivateUsage]
    assert not marker.exists() and group.fn is None
