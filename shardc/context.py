"""The MLIR context shardc tools use: xDSL's dialects, with ours in place of shard, mpi
and the overlaid ones."""

from xdsl.context import Context
from xdsl.dialects import get_all_dialects

from shardc.dialects import shardc_dialects


def register_dialects(ctx: Context) -> None:
    """Register every dialect lazily; shardc's factories win over xDSL's by name."""
    ours = shardc_dialects()
    for name, factory in get_all_dialects().items():
        if name not in ours:
            ctx.register_dialect(name, factory)
    for name, factory in ours.items():
        ctx.register_dialect(name, factory)


def make_context(allow_unregistered: bool = False) -> Context:
    ctx = Context(allow_unregistered=allow_unregistered)
    register_dialects(ctx)
    return ctx
