"""A printer that prints the way mlir-opt prints (filled in by the printer work)."""

from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer


class MLIRPrinter(Printer):
    """xDSL's printer adjusted to mlir-opt's output conventions."""


def print_module(
    module: ModuleOp,
    stream: IO[str],
    *,
    generic: bool = False,
    debuginfo: bool = False,
) -> None:
    """Print a module as mlir-opt would, with a trailing newline."""
    printer = MLIRPrinter(stream=stream, print_generic_format=generic, print_debuginfo=debuginfo)
    printer.print_op(module)
    stream.write("\n")
