"""The commands README.md and docs/*.md show users still work: every fenced block marked
`<!-- runnable -->` runs (a shell block under `bash -euo pipefail`, a Python block under
this interpreter) in a fresh directory that sees the checkout's `examples/` and `tests/`,
with the console scripts (shardc-opt, shardc-run, ...) of this environment on PATH, and
must exit 0. A block that needs mpiexec or torch skips, naming it, only where that is
absent. Every shell or Python block carries a marker (`runnable` or `not runnable:
why`), so a new command is run or deliberately left out. The convention is docs/README.md's."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from doc_blocks import CHECKED_LANGUAGES, REQUIREMENTS, ROOT, RUNNABLE_LANGUAGES, Block, all_blocks, blocks

BLOCKS = all_blocks()
RUNNABLE = [b for b in BLOCKS if b.marker == "runnable"]
TOOLS = ["shardc-opt", "shardc-run", "shardc-verify", "shardc-train", "shardc-view"]
BLOCK_TIMEOUT_S = 600


def _missing(requirement: str) -> str | None:
    """Why `requirement` is not met here, or None."""
    if requirement == "mpiexec":
        return None if shutil.which("mpiexec") else "mpiexec is not on PATH"
    if requirement == "torch":
        absent = [m for m in ("torch", "torch_mlir", "transformers") if importlib.util.find_spec(m) is None]
        return f"needs the [torch] extra ({', '.join(absent)} not installed)" if absent else None
    raise AssertionError(f"unknown requirement {requirement!r}")


def _tool_dir(tmp_path: Path) -> Path:
    """A directory holding shardc's console scripts: this environment's own when they are
    installed, else small shims running `python -m shardc.tools.<x>` (a bare checkout)."""
    bindir = Path(sys.executable).parent
    if all((bindir / tool).exists() for tool in TOOLS):
        return bindir
    shims = tmp_path / "bin"
    shims.mkdir()
    for tool in TOOLS:
        shim = shims / tool
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m shardc.tools.{tool.split("-")[1]} "$@"\n')
        shim.chmod(0o755)
    (shims / "python").symlink_to(sys.executable)
    return shims


def _environment(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    tools = _tool_dir(tmp_path)
    env["PATH"] = os.pathsep.join([str(tools), str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["SHARDC_OVERSUBSCRIBE"] = "1"  # --np 4 on a machine with fewer cores (docs/clusters.md)
    env["MPLBACKEND"] = "Agg"
    env.pop("SHARDC_DEBUG", None)
    return env


def run_block(block: Block, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run `block` as the convention says, in a fresh directory under `tmp_path`."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "tests"):
        (work / name).symlink_to(ROOT / name)
    if RUNNABLE_LANGUAGES[block.language] == "sh":
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    else:
        command = [sys.executable, "-c", block.text]
    return subprocess.run(
        command, cwd=work, env=_environment(tmp_path), capture_output=True, text=True,
        timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL,
    )


def _tiered(block: Block):
    """A block that trains, launches ranks or imports torch costs tens of seconds: the
    slow tier's. The quick tier runs the compiler's and shardc-run's blocks."""
    costly = block.requirements or "shardc-train" in block.text or "mpiexec" in block.text
    return pytest.param(block, id=block.where, marks=pytest.mark.slow if costly else ())


@pytest.mark.parametrize("block", [_tiered(b) for b in RUNNABLE])
def test_runnable_block(block: Block, tmp_path: Path) -> None:
    for requirement in sorted(block.requirements):
        reason = _missing(requirement)
        if reason:
            pytest.skip(f"{block.where}: {reason}")
    proc = run_block(block, tmp_path)
    assert proc.returncode == 0, (
        f"{block.where}: the documented block exited {proc.returncode}\n--- block\n{block.text}"
        f"--- stdout (end)\n{proc.stdout[-3000:]}\n--- stderr (end)\n{proc.stderr[-3000:]}"
    )


def test_a_failing_command_fails_its_block(tmp_path: Path) -> None:
    """A command that fails anywhere in a block (not only the last) fails it; so does a
    bad flag to a shardc tool, and a Python block that raises."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- runnable -->\n```sh\nfalse\necho still here\n```\n"
        "<!-- runnable -->\n```sh\nshardc-opt examples/mlp.mlir --no-such-flag\n```\n"
        "<!-- runnable -->\n```python\nraise SystemExit(3)\n```\n"
        "<!-- runnable -->\n```sh\nshardc-opt examples/mlp.mlir --sharding-propagation -o out.mlir\n```\n"
    )
    found = blocks(page)
    codes = []
    for i, block in enumerate(found):
        (tmp_path / str(i)).mkdir()
        codes.append(run_block(block, tmp_path / str(i)).returncode)
    assert codes[0] != 0 and codes[1] != 0 and codes[2] == 3, codes
    assert codes[3] == 0, "shardc's tools are on PATH in a block"


def test_runnable_blocks_are_well_formed() -> None:
    """A runnable block is a shell or Python block and names only known requirements."""
    assert RUNNABLE, "no runnable block found in README.md or docs/"
    for block in RUNNABLE:
        assert block.language in RUNNABLE_LANGUAGES, f"{block.where}: a runnable block must be ```sh or ```python, not {block.language!r}"
        unknown = block.requirements - REQUIREMENTS
        assert not unknown, f"{block.where}: unknown requirement(s) {sorted(unknown)} (known: {sorted(REQUIREMENTS)})"
        assert block.text.strip(), f"{block.where}: an empty runnable block"


def test_every_command_block_is_marked() -> None:
    """Every shell or Python block says whether it runs: `<!-- runnable[: needs] -->` or
    `<!-- not runnable: why -->` on the line above its fence."""
    unmarked = [b.where for b in BLOCKS if b.language in CHECKED_LANGUAGES and b.marker is None]
    assert not unmarked, f"blocks without a runnable / not runnable marker: {unmarked}"
    silent = [b.where for b in BLOCKS if b.marker == "not runnable" and not b.detail.strip()]
    assert not silent, f"`not runnable` blocks must say why: {silent}"


def test_requirement_checks_name_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _missing("mpiexec") == "mpiexec is not on PATH"
    with pytest.raises(AssertionError):
        _missing("cuda")
