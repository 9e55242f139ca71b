"""cf's run-time functions (failed assertions): what generated code calls, apart from
the emitters in `kernels/cf.py` (which re-exports them), so a compile-cache hit loads no
xDSL."""

from __future__ import annotations

import numpy as np

from shardc.ir.escape import display
from shardc.runtime.execute.compiled import RuntimeExecutionError


def assert_failed(message: str, where: str = "") -> None:
    message = display(message)  # the IR's text: no control character reaches a terminal
    raise RuntimeExecutionError(f"runtime: {where}: assertion failed: {message}" if where else f"runtime: assertion failed: {message}")


def assert_all(cond: object, message: str, where: str) -> None:
    """A vectorized assertion (inside a linalg body): every element must hold."""
    if not np.all(cond):
        assert_failed(message, where)
