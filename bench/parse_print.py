"""Parse + print throughput of shardc against mlir-opt on one generated file.

Generates a module of func/arith/tensor/linalg (and shard, when the dialect loads) ops,
then times, interleaved, for the same file in the same run:
  * shardc in-process: parse with shardc-opt's parser (`LocatingParser`: file
    locations, MLIR affine expressions, the fast paths of `shardc.ir.fast_parser`) and
    with xDSL's plain `Parser`; print with `print_module` and with xDSL's `Printer`;
  * `shardc-opt file` as a process;
  * `mlir-opt file` as a process.
Times are CPU seconds (user + system, children included for processes), so a busy
machine does not skew the ratios. Prints ops/second (median of the runs) and ratios to
mlir-opt, then the scaling of shardc's in-process parse, verify and print over programs
of about 500 to 8,000 ops (microseconds per op: flat columns mean linear). Not a test.

    python bench/parse_print.py [--funcs 400] [--runs 3] [--scaling 5,9,18,36,72]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from io import StringIO

from xdsl.parser import Parser
from xdsl.printer import Printer

from shardc.context import make_context
from shardc.ir.locations import LocatingParser
from shardc.ir.printer import print_module
from shardc.testing.oracle import _env, find_mlir_opt  # pyright: ignore[reportPrivateUsage]

MAP = "affine_map<(d0, d1) -> (d0, d1)>"


def shard_available() -> bool:
    try:
        make_context().get_op("shard.sharding")
    except Exception:
        return False
    return True


def function(i: int, with_shard: bool) -> str:
    """One function of ~50 ops: elementwise and contraction work on 2-D tensors."""
    lines = [f"func.func @f{i}(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {{"]
    lines.append("  %c0 = arith.constant 0 : index")
    lines.append("  %zero = arith.constant 0.0 : f32")
    lines.append("  %e = tensor.empty() : tensor<64x64xf32>")
    lines.append("  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>")
    prev = "%a"
    for k in range(8):
        if with_shard:
            lines.append(f"  %s{k} = shard.sharding @grid split_axes = [[0], []] : !shard.sharding")
            lines.append(f"  %h{k} = shard.shard {prev} to %s{k} : tensor<64x64xf32>")
            prev = f"%h{k}"
        lines.append(
            f"  %m{k} = linalg.matmul ins({prev}, %b : tensor<64x64xf32>, tensor<64x64xf32>) "
            "outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>"
        )
        lines.append(
            f"  %g{k} = linalg.generic {{indexing_maps = [{MAP}, {MAP}], iterator_types = "
            f'["parallel", "parallel"]}} ins(%m{k} : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {{\n'
            "  ^bb0(%x: f32, %o: f32):\n"
            "    %t = math.tanh %x : f32\n"
            "    %y = arith.addf %t, %x : f32\n"
            "    linalg.yield %y : f32\n"
            "  } -> tensor<64x64xf32>"
        )
        lines.append(
            f"  %sl{k} = tensor.extract_slice %g{k}[0, 0] [32, 64] [1, 1] : tensor<64x64xf32> to tensor<32x64xf32>"
        )
        lines.append(
            f"  %in{k} = tensor.insert_slice %sl{k} into %g{k}[32, 0] [32, 64] [1, 1] : "
            "tensor<32x64xf32> into tensor<64x64xf32>"
        )
        lines.append(f"  %d{k} = tensor.dim %in{k}, %c0 : tensor<64x64xf32>")
        prev = f"%in{k}"
    lines.append(f"  return {prev} : tensor<64x64xf32>")
    lines.append("}")
    return "\n".join(lines)


def generate(funcs: int, with_shard: bool) -> str:
    head = "shard.grid @grid(shape = 4)\n" if with_shard else ""
    return head + "\n".join(function(i, with_shard) for i in range(funcs)) + "\n"


def count_ops(text: str) -> int:
    module = Parser(make_context(), text).parse_module()
    return sum(1 for _ in module.walk())


def _cpu() -> float:
    """CPU seconds of this process and of its finished children."""
    me, kids = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.user + me.system + kids.ru_utime + kids.ru_stime


def timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = _cpu()
    fn()
    return _cpu() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--funcs", type=int, default=400)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scaling", default="5,9,18,36,72", help="function counts of the scaling table ('' for none)")
    args = ap.parse_args()

    with_shard = shard_available()
    text = generate(args.funcs, with_shard)
    ops = count_ops(text)
    fd, path = tempfile.mkstemp(suffix=".mlir")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    mlir_opt = find_mlir_opt()
    print(f"{ops} ops in {args.funcs} functions ({len(text) // 1024} KiB), shard ops: {with_shard}")

    ctx = make_context()

    def parse():  # type: ignore[no-untyped-def]
        return LocatingParser(ctx, text, path).parse_module()

    def xdsl_parse() -> None:
        Parser(ctx, text, path).parse_module()

    module = parse()

    def xdsl_print() -> None:
        Printer(stream=StringIO()).print_op(module)

    def mlir_print() -> None:
        print_module(module, StringIO())

    def shardc_process() -> None:
        # time the parse and print, not shardc-opt's result cache answering a repeat
        subprocess.run(["shardc-opt", path, "-o", os.devnull], check=True, env=dict(os.environ, SHARDC_CACHE="0"))

    def mlir_process() -> None:
        assert mlir_opt is not None
        subprocess.run([mlir_opt, path, "-o", os.devnull], check=True, env=_env(mlir_opt))

    cases = {
        "shardc parse (in-process)": parse,
        "xDSL Parser parse (in-process)": xdsl_parse,
        "shardc print, mlir-opt style": mlir_print,
        "xDSL print, own style": xdsl_print,
        "shardc-opt process (parse+verify+print)": shardc_process,
    }
    if mlir_opt:
        cases["mlir-opt process (parse+verify+print)"] = mlir_process
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):  # interleaved, so machine noise hits every case alike
        for name, fn in cases.items():
            times[name].append(timed(fn))

    med = {name: statistics.median(t) for name, t in times.items()}
    med["shardc parse+print (in-process)"] = med["shardc parse (in-process)"] + med["shardc print, mlir-opt style"]
    ref = med.get("mlir-opt process (parse+verify+print)")
    for name, t in med.items():
        ratio = f"  {t / ref:8.1f}x mlir-opt" if ref else ""
        print(f"{name:42s} {t * 1000:9.1f} ms {ops / t:12,.0f} ops/s{ratio}")
    print(f"printing overhead over xDSL's Printer: {med['shardc print, mlir-opt style'] / med['xDSL print, own style']:.2f}x")
    print(f"parse speed-up over xDSL's Parser: {med['xDSL Parser parse (in-process)'] / med['shardc parse (in-process)']:.2f}x")
    os.unlink(path)
    sizes = [int(n) for n in args.scaling.split(",") if n.strip()]
    if sizes:
        scaling(ctx, with_shard, sizes, args.runs)


def scaling(ctx, with_shard: bool, sizes: list[int], runs: int) -> None:  # type: ignore[no-untyped-def]
    """Parse, verify and print per op at growing sizes (median CPU of `runs`)."""
    from shardc.ir import diagnostics
    from shardc.ir.diagnostics import DiagnosticEngine
    from shardc.ir.verifier import verify

    print("\nscaling, in-process CPU microseconds per op (flat = linear)")
    print(f"{'ops':>7s}{'parse':>9s}{'verify':>9s}{'print':>9s}")
    with diagnostics.engine_scope(DiagnosticEngine(stream=sys.stderr)):
        for funcs in sizes:
            text = generate(funcs, with_shard)
            ops = count_ops(text)
            cells: dict[str, list[float]] = {"parse": [], "verify": [], "print": []}

            def timed(fn) -> float:  # type: ignore[no-untyped-def]  # finer than os.times
                start = time.process_time()
                fn()
                return time.process_time() - start

            for _ in range(runs):
                holder: list = []
                cells["parse"].append(timed(lambda: holder.append(LocatingParser(ctx, text, "s.mlir").parse_module())))
                module = holder[0]
                cells["verify"].append(timed(lambda: verify(module)))
                cells["print"].append(timed(lambda: print_module(module, StringIO())))
            row = "".join(f"{statistics.median(v) / ops * 1e6:9.1f}" for v in cells.values())
            print(f"{ops:7d}{row}")


if __name__ == "__main__":
    sys.exit(main())
