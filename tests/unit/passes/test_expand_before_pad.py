"""expand-shapes-before-pads (shardc/passes/expand_before_pad.py): the expand_shape of a
pad moves before the pad when it leaves the padded dimensions alone; the program's result
is unchanged (numpy's pad and reshape as the reference)."""

from __future__ import annotations

import numpy as np
import pytest

_PROGRAM = """
func.func @main(%x: tensor<4x3x5xf32>) -> tensor<EXPANDEDxf32> {
  %v = arith.constant 7.000000e+00 : f32
  %p = tensor.pad %x low[0, LOW] high[0, HIGH] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %v : f32
  } : tensor<4x3x5xf32> to tensor<PADDEDxf32>
  %e = tensor.expand_shape %p GROUPS output_shape [OUT] : tensor<PADDEDxf32> into tensor<EXPANDEDxf32>
  return %e : tensor<EXPANDEDxf32>
}
"""


def _program(low: tuple[int, int], high: tuple[int, int], groups: str, out: list[int]) -> str:
    padded = [4, 3 + low[0] + high[0], 5 + low[1] + high[1]]
    return (
        _PROGRAM.replace("LOW", ", ".join(map(str, low)))
        .replace("HIGH", ", ".join(map(str, high)))
        .replace("GROUPS", groups)
        .replace("OUT", ", ".join(map(str, out)))
        .replace("PADDED", "x".join(map(str, padded)))
        .replace("EXPANDED", "x".join(map(str, out)))
    )


def _rewrite(text: str) -> tuple[int, str]:
    from shardc.context import make_context
    from shardc.ir.locations import LocatingParser
    from shardc.ir.printer import module_to_string
    from shardc.passes.expand_before_pad import expand_shapes_before_pads

    module = LocatingParser(make_context(), text, "<test>").parse_module()
    count = expand_shapes_before_pads(module)
    module.verify()
    return count, module_to_string(module)


@pytest.mark.slow
def test_expand_of_unpadded_dimension_moves_before_the_pad() -> None:
    from shardc.launch import run_program

    text = _program((1, 2), (1, 0), "[[0, 1], [2], [3]]", [2, 2, 5, 7])
    count, rewritten = _rewrite(text)
    assert count == 1
    # the expand reads the function's argument, the pad its result
    assert "tensor.expand_shape %arg0 [[0, 1], [2], [3]] output_shape [2, 2, 3, 5]" in rewritten
    assert rewritten.index("tensor.expand_shape") < rewritten.index("tensor.pad")
    assert "low[0, 0, 1, 2] high[0, 0, 1, 0]" in rewritten
    x = np.random.default_rng(0).standard_normal((4, 3, 5)).astype(np.float32)
    want = np.pad(x, [(0, 0), (1, 1), (2, 0)], constant_values=7.0).reshape(2, 2, 5, 7)
    (got,) = run_program(rewritten, [x])
    assert np.array_equal(got, want)
    (before,) = run_program(text, [x])
    assert np.array_equal(before, want)


def test_expand_of_a_padded_dimension_stays() -> None:
    # dimension 1 is padded to 4 rows and split into 2x2: the rows are not the source's
    text = _program((1, 0), (0, 0), "[[0], [1, 2], [3]]", [4, 2, 2, 5])
    count, rewritten = _rewrite(text)
    assert count == 0
    assert rewritten.index("tensor.pad") < rewritten.index("tensor.expand_shape")
