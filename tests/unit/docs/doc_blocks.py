"""Reading README.md and docs/*.md for the doc tests: fenced code blocks with the marker
comment above them, headings as GitHub turns them into anchors, and relative links.
The convention is docs/README.md's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# The languages whose blocks must carry a marker: shell and Python.
CHECKED_LANGUAGES = {"sh", "bash", "shell", "console", "python", "py"}
RUNNABLE_LANGUAGES = {"sh": "sh", "bash": "sh", "python": "python"}
REQUIREMENTS = {"mpiexec", "torch"}

_MARKER = re.compile(r"^<!--\s*(runnable|not runnable)\s*(?::\s*(.*?))?\s*-->\s*$")
_FENCE = re.compile(r"^(```+|~~~+)\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    marker: str | None  # "runnable", "not runnable" or None
    detail: str  # the requirements of a runnable block, or why another is not run

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def requirements(self) -> set[str]:
        return set(self.detail.split()) if self.marker == "runnable" else set()


def blocks(path: Path) -> list[Block]:
    """Every fenced block of `path`, with the marker on the line just above its fence."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        marker = _MARKER.match(lines[i - 1].strip()) if i > 0 else None
        found.append(Block(
            path, i + 1, language, "\n".join(lines[i + 1:end]) + "\n",
            marker.group(1) if marker else None, (marker.group(2) or "") if marker else "",
        ))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for path in DOC_FILES for b in blocks(path)]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (hyphens and
    underscores kept), spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of `path`'s headings (outside fenced blocks), repeated ones numbered."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading and not in_fence:
            anchor = github_anchor(heading.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every markdown link in `path` that is not a URL, outside fences."""
    found: list[tuple[int, str]] = []
    in_fence = False
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                found.append((number, target))
    return found
