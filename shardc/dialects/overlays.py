"""Overlays: xDSL dialects extended with the ops shard programs need and xDSL lacks.

Each overlay is a new `Dialect` object with xDSL's ops plus ours, registered under the
same name in the shardc context, so plain `xdsl-opt` in the same environment is unchanged.
"""

from collections.abc import Callable

from xdsl.ir import Dialect


def overlay_dialects() -> dict[str, Callable[[], Dialect]]:
    """Overlay factories by dialect name (filled as overlays are written)."""
    return {}
