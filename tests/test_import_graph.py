"""The manager package's import graph: no cycles, nothing hidden in function bodies.

Read from the source with ``ast`` (what ``import`` statements name), so an import placed inside a function to
break a cycle is seen as well as one at module top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kafkalog

ROOT = Path(kafkalog.__file__).parent
MANAGER = "kafkalog.manager"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str) -> tuple[set[str], set[str]]:
    """(every kafkalog module ``path`` imports, those imported inside a function or class body)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    every: set[str] = set()
    nested: set[str] = set()

    def targets(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            return [base] + [f"{base}.{a.name}" for a in node.names]
        return []

    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        for t in targets(node):
            if t.startswith("kafkalog"):
                every.add(t)
                if id(node) not in top:
                    nested.add(t)
    return every, nested


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    nested: dict[str, set[str]] = {}
    for name, path in files.items():
        every, inner = _imports(path, name)
        graph[name] = {t for t in every if t in files and t != name}
        nested[name] = {t for t in inner if t in files}
    return graph, nested


def _cycles_through(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    """Every elementary cycle found by a DFS from each module under ``prefix`` back to itself."""
    found = []
    for start in sorted(m for m in graph if m.startswith(prefix)):
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    found.append(path + [start])
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return found


def test_the_manager_package_has_no_import_cycle() -> None:
    graph, _ = _graph()
    assert any(m.startswith(MANAGER + ".") for m in graph)
    assert "kafkalog.manager.registry" in graph["kafkalog.manager.replica_mover"]
    assert _cycles_through(graph, MANAGER + ".") == []


def test_the_mover_does_not_import_the_manager() -> None:
    graph, _ = _graph()
    assert "kafkalog.manager.log_manager" not in graph["kafkalog.manager.replica_mover"]


def test_the_manager_package_imports_at_module_top() -> None:
    _, nested = _graph()
    assert {m: sorted(t) for m, t in nested.items() if m.startswith(MANAGER) and t} == {}


def test_the_check_sees_a_cycle_and_a_nested_import(tmp_path: Path) -> None:
    """The checker itself: a two-module cycle hidden in a function body is found."""
    a = tmp_path / "a.py"
    a.write_text("import kafkalog.b\n")
    b = tmp_path / "b.py"
    b.write_text("def f():\n    import kafkalog.a\n")
    every_b, nested_b = _imports(b, "kafkalog.b")
    assert nested_b == {"kafkalog.a"}
    graph = {"kafkalog.a": _imports(a, "kafkalog.a")[0], "kafkalog.b": every_b}
    assert _cycles_through(graph, "kafkalog.") == [["kafkalog.a", "kafkalog.b", "kafkalog.a"],
                                                    ["kafkalog.b", "kafkalog.a", "kafkalog.b"]]
