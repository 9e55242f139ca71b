"""The package's shape, checked: no import circle reaches across a package, none inside the
runtime, and no module imports another's underscore names (DESIGN.md's rules, which a
refactor can silently break). Imports are read from the source (function-local ones
included, since a lazy import is still a dependency), nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import shardc

ROOT = Path(shardc.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


MODULES = _modules()


def _imports(name: str, tree: ast.AST):
    """(imported module, imported names) for every import statement, resolved."""
    is_package = MODULES[name].name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            yield base, tuple(alias.name for alias in node.names)


def _graph():
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    private: list[str] = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for base, names in _imports(name, tree):
            targets = [f"{base}.{n}" for n in names if f"{base}.{n}" in MODULES]
            if not targets and base in MODULES:
                targets = [base]
            edges[name].update(t for t in targets if t != name)
            if base.startswith("shardc") and base != name:
                private += [f"{name} imports {base}.{n}" for n in names
                            if n.startswith("_") and not n.startswith("__")]
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


EDGES, PRIVATE = _graph()
CYCLES = _cycles(EDGES)


def test_the_checker_sees_the_package():
    assert "shardc.passes.sharding_propagation" in MODULES
    assert any(EDGES.values())
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_import_circle_crosses_a_package():
    crossing = [c for c in CYCLES if len({_package(m) for m in c}) > 1]
    assert crossing == [], "import circles across packages:\n" + "\n".join(map(str, crossing))


def test_no_two_packages_import_each_other():
    package_edges = {(_package(a), _package(b)) for a, bs in EDGES.items() for b in bs}
    both_ways = sorted((a, b) for a, b in package_edges if a < b and (b, a) in package_edges)
    assert both_ways == []


def test_no_import_circle_inside_the_runtime():
    runtime = [c for c in CYCLES if any(m.startswith("shardc.runtime") for m in c)]
    assert runtime == []


def test_no_underscore_name_is_imported_across_modules():
    assert PRIVATE == [], "\n".join(PRIVATE)
