"""A pass with a bug, for the tests of how internal errors are reported: it fails an
assertion while processing the first `arith.addf` it meets."""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass


def _check(op) -> None:  # noqa: ANN001
    assert op.name != "arith.addf"


@dataclass(frozen=True)
class CrashOnAddf(ModulePass):
    name = "test-crash-on-addf"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for inner in op.walk():
            _check(inner)
