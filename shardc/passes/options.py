"""Option types shared by a pass and the pipelines that forward them, in a module of
their own so that the pipeline table (read for every command line) imports no pass."""

from typing import Literal

Traversal = Literal["forward", "backward", "forward-backward", "backward-forward"]
"""sharding-propagation's traversal orders (upstream's `traversal` option)."""
