"""Shared pytest fixtures and helpers."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The compile cache (shardc.runtime.codegen.cache) of a test session is a fresh directory, never
# the user's; subprocesses (mpiexec, the tools) inherit it.
os.environ["SHARDC_CACHE_DIR"] = tempfile.mkdtemp(prefix="shardc-test-cache-")
atexit.register(shutil.rmtree, os.environ["SHARDC_CACHE_DIR"], ignore_errors=True)
# ... and its key (shardc.cache_dir.key_path) one of its own, beside the cache, not in it.
_KEY_DIR = tempfile.mkdtemp(prefix="shardc-test-key-")
os.environ["SHARDC_CACHE_KEY"] = os.path.join(_KEY_DIR, "cache.key")
atexit.register(shutil.rmtree, _KEY_DIR, ignore_errors=True)


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


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): one worker per core, at most 4 and one per 6 GiB of
    memory, since a worker can hold torch and transformers beside an `mpiexec -n 4` job of
    its own. `--dist loadscope` keeps a module on one worker, so its module fixtures (a
    compiled step, a Slurm cluster, lit's run) are paid once."""
    import psutil

    memory_gib = psutil.virtual_memory().total / 2**30
    return max(1, min(os.cpu_count() or 1, 4, int(memory_gib // 6)))


def pytest_collection_modifyitems(config, items):
    """The quick tier: every test is `quick` unless it (its class, module or parameter) is
    marked `slow`, so new tests join the fast loop `python -m pytest -m quick` by default and
    the long ones opt out visibly where they are written."""
    quick = pytest.mark.quick
    for item in items:
        if item.get_closest_marker("slow") is None:
            item.add_marker(quick)



@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` that ends its run after a worker crash (`xdist_scheduler`)."""
    from xdist_scheduler import make_scheduler

    return make_scheduler(config, log)
