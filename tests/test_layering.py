"""The import graph of kafkalog/ and the seam between segment recovery and producer state.

The graph is read with ``ast`` from every import statement in every module (inside functions too), so an import
moved into a function to dodge a cycle still counts as an edge."""

from __future__ import annotations

import ast
from pathlib import Path

from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.records import build_batch
from kafkalog.segment import LogSegment

PKG = Path(__file__).resolve().parents[1] / "kafkalog"


def _modules(pkg: Path) -> dict[str, Path | None]:
    mods: dict[str, Path | None] = {}
    for f in pkg.rglob("*.py"):
        parts = list(f.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    for f in pkg.rglob("*.c"):  # compiled extensions are leaves
        mods.setdefault(".".join(f.relative_to(pkg.parent).with_suffix("").parts), None)
    return mods


def _graph(pkg: Path = PKG) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """Module -> kafkalog modules it imports; and the (module, target) pairs imported inside a function."""
    mods = _modules(pkg)

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    inner: set[tuple[str, str]] = set()
    for mod, path in mods.items():
        if path is None:
            continue
        tree = ast.parse(path.read_text())
        in_function: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(ast.walk(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    if path.name != "__init__.py":
                        base = base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            else:
                continue
            for t in targets:
                r = resolve(t)
                if r and r != mod and r.startswith("kafkalog"):
                    graph[mod].add(r)
                    if node in in_function:
                        inner.add((mod, r))
    return graph, inner


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_no_import_cycles() -> None:
    """No module of kafkalog reaches itself through imports."""
    graph, _ = _graph()
    assert "kafkalog.manager.registry" in graph["kafkalog.manager.replica_mover"]
    assert sorted(m for m in graph if m in _reaches(graph, m)) == []


def test_the_mover_does_not_import_the_manager() -> None:
    """Manager and mover share state only through ``manager/registry.py`` and the ``MoverHost`` protocol."""
    graph, _ = _graph()
    assert "kafkalog.manager.log_manager" not in _reaches(graph, "kafkalog.manager.replica_mover")


def test_segment_and_index_layers_do_not_import_the_log_layer() -> None:
    graph, _ = _graph()
    lower = [m for m in graph if m.startswith(("kafkalog.segment", "kafkalog.index", "kafkalog.records"))]
    assert lower  # the layers exist under these names
    for mod in lower:
        above = {t for t in _reaches(graph, mod) if t.startswith(("kafkalog.log", "kafkalog.manager"))}
        assert above == set(), mod


def test_segment_index_log_and_manager_layers_import_at_module_top() -> None:
    _, inner = _graph()
    layers = ("kafkalog.segment", "kafkalog.index", "kafkalog.log", "kafkalog.manager")
    assert sorted((m, t) for m, t in inner if m.startswith(layers)) == []


def test_the_check_sees_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    """The checker itself: a two-module cycle whose second edge is an import inside a function is found."""
    pkg = tmp_path / "kafkalog"
    pkg.mkdir()
    (pkg / "a.py").write_text("import kafkalog.b\n")
    (pkg / "b.py").write_text("def f():\n    from kafkalog import a\n")
    graph, inner = _graph(pkg)
    assert inner == {("kafkalog.b", "kafkalog.a")}
    assert sorted(m for m in graph if m in _reaches(graph, m)) == ["kafkalog.a", "kafkalog.b"]


def _segment_with_batches(tmp_path: Path) -> LogSegment:
    seg = LogSegment(tmp_path, 0)
    seg.append(build_batch([(b"k", b"plain")], base_offset=0, timestamp=1000))
    seg.append(build_batch([(b"k", b"idem")], base_offset=1, producer_id=7, producer_epoch=0, base_sequence=0,
                           timestamp=1001))
    seg.append(build_batch([(b"k", b"plain")], base_offset=2, timestamp=1002))
    return seg


def test_recovery_hands_a_plain_manager_only_batches_with_a_producer(tmp_path: Path) -> None:
    seen: list[int] = []

    class Counting(ProducerStateManager):
        skips_batches_without_producer = True  # claims apply_batch's contract although it overrides the hook

        def recover_batch(self, batch, segment) -> None:
            seen.append(batch.base_offset)
            super().recover_batch(batch, segment)

    assert ProducerStateManager.skips_batches_without_producer is True
    psm = Counting(tmp_path / "p")
    assert _segment_with_batches(tmp_path).recover(psm) == 0
    assert seen == [1]
    assert psm.last_map_offset == 3 and 7 in psm.producers


def test_recovery_hands_an_overriding_subclass_every_batch(tmp_path: Path) -> None:
    seen: list[int] = []

    class Counting(ProducerStateManager):
        def recover_batch(self, batch, segment) -> None:
            seen.append(batch.base_offset)
            super().recover_batch(batch, segment)

    class Deeper(Counting):
        pass

    assert Counting.skips_batches_without_producer is False and Deeper.skips_batches_without_producer is False
    psm = Deeper(tmp_path / "p")
    assert _segment_with_batches(tmp_path).recover(psm) == 0
    assert seen == [0, 1, 2]
    assert psm.last_map_offset == 3 and 7 in psm.producers
