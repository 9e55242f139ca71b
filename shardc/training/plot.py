"""Figures of a training run, drawn with matplotlib's Agg backend (no display needed).

`loss_figure` is the loss per step with the held-out losses, `throughput_figure` the
tokens/s per step; `save_figure` writes a PNG whose metadata (PNG text chunks: Title,
Description) repeats the title and axis labels, so a test or a script can read back
what a file shows without looking at pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE = (7.0, 4.2)  # inches; at DPI 100: 700 x 420 pixels
DPI = 100


def _figure() -> Figure:
    from matplotlib.figure import Figure

    # A bare Figure draws with Agg when saved and never touches pyplot's global state
    # (no backend selection, no display, nothing to close).
    return Figure(figsize=SIZE, dpi=DPI, layout="constrained")


def loss_figure(
    losses: Sequence[float],
    evals: Sequence[tuple[int, float]] = (),
    title: str = "training loss",
    log_scale: bool = False,
) -> Figure:
    """Training loss per step (line) and held-out losses (markers), with a legend."""
    fig = _figure()
    ax = fig.add_subplot()
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, losses, color="tab:blue", linewidth=1.5, label="train loss")
    if evals:
        es, ev = zip(*evals)
        ax.plot(es, ev, color="tab:orange", marker="o", linestyle="--", linewidth=1, label="held-out loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (cross-entropy, nats)")
    ax.set_title(title)
    if log_scale:
        ax.set_yscale("log")
    ax.set_xlim(1, max(2, len(losses)))
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def throughput_figure(tokens_per_s: Sequence[float], title: str = "throughput") -> Figure:
    """Tokens/s per step; the first step (compile warm-up, caches) is marked apart."""
    fig = _figure()
    ax = fig.add_subplot()
    steps = np.arange(1, len(tokens_per_s) + 1)
    ax.plot(steps, tokens_per_s, color="tab:green", linewidth=1.2, label="tokens/s")
    if len(tokens_per_s) > 1:
        median = float(np.median(tokens_per_s[1:]))
        ax.axhline(median, color="tab:gray", linestyle=":", label=f"median after step 1: {median:,.0f}")
    ax.set_xlabel("step")
    ax.set_ylabel("tokens/s")
    ax.yaxis.set_major_formatter("{x:,.0f}")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return fig


def describe(fig: Figure) -> str:
    """'x: <label>; y: <label>; series: <legend entries>' of the figure's first axes."""
    ax = fig.axes[0]
    legend = ax.get_legend()
    series = [t.get_text() for t in legend.get_texts()] if legend is not None else []
    return f"x: {ax.get_xlabel()}; y: {ax.get_ylabel()}; series: {', '.join(series)}"


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write `fig` as PNG with its title and axis labels in the PNG's metadata."""
    path = Path(path)
    title = fig.axes[0].get_title() if fig.axes else ""
    fig.savefig(path, format="png", dpi=DPI, metadata={"Title": title, "Description": describe(fig), "Software": "shardc"})
    return path


def plot_losses(
    path: str | Path,
    losses: Sequence[float],
    evals: Sequence[tuple[int, float]] = (),
    title: str = "training loss",
    log_scale: bool = False,
) -> Path:
    """`loss_figure` written to `path`."""
    return save_figure(loss_figure(losses, evals, title, log_scale), path)


def plot_throughput(path: str | Path, tokens_per_s: Sequence[float], title: str = "throughput") -> Path:
    """`throughput_figure` written to `path`."""
    return save_figure(throughput_figure(tokens_per_s, title), path)


__all__ = ["describe", "loss_figure", "plot_losses", "plot_throughput", "save_figure", "throughput_figure"]
