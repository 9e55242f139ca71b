"""The suite's `--dist loadscope` scheduler (tests/xdist_scheduler.py) ends a run in which
workers crash, with every test run once: pytest-xdist 3.8's own waited forever at the end
of such a run, which turned one segfault into a CI timeout."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("xdist")
pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]

FILES = {
    "test_a.py": "def test_a1(): pass\ndef test_a2(): pass\n",
    # a crash in the middle of a module: the test after it still runs
    "test_b.py": "import os\ndef test_crash(): os._exit(1)\ndef test_after(): pass\n",
    "test_c.py": "def test_1(): pass\ndef test_2(): pass\n",
    "test_d.py": "def test_1(): pass\ndef test_2(): pass\n",
    "test_e.py": "def test_1(): pass\ndef test_2(): pass\n",
    # a crash as a module's last test, and a module of one crashing test
    "test_f.py": "import os\ndef test_x(): pass\ndef test_y(): os._exit(3)\n",
    "test_g.py": "import os\ndef test_z(): os._exit(3)\n",
}


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_run_with_crashing_workers_ends_with_every_test_run_once(tmp_path, workers):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(TESTS)!r})
            from xdist_scheduler import make_scheduler

            def pytest_xdist_make_scheduler(config, log):
                return make_scheduler(config, log)
            """
        )
    )
    for _ in range(2):  # the crashes race the scheduler's messages: more than one order
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers), "--dist", "loadscope", str(tmp_path)],
            capture_output=True, text=True, timeout=180, cwd=tmp_path,
        )
        out = run.stdout + run.stderr
        assert run.returncode == 1, out
        assert "INTERNALERROR" not in out, out
        assert "3 failed, 10 passed" in out, out
        for crashed in ("test_b.py::test_crash", "test_f.py::test_y", "test_g.py::test_z"):
            assert f"crashed while running '{crashed}'" in out, out
