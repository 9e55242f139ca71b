"""The arrays a compiled function holds at its peak, traced line by line: what tests of
the runtime's memory (remade casts, bf16 epilogue copies) bound."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np


def root(a: np.ndarray) -> np.ndarray:
    """The array owning `a`'s memory (views followed to their base)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def live_peak(fn: Any, call: Callable[[], object], weigh: Callable[[np.ndarray], int] = lambda b: b.nbytes) -> list[tuple[str, np.ndarray]]:
    """(local name, owning array) of each buffer `fn`'s frame holds at its line with the
    most bytes alive while `call()` runs, each buffer counted once; `fn`'s arguments are
    left out (the caller's arrays). `weigh` says how many of a buffer's bytes count (all
    of them by default): a test after one kind of buffer finds the line holding most of it."""
    args = set(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    best: list[Any] = [0, []]

    def line(frame: Any, event: str, arg: object) -> Any:
        if event == "line":
            seen: dict[int, tuple[str, np.ndarray]] = {}
            for k, v in frame.f_locals.items():
                if isinstance(v, np.ndarray) and k not in args:
                    seen.setdefault(id(root(v)), (k, root(v)))
            total = sum(weigh(b) for _, b in seen.values())
            if total > best[0]:
                best[:] = [total, list(seen.values())]
        return line

    def outer(frame: Any, event: str, arg: object) -> Any:
        return line if frame.f_code is fn.__code__ else None

    old = sys.gettrace()
    sys.settrace(outer)
    try:
        call()
    finally:
        sys.settrace(old)
    return best[1]


__all__ = ["live_peak", "root"]
