"""The folders of a dialect register once its xDSL module is imported, even after the
registry's first lookup: in a fresh interpreter (this one may have imported tosa)."""

from __future__ import annotations

import subprocess
import sys

import pytest

_PROBE = """
import sys
from xdsl.dialects import arith
from shardc.passes import fold_registry
assert fold_registry.registered_folder(arith.AddiOp) is not None
assert "xdsl.dialects.tosa" not in sys.modules
from xdsl.dialects import tosa
from shardc.passes.canonicalization.tosa import fold_add, fold_sub
assert fold_registry.registered_folder(tosa.AddOp) is fold_add
assert fold_registry.registered_folder(tosa.SubOp) is fold_sub
assert fold_registry.registered_constant(tosa.ConstOp) is not None
assert fold_registry.registered_materializer("tosa") is not None
print("ok")
"""


@pytest.mark.slow
def test_tosa_folders_register_when_tosa_is_imported_after_the_first_lookup() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_every_dialect_awaiting_its_folders_has_a_module() -> None:
    import importlib

    from shardc.passes.canonicalization import AWAITING_DIALECT, register_imported_dialects

    for dialect in list(AWAITING_DIALECT):
        importlib.import_module(dialect)
    register_imported_dialects()
    assert AWAITING_DIALECT == {}
    assert {"affine", "scf", "tosa"} <= {m.rsplit(".", 1)[-1] for m in sys.modules if m.startswith("shardc.passes.canonicalization.")}
