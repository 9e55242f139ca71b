"""README.md is the front door (at most 300 lines, the three commands for a fresh machine
at the top, the ones CI runs) and every relative link in README.md and docs/*.md leads to
a file that exists, and to a heading of it where the link names one."""

from __future__ import annotations

import re
from pathlib import Path

from doc_blocks import DOC_FILES, ROOT, anchors, blocks, github_anchor, relative_links

README = ROOT / "README.md"
MAX_README_LINES = 300


def test_readme_is_short() -> None:
    count = len(README.read_text(encoding="utf-8").splitlines())
    assert count <= MAX_README_LINES, f"README.md has {count} lines; at most {MAX_README_LINES}: move detail to docs/"


def _quick_start() -> list[str]:
    first = blocks(README)[0]
    return [line.split("#")[0].strip() for line in first.text.splitlines() if line.strip()]


def test_readme_opens_with_install_main_job_and_tests() -> None:
    """The first block: the install command, the main job on its embedded default, the
    full test command; the first lines of the file before it say what shardc is."""
    text = README.read_text(encoding="utf-8")
    assert text.startswith("# shardc\n")
    assert text.index("```") < 1500, "the quick-start block must be at the very top"
    commands = _quick_start()
    assert len(commands) == 3, commands
    install, main_job, tests = commands
    assert install.startswith("pip install -e "), install
    assert main_job.startswith("shardc-train"), main_job
    assert tests == "pytest", tests


def test_ci_runs_the_readme_commands() -> None:
    """.ci/run installs with the README's extras and runs the README's test command."""
    install, _, tests = _quick_start()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    extras = re.search(r'"\.\[([^\]]+)\]"', install).group(1)
    assert f'pip install -q -e ".[{extras}]"' in ci, f"the README installs [{extras}]; .ci/run does not"
    assert tests in [line.strip() for line in ci.splitlines()], f".ci/run does not run {tests!r}"


def test_relative_links_resolve() -> None:
    broken = []
    for path in DOC_FILES:
        for line, target in relative_links(path):
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{line}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_doc_page_is_linked_from_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    pages = [p.name for p in DOC_FILES if p.parent.name == "docs" and p.name != "README.md"]
    unlisted = [p for p in pages if f"({p})" not in index]
    assert not unlisted, f"docs/README.md does not link {unlisted}"


def test_github_anchor() -> None:
    assert github_anchor("Checkpoints, `--out` and the compile cache") == "checkpoints---out-and-the-compile-cache"
    assert github_anchor("transformers models by name (`hf:CLASS`, `hf:DIR`)") == "transformers-models-by-name-hfclass-hfdir"
    assert github_anchor("Start-up and cold compiles") == "start-up-and-cold-compiles"


def test_link_checker_sees_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [bad](#nope) [file](missing.md) `[code](x.md)`\n```\n[fenced](y.md)\n```\n")
    targets = [t for _, t in relative_links(page)]
    assert targets == ["#title", "#nope", "missing.md"]
    assert anchors(page) == {"title"}
