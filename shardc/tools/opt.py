"""`shardc-opt`: a drop-in for mlir-opt on the shard dialect, built on xDSL's opt main."""

import sys
from collections.abc import Sequence
from io import StringIO

from xdsl.dialects.builtin import ModuleOp

from xdsl.xdsl_opt_main import xDSLOptMain

from shardc.context import register_dialects
from shardc.ir.printer import print_module
from shardc.passes import all_passes


class ShardcOptMain(xDSLOptMain):
    version_format = "shardc-opt (shardc, on xdsl {xdsl_version})"

    def __init__(self, args: Sequence[str] | None = None):
        super().__init__(description="shardc modular optimizer driver", args=args)

    def register_all_dialects(self):
        register_dialects(self.ctx)

    def register_all_passes(self):
        for name, factory in all_passes().items():
            self.register_pass(name, factory)

    def output_resulting_program(self, prog: ModuleOp) -> str:
        if self.args.target != "mlir":
            return super().output_resulting_program(prog)
        output = StringIO()
        print_module(
            prog, output, generic=self.args.print_op_generic, debuginfo=self.args.print_debuginfo
        )
        return output.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    ShardcOptMain(args=sys.argv[1:] if argv is None else argv).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
