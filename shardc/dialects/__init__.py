"""Dialects shardc defines (shard, mpi) and overlays of xDSL dialects that lack ops we need.

`shardc_dialects()` is the table the shardc context registers: every name in it replaces
xDSL's dialect of the same name in that context only; xDSL's own classes stay untouched.
"""

from collections.abc import Callable

from xdsl.ir import Dialect


def _shard() -> Dialect:
    from shardc.dialects.shard import Shard

    return Shard


def _mpi() -> Dialect:
    from shardc.dialects.mpi import MPI

    return MPI


def shardc_dialects() -> dict[str, Callable[[], Dialect]]:
    """Dialect factories that take precedence over xDSL's, by dialect name."""
    table: dict[str, Callable[[], Dialect]] = {"shard": _shard, "mpi": _mpi}
    from shardc.dialects import overlays

    table.update(overlays.overlay_dialects())
    table["vector"] = lambda: __import__("shardc.dialects.vector", fromlist=["Vector"]).Vector
    table["tm_tensor"] = lambda: __import__("shardc.dialects.tm_tensor", fromlist=["TMTensor"]).TMTensor
    return table
