"""`paused_gc`, for every pass: a module of its own, so that a pass needing only it does
not import the greedy driver (about 1.5 ms of `shardc-opt`'s start-up)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block with the cyclic garbage collector off (`gc.disable`) and the
    objects that exist when it starts out of its sight (`gc.freeze`), both undone after.

    A pass builds and drops tens of thousands of IR objects; the collections their
    allocations trigger scanned the long-lived IR again and again (about 40% of the
    passes' time), and with it frozen, still the pass's own new IR: about 900
    collections in the GPT step's pipeline, 5-10% of its time. What a pass drops is
    mostly freed by reference counting, the rest at the first collection after it (the
    peak memory of that pipeline is the same either way). Nothing is done when the
    collector is off already (`shardc-opt`, a pass inside a pass); nothing is frozen
    when something else froze objects already.
    """
    if not gc.isenabled():
        yield
        return
    freeze = not gc.get_freeze_count()
    if freeze:
        gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        if freeze:
            gc.unfreeze()
