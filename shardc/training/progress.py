"""Training progress for rank 0: a live `rich` progress bar on a terminal; on anything
else (a pipe, a log file, CI) one plain line every `every` steps, so logs stay
readable; nothing under `quiet`.

Each update shows the loss, the latest held-out loss, tokens/s, the elapsed time and
the time remaining (rich estimates it from the step rate; the line form from the mean
step time so far).
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Protocol


class _Step(Protocol):  # the part of trainer.StepLog shown here
    step: int
    loss: float
    tokens_per_s: float
    eval_loss: float | None


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Call with each StepLog; `close()` when done (ends the live bar). `mode` is
    "bar", "lines" or "quiet": by default "bar" when `stream` is a terminal."""

    def __init__(self, steps: int, quiet: bool = False, stream: IO[str] | None = None, every: int | None = None, mode: str | None = None):
        self.steps = steps
        self.stream = stream if stream is not None else sys.stdout
        if mode is None:
            mode = "quiet" if quiet else ("bar" if _isatty(self.stream) else "lines")
        self.mode = mode
        self.every = every if every is not None else max(1, steps // 10)
        self.t0 = time.perf_counter()
        self.first: float | None = None
        self.last_eval: float | None = None
        self._bar: Any = None
        self._task: Any = None

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("loss [bold]{task.fields[loss]}[/]  held-out {task.fields[eval]}  {task.fields[tps]} tok/s"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(file=self.stream),
            transient=False,
        )
        self._bar.start()
        self._task = self._bar.add_task("train", total=self.steps, loss="-", eval="-", tps="-")

    def __call__(self, s: _Step) -> None:
        if self.first is None:
            self.first = s.loss
        if s.eval_loss is not None:
            self.last_eval = s.eval_loss
        if self.mode == "quiet":
            return
        ev = "-" if self.last_eval is None else f"{self.last_eval:.4f}"
        if self.mode == "bar":
            if self._bar is None:
                self._start_bar()
            self._bar.update(self._task, completed=s.step, loss=f"{s.loss:.4f}", eval=ev, tps=f"{s.tokens_per_s:,.0f}")
            if s.step >= self.steps:
                self.close()
            return
        if s.step == 1 or s.step == self.steps or s.eval_loss is not None or s.step % self.every == 0:
            self.stream.write(self.line(s, ev) + "\n")
            self.stream.flush()

    def line(self, s: _Step, ev: str) -> str:
        """The plain progress line of step `s`."""
        elapsed = time.perf_counter() - self.t0
        remaining = elapsed / s.step * (self.steps - s.step)
        width = len(str(self.steps))
        return (
            f"step {s.step:>{width}}/{self.steps}  loss {s.loss:.4f}  held-out {ev}  {s.tokens_per_s:,.0f} tok/s  "
            f"elapsed {_clock(elapsed)}  remaining {_clock(remaining)}"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


__all__ = ["Progress"]
