"""Dense constants held in proportion to their data (issue 32, item 9): literal lists and
hex strings read into buffers, large splats held as one element (`shardc.ir.dense`),
printed exactly as xDSL's parser and printer print them, and run without expanding
what the program does not read."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.parser import Parser

from shardc.context import make_context
from shardc.ir.dense import COMPACT_SPLAT_BYTES, is_compact, splat_attr
from shardc.ir.fast_parser import FastParser
from shardc.ir.printer import module_to_string


def _module(constant: str) -> str:
    return f"func.func @f() {{\n  %0 = arith.constant {constant}\n  return\n}}\n"


def _parse(parser_class: type, text: str) -> str:
    try:
        return module_to_string(parser_class(make_context(), text).parse_module())
    except Exception as e:  # the outcome compared: which error, not its traceback
        return f"error: {type(e).__name__}"


def _constant(text: str):
    (op,) = [op for op in FastParser(make_context(), text).parse_module().walk() if isinstance(op, arith.ConstantOp)]
    return op.value


_rng = np.random.default_rng(7)
_FLOATS = ", ".join(f"{v:e}" for v in _rng.standard_normal(300))
_INTS = ", ".join("[" + ", ".join(str(int(v)) for v in row) + "]" for row in _rng.integers(-(2**31), 2**31, (12, 25)))


@pytest.mark.parametrize(
    "constant",
    [
        "dense<1.0> : tensor<4x4xf32>",
        "dense<-0.0> : tensor<2xf64>",
        "dense<3> : tensor<3xi32>",
        "dense<255> : tensor<3xi8>",
        "dense<3> : tensor<5xf16>",
        "dense<[1.0, 2.5, -3.25e-3, 4]> : tensor<4xf32>",
        "dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>",
        "dense<[[1, 2], [3, 4]]> : tensor<2x2xindex>",
        "dense<[1.5, 2.0]> : tensor<2xf16>",
        "dense<[200, -100]> : tensor<2xi8>",
        "dense<[65535, 1]> : tensor<2xui16>",
        "dense<[[1.0], [2.0]]> : tensor<2x1xf32>",
        "dense<[1.0, 1.0, 1.0]> : tensor<3xf32>",
        'dense<"0x0000803F"> : tensor<4xf32>',
        'dense<"0x0000803F00000040"> : tensor<2xf32>',
        "dense<7> : tensor<30000xi32>",
        "dense<1.0> : tensor<f32>",
        "dense<[]> : tensor<0xf32>",
        "dense<true> : tensor<2xi1>",
        "dense<[0.1, 1e-45]> : tensor<2xf32>",  # not an MLIR float literal: xDSL's error
        "dense<[1, 2, 3]> : tensor<2xi32>",  # shape mismatch: xDSL's error
        "dense<[[1, 2], [3]]> : tensor<2x2xi32>",
        "dense<[1.5]> : tensor<1xi32>",
        "dense<[1,, 2]> : tensor<3xf32>",
        "dense<[1.0e39]> : tensor<1xf32>",
        "dense<[9223372036854775807, 0]> : tensor<2xi64>",
        "dense<[18446744073709551615, 0]> : tensor<2xi64>",
        f"dense<[{_FLOATS}]> : tensor<300xf32>",
        f"dense<[{_FLOATS}]> : tensor<300xf64>",
        f"dense<[{_INTS}]> : tensor<12x25xi32>",
    ],
)
def test_printed_and_refused_as_xdsl_parses_them(constant):
    text = _module(constant)
    assert _parse(FastParser, text) == _parse(Parser, text)


def test_splat_is_held_as_one_element_and_printed_as_before():
    text = _module("dense<1.0> : tensor<100000x100000xf32>")
    tracemalloc.start()
    value = _constant(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes to parse a splat"
    assert value.data.data == np.float32(1.0).tobytes() and is_compact(value)
    assert "arith.constant dense<1.000000e+00> : tensor<100000x100000xf32>" in module_to_string(FastParser(make_context(), text).parse_module())
    # a small splat keeps every element, as xDSL makes it (passes read their values)
    small = _constant(_module("dense<2.0> : tensor<4x4xf32>"))
    assert len(small.data.data) == 64 and not is_compact(small)


def test_splats_made_by_passes_equal_parsed_ones():
    big = _constant(_module("dense<0.5> : tensor<512x512xf32>"))
    assert is_compact(big) and splat_attr(big.get_type(), 0.5) == big
    small = _constant(_module("dense<3> : tensor<4xi32>"))
    assert splat_attr(small.get_type(), 3) == small
    equal = ", ".join(["2.5"] * (COMPACT_SPLAT_BYTES // 4 + 1))
    as_list = _constant(_module(f"dense<[{equal}]> : tensor<{COMPACT_SPLAT_BYTES // 4 + 1}xf32>"))
    assert is_compact(as_list) and as_list == splat_attr(as_list.get_type(), 2.5)


@pytest.mark.slow
def test_literal_list_parses_in_a_few_times_its_size():
    rng = np.random.default_rng(0)
    values = rng.standard_normal((160, 1024)).astype(np.float32)
    body = ", ".join("[" + ", ".join(f"{v:e}" for v in row) + "]" for row in values)
    text = _module(f"dense<[{body}]> : tensor<160x1024xf32>")
    _constant(text)  # imports and first-use caches outside the measurement
    tracemalloc.start()
    value = _constant(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= 3 * len(body), f"{peak / 1e6:.1f} MB for {len(body) / 1e6:.1f} MB of text"
    got = np.frombuffer(value.data.data, np.float32).reshape(160, 1024)
    want = np.array([[float(f"{v:e}") for v in row] for row in values], np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.slow
def test_runtime_reads_a_large_splat_without_expanding_dead_ones():
    from shardc.runtime.codegen.compile import compile_text

    text = """func.func @f(%a: tensor<300x300xf32>) -> tensor<300x300xf32> {
  %c = arith.constant dense<2.5> : tensor<300x300xf32>
  %dead = arith.constant dense<1.0> : tensor<100000x100000xf32>
  %r = arith.mulf %a, %c : tensor<300x300xf32>
  return %r : tensor<300x300xf32>
}
"""
    tracemalloc.start()
    cm = compile_text(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20  # the 40 GB constant is one element
    a = np.arange(90000, dtype=np.float32).reshape(300, 300)
    np.testing.assert_array_equal(cm.call("f", a), a * np.float32(2.5))


def test_cache_stores_a_broadcast_splat_as_one_element():
    from shardc.runtime.codegen import cache

    splat = np.broadcast_to(np.float32(3.0).reshape(1, 1), (50000, 50000))
    data = cache.dump_bindings({"_cst_1": splat})
    assert len(data) < 4096
    back = cache.load_bindings(data)["_cst_1"]
    assert back.shape == (50000, 50000) and back.strides == (0, 0) and not back.flags.writeable and back[123, 456] == 3.0


def _printed(attr, fast: bool) -> str:
    import io

    from shardc.ir.printer import MLIRPrinter

    class ElementByElement(MLIRPrinter):
        def _print_large_dense(self, attr):  # the printer as it was: xDSL's, a value at a time
            return False

    out = io.StringIO()
    (MLIRPrinter if fast else ElementByElement)(stream=out).print_attribute(attr)
    return out.getvalue()


_PRINT_CASES = [(d, k) for d in ("float32", "float64", "float16") for k in ("random", "equal", "signed zeros", "nan")] + [
    (d, k) for d in ("int8", "int32", "int64") for k in ("random", "equal")
]


@pytest.mark.parametrize("n", [100, 101, 300])
@pytest.mark.parametrize("dtype,kind", _PRINT_CASES)
def test_large_constants_print_from_their_buffer_as_before(dtype, n, kind):
    from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, TensorType, f16, f32, f64, i8, i32, i64

    element = {"float32": f32, "float64": f64, "float16": f16, "int8": i8, "int32": i32, "int64": i64}[dtype]
    dt = np.dtype(dtype)
    values = {
        "random": lambda: (np.random.default_rng(n).standard_normal(n) * 100).clip(-120, 120).astype(dt),
        "equal": lambda: np.full(n, 7, dt),
        "signed zeros": lambda: np.where(np.arange(n) % 2 == 0, -0.0, 0.0).astype(dt),  # equal values: xDSL prints a splat
        "nan": lambda: np.full(n, np.nan, dt),  # never equal: xDSL prints the bytes
    }[kind]()
    attr = DenseIntOrFPElementsAttr(TensorType(element, [n]), BytesAttr(values.tobytes()))
    assert _printed(attr, fast=True) == _printed(attr, fast=False)


def test_folders_read_large_constants_from_their_buffer(tmp_path, capsys):
    """tensor.extract of a large constant folds to the element at its index (a compact
    splat's at any index), and tosa.add of a large zero splat folds away, as on small
    constants (MLIR's folders)."""
    from shardc.ir import dense
    from shardc.tools.opt import main as opt_main

    values = np.arange(300 * 400, dtype=np.float32).reshape(300, 400) / 7
    source = tmp_path / "fold.mlir"
    source.write_text(f"""func.func @f(%x: tensor<300x400xf32>) -> (f32, f32, tensor<300x400xf32>) {{
  %c = arith.constant dense<"0x{values.tobytes().hex().upper()}"> : tensor<300x400xf32>
  %s = arith.constant dense<0.0> : tensor<300x400xf32>
  %i = arith.constant 123 : index
  %j = arith.constant 45 : index
  %a = tensor.extract %c[%i, %j] : tensor<300x400xf32>
  %b = tensor.extract %s[%i, %j] : tensor<300x400xf32>
  %t = tosa.add %x, %s : (tensor<300x400xf32>, tensor<300x400xf32>) -> tensor<300x400xf32>
  return %a, %b, %t : f32, f32, tensor<300x400xf32>
}}
""")
    assert opt_main([str(source), "--canonicalize"]) == 0
    printed = capsys.readouterr().out
    body = printed[printed.index("func.func") :]
    assert f"arith.constant {float(values[123, 45]):.6e} : f32" in body, body
    assert "arith.constant 0.000000e+00 : f32" in body
    assert "tosa.add" not in body and "tensor.extract" not in body
    assert dense.is_splat(_constant(_module("dense<0.0> : tensor<300x400xf32>")))
    assert not dense.is_splat(_constant(_module(f'dense<"0x{values.tobytes().hex()}"> : tensor<300x400xf32>')))
