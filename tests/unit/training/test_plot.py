"""loss.png and tokens_per_s.png: matplotlib figures with labelled axes, a title, a
legend and held-out losses; read back from the files (size, PNG metadata)."""

import numpy as np
from PIL import Image as PIL  # Pillow comes with matplotlib

from shardc.training.plot import DPI, SIZE, describe, loss_figure, plot_losses, plot_throughput, throughput_figure


def test_loss_plot_has_labels_title_legend_and_held_out_points(tmp_path):
    losses = list(np.linspace(4.0, 2.0, 30))
    evals = [(10, 3.5), (20, 2.9), (30, 2.4)]
    fig = loss_figure(losses, evals, "GPT 2 layers\n4 ranks, grid (batch=2, shard=2), tp=2 fsdp")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "step" and ax.get_ylabel().startswith("loss")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train loss", "held-out loss"]
    train, held = ax.get_lines()
    assert list(train.get_xdata()) == list(range(1, 31))
    assert list(held.get_xdata()) == [10, 20, 30] and list(held.get_ydata()) == [3.5, 2.9, 2.4]
    assert ax.get_yscale() == "linear"

    path = plot_losses(tmp_path / "loss.png", losses, evals, "GPT 2 layers\n4 ranks, grid (batch=2, shard=2), tp=2 fsdp")
    im = PIL.open(path)
    assert im.format == "PNG" and im.size == (int(SIZE[0] * DPI), int(SIZE[1] * DPI))
    assert im.info["Title"] == "GPT 2 layers\n4 ranks, grid (batch=2, shard=2), tp=2 fsdp"
    assert im.info["Description"] == "x: step; y: loss (cross-entropy, nats); series: train loss, held-out loss"
    pixels = np.asarray(im.convert("RGB"))
    assert (pixels != 255).any(axis=2).mean() > 0.01  # something is drawn


def test_log_scale_and_no_held_out(tmp_path):
    fig = loss_figure([3.0, 2.0, 1.0], (), log_scale=True)
    assert fig.axes[0].get_yscale() == "log"
    assert describe(fig).endswith("series: train loss")
    plot_losses(tmp_path / "l.png", [3.0, 2.0, 1.0], (), log_scale=True)
    assert PIL.open(tmp_path / "l.png").info["Description"] == "x: step; y: loss (cross-entropy, nats); series: train loss"


def test_throughput_plot(tmp_path):
    tps = [1000.0, 5000.0, 5200.0, 4800.0]
    fig = throughput_figure(tps, "run")
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("step", "tokens/s", "run")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["tokens/s", "median after step 1: 5,000"]
    im = PIL.open(plot_throughput(tmp_path / "t.png", tps, "run"))
    assert im.info["Title"] == "run" and im.info["Description"].startswith("x: step; y: tokens/s")
