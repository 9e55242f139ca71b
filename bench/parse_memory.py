"""Peak memory of parsing a large dense constant, against the constant's size (issue 32,
item 9; target <= 3x).

A module holding one `arith.constant dense<...>` of about `--mb` MB of text (a literal
list of f32 values, as mlir-opt prints one of up to 100 elements and torch-mlir writes
larger ones), the same data as a hex string, and a splat over a 100000x100000 tensor
(nine characters of data, 40 GB if expanded) is parsed with shardc's parser; the
peak of Python's allocations during the parse (tracemalloc: strings, lists, numpy
buffers) is printed beside the text's size, and the anchor, xDSL's own parser on the
same text, where it fits (`--xdsl`: its list path keeps one object per element).

    python bench/parse_memory.py [--mb 9] [--xdsl]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

import numpy as np


def module_text(body: str, type_text: str) -> str:
    return f"func.func @f() -> {type_text} {{\n  %0 = arith.constant dense<{body}> : {type_text}\n  return %0 : {type_text}\n}}\n"


def measure(parser_class: type, text: str) -> tuple[float, float]:
    """(peak bytes allocated while parsing, seconds of a parse without tracing)."""
    from shardc.context import make_context

    ctx = make_context()
    t0 = time.perf_counter()
    parser_class(ctx, text).parse_module()
    seconds = time.perf_counter() - t0  # timed apart: tracing slows every allocation
    gc.collect()
    tracemalloc.start()
    module = parser_class(ctx, text).parse_module()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del module
    return peak, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=9.0, help="size of the constant's text in MB (default 9)")
    ap.add_argument("--xdsl", action="store_true", help="also parse with xDSL's Parser (slow; GBs at 9 MB)")
    args = ap.parse_args()
    from xdsl.parser import Parser

    from shardc.ir.fast_parser import FastParser

    rng = np.random.default_rng(0)
    cols = 1024
    per_value = len(f"{1.0:e}, ") + 1  # about 14 characters each
    rows = max(1, int(args.mb * 1e6 / per_value / cols))
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    body = "[" + ", ".join("[" + ", ".join(f"{v:e}" for v in row) + "]" for row in values) + "]"
    type_text = f"tensor<{rows}x{cols}xf32>"
    cases = [
        ("list", module_text(body, type_text), len(body)),
        ("hex", module_text(f'"0x{values.tobytes().hex().upper()}"', type_text), 2 * values.nbytes + 4),
        ("splat 100000x100000", module_text("1.0", "tensor<100000x100000xf32>"), 3),
    ]
    print(f"{'constant':<22}{'text MB':>9}{'data MB':>9}{'peak MB':>9}{'peak/text':>10}{'parse s':>9}   parser")
    for name, text, size in cases:
        data = values.nbytes if name != "splat 100000x100000" else 4
        peak, seconds = measure(FastParser, text)
        ratio = f"{peak / size:.2f}x" if size > 1000 else "-"
        print(f"{name:<22}{size / 1e6:>9.2f}{data / 1e6:>9.2f}{peak / 1e6:>9.2f}{ratio:>10}{seconds:>9.2f}   shardc FastParser")
        if args.xdsl and name == "list" and size <= 2e6:
            peak, seconds = measure(Parser, text)
            print(f"{name:<22}{size / 1e6:>9.2f}{data / 1e6:>9.2f}{peak / 1e6:>9.2f}{peak / size:>9.2f}x{seconds:>9.2f}   xDSL Parser (anchor)")


if __name__ == "__main__":
    main()
