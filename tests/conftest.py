"""Shared pytest fixtures and helpers."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_opt(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run shardc-opt as a user would, capturing both streams."""
    return subprocess.run(
        [sys.executable, "-m", "shardc.tools.opt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.fixture
def opt():
    return run_opt
