"""A real install: the wheel `python -m build` makes from the project's files (and
`pip install .` of them) holds everything the commands need. It is installed into a
fresh virtual environment that sees the running one's packages, so the dependencies
come from what is installed (only the build backend comes from the package index, as
for any isolated build), and its `shardc-train` and `shardc-view` run from outside the
source tree, importing shardc from the environment, not from the checkout."""

import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]  # builds and installs the package into a fresh venv


def _project_files(dest: Path) -> None:
    """The files a clone would have: tracked and untracked-but-not-ignored ones."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout to list the project's files")
    names = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode().split("\0")
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file() and not name.startswith("tests/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def _run(cmd: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert p.returncode == 0, f"{' '.join(cmd)} failed:\n{p.stdout}\n{p.stderr}"
    return p


@pytest.mark.parametrize("form", ["wheel", "source"])
def test_install_without_editable_mode_trains_and_views(form, tmp_path):
    """`pip install dist/shardc-*.whl` (built by `python -m build`) and `pip install .`."""
    pytest.importorskip("build", reason="the wheel is built with `python -m build` (the [test] extra)")
    src, dist, env, work = tmp_path / "src", tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    for d in (src, work):
        d.mkdir()
    _project_files(src)
    # an isolated build, as a user's: the build backend (setuptools) from the package index
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(src)], src)
    (wheel,) = dist.glob("shardc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("shardc/tools/train.py", "shardc/tools/view.py", "shardc/training/plot.py", "shardc/training/tokenizer.py", "shardc/runtime/codegen/compile.py", "shardc/dialects/shard.py"):
        assert module in names, module
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    for tool in ("shardc-opt", "shardc-run", "shardc-verify", "shardc-train", "shardc-view"):
        assert f"{tool} = " in entry_points, tool
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    for dep in ("matplotlib", "rich", "tokenizers", "xdsl"):
        assert f"Requires-Dist: {dep}" in metadata, dep

    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(env)
    py = env / "bin" / "python"
    # When the tests run inside a virtual environment (CI's .venv), the dependencies are
    # there rather than in the system's site-packages: list its directories after the new
    # environment's own (a plain path line: its .pth files, an editable shardc's finder
    # among them, are not run, so nothing shadows the installed copy).
    purelib = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work).stdout.strip())
    (purelib / "outer-environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # the system's pip, installing into the new environment; --no-index: no download, the
    # dependencies must already be satisfied by the system's site-packages
    if form == "wheel":
        _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index", str(wheel)], work)
    else:  # `pip install .`: pip builds the wheel itself (isolated, the backend from the index)
        # (the dependencies are installed already, so pip resolves them without a download)
        _run([sys.executable, "-m", "pip", "--python", str(py), "install", str(src)], work)
    where = _run([str(py), "-c", "import shardc; print(shardc.__file__)"], work).stdout.strip()
    assert Path(where).resolve().is_relative_to(env.resolve()), where

    out = work / "out"
    p = _run([str(env / "bin" / "shardc-train"), "--steps", "2", "--n-layer", "1", "--n-embd", "16", "--block-size", "8", "--out", str(out)], work)
    assert "shardc-train: loss" in p.stdout
    assert {"loss.csv", "loss.png", "tokens_per_s.png", "params.npz", "vocab.txt"} <= {f.name for f in out.iterdir()}
    program = work / "p.mlir"
    program.write_text(
        "shard.grid @g(shape = 2)\n"
        "func.func @f(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {\n"
        "  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding\n"
        "  %y = shard.shard %x to %s : tensor<4x6xf32>\n"
        "  return %y : tensor<4x6xf32>\n"
        "}\n"
    )
    view = _run([str(env / "bin" / "shardc-view"), str(program)], work).stdout
    assert "[0:2, :]" in view and "rank 1" in view
