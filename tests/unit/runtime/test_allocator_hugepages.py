"""`tune_allocator` turns numpy's transparent-huge-page advice off (issue #16: each first
touch of an advised array waited for the kernel to compact memory, the first GPT step
1.9x slower), unless NUMPY_MADVISE_HUGEPAGE or SHARDC_MALLOPT=0 says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

_PROBE = (
    "import numpy as np\n"
    "from shardc.runtime.codegen.compile import tune_allocator\n"
    "get = np._core.multiarray._get_madvise_hugepage\n"
    "before = get(); tune_allocator(); print(before, get())\n"
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(getattr(np, "_core", None), "multiarray")
    or not hasattr(np._core.multiarray, "_get_madvise_hugepage"),
    reason="numpy's huge-page advice is a Linux feature of numpy 2",
)


def _probe(**env: str) -> tuple[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("NUMPY_MADVISE_HUGEPAGE", "SHARDC_MALLOPT")}
    e.update(env)
    p = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=e, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    before, after = p.stdout.split()
    return before, after


def test_huge_page_advice_is_turned_off():
    before, after = _probe()
    if before != "True":
        pytest.skip("numpy does not advise huge pages on this kernel")
    assert after == "False"


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"NUMPY_MADVISE_HUGEPAGE": "1"}, {"SHARDC_MALLOPT": "0"}])
def test_the_user_s_choice_is_left_alone(env):
    before, after = _probe(**env)
    assert after == before
