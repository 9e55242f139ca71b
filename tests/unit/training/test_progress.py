"""Progress output: a rich bar on a terminal, one plain line per N steps elsewhere,
nothing under --quiet; shardc-train's progress off a terminal is line-based."""

import io
import re

import pytest

from shardc.training.progress import Progress
from shardc.training.trainer import StepLog


def _feed(p: Progress, steps: int, eval_at=()) -> None:
    for s in range(1, steps + 1):
        p(StepLog(s, 4.0 - 0.1 * s, 1e-3, 0.01, 12345.0, 3.0 if s in eval_at else None))
    p.close()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_not_a_terminal_gives_one_line_per_n_steps():
    out = io.StringIO()
    p = Progress(20, stream=out, every=5)
    assert p.mode == "lines"
    _feed(p, 20, eval_at=(8,))
    lines = out.getvalue().splitlines()
    assert [int(re.match(r"step +(\d+)/20", ln).group(1)) for ln in lines] == [1, 5, 8, 10, 15, 20]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert re.fullmatch(r"step 10/20  loss 3\.0000  held-out 3\.0000  12,345 tok/s  elapsed \d+:\d\d  remaining \d+:\d\d", lines[3])
    assert "held-out -" in lines[1]  # before the first evaluation


def test_default_interval_is_a_tenth_of_the_steps():
    out = io.StringIO()
    _feed(Progress(100, stream=out), 100)
    assert len(out.getvalue().splitlines()) == 11  # step 1 and every 10th


def test_quiet_prints_nothing_but_keeps_the_first_loss():
    out = _Tty()
    p = Progress(5, quiet=True, stream=out)
    _feed(p, 5)
    assert out.getvalue() == "" and p.first == 4.0 - 0.1


def test_terminal_gets_a_rich_bar():
    out = _Tty()
    p = Progress(5, stream=out)
    assert p.mode == "bar"
    _feed(p, 5, eval_at=(5,))
    text = out.getvalue()
    assert "5/5" in text and "loss" in text and "tok/s" in text and "held-out 3.0000" in text


@pytest.mark.slow
def test_shardc_train_progress_in_a_pipe_is_line_based(tmp_path, capsys):
    from shardc.tools.train import main

    args = ["--simulate", "1", "--steps", "6", "--log-every", "3", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", "--per-device-batch", "2"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    steps = re.findall(r"^step (\d)/6  loss", out, re.M)
    assert steps == ["1", "3", "6"] and "\r" not in out
    assert main([*args, "--quiet", "--overwrite", "--out", str(tmp_path)]) == 0  # the first run's checkpoints: replaced
    assert "step 1/6" not in capsys.readouterr().out
