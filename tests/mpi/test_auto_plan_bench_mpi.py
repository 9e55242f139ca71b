"""`bench/auto_plan.py --quick` runs: every hand policy, `auto` and `auto tight` measured
under mpiexec beside their predictions, and the `--plan-only` rows of a GPT-2-small shape."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from shardc.passes.cost_model import default_mpiexec

pytestmark = [pytest.mark.slow, pytest.mark.mpi]  # 7 mpiexec jobs of 2 ranks: about 15 s

BENCH = Path(__file__).resolve().parents[2] / "bench" / "auto_plan.py"


def test_quick_bench_measures_every_row():
    if default_mpiexec() is None:
        pytest.skip("no mpiexec")
    p = subprocess.run([sys.executable, str(BENCH), "--quick", "--rates", "default"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("gpt-l1-e16")]
    names = [ln.split()[2] for ln in rows]
    # On 2 ranks tp=2 takes both: no data replicas left for ZeRO/FSDP to split over.
    assert names == ["dp", "zero", "fsdp", "tp=2", "auto", "tight"], p.stdout
    for ln in rows:  # every row measured: a number, not nan, in the measured columns
        assert re.search(r"\s[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+ [KMG]?i?B", ln) and "nan" not in ln, ln
    assert "x best hand" in rows[names.index("auto")]
    assert re.search(r"^\s+8 \S+\s+\(batch=\d+, shard=\d+\)", p.stdout, re.M), p.stdout
    assert re.search(r"^\s+16 ", p.stdout, re.M)
