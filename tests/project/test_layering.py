"""The import graph of kafkalog/ and the seam between segment recovery and producer state.

The graph is read with ``ast`` from every import statement in every module (inside functions too), so an import
moved into a function to dodge a cycle still counts as an edge."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.records import build_batch
from kafkalog.segment.log_segment import LogSegment

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "kafkalog"
CLI = ROOT / "cli"  # installed as kafkalog_cli
#: third-party packages whose import costs tens of MB and tenths of a second: the CLI imports a library module
#: that pulls one in only inside the command that needs it, so ``kafkalog --help`` stays lean
HEAVY = frozenset({"numpy", "pyarrow", "pandas", "pyspark"})


def _modules(pkg: Path, name: str | None = None) -> dict[str, Path | None]:
    mods: dict[str, Path | None] = {}
    name = name or pkg.name
    for f in pkg.rglob("*.py"):
        parts = [name, *f.relative_to(pkg).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    for f in pkg.rglob("*.c"):  # compiled extensions are leaves
        mods.setdefault(".".join([name, *f.relative_to(pkg).with_suffix("").parts]), None)
    return mods


class Graph(NamedTuple):
    edges: dict[str, set[str]]  # module -> project modules it imports (anywhere but under TYPE_CHECKING)
    inner: set[tuple[str, str]]  # (module, target) imported inside a function
    external: dict[str, set[str]]  # module -> third-party top-level packages imported at module top


def _type_checking_blocks(tree: ast.AST) -> set[ast.AST]:
    skip: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                skip.update(ast.walk(stmt))
    return skip


def _lazy_exports(tree: ast.Module) -> dict[str, str]:
    """A package's ``_EXPORTS`` table as name -> defining module (see kafkalog/_lazy.py), or {}."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["_EXPORTS"]:
            return {name: module for module, names in ast.literal_eval(node.value).items() for name in names}
    return {}


#: graphs already read, by the modules' paths and modification times (most tests read the same package)
_GRAPHS: dict[tuple, Graph] = {}


def _read_graph(mods: dict[str, Path | None], *, type_only: bool = False) -> Graph:
    """The import graph; ``type_only`` counts imports under ``TYPE_CHECKING`` as edges too (a cycle a type
    checker walks is a cycle a reader walks). Read once per set of files; callers must not change it."""
    key = (type_only, tuple(sorted((m, str(p), p.stat().st_mtime_ns if p else None) for m, p in mods.items())))
    if key not in _GRAPHS:
        _GRAPHS[key] = _parse_graph(mods, type_only=type_only)
    return _GRAPHS[key]


def _parse_graph(mods: dict[str, Path | None], *, type_only: bool) -> Graph:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    trees = {m: ast.parse(p.read_text()) for m, p in mods.items() if p is not None}
    exports = {m: _lazy_exports(tree) for m, tree in trees.items()}
    graph: dict[str, set[str]] = {m: set() for m in mods}
    external: dict[str, set[str]] = {m: set() for m in mods}
    inner: set[tuple[str, str]] = set()
    for mod, path in mods.items():
        if path is None:
            continue
        tree = trees[mod]
        in_function: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                in_function.update(ast.walk(node))
        skipped = set() if type_only else _type_checking_blocks(tree)
        for node in ast.walk(tree):
            if node in skipped:
                continue
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
                # a name a package loads on first access (kafkalog._lazy) is its defining module's import
                lazy = exports.get(src, {})
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else lazy.get(a.name, src) for a in node.names]
            else:
                continue
            for t in targets:
                r = resolve(t)
                if r is None:
                    if node not in in_function:
                        external[mod].add(t.partition(".")[0])
                elif r != mod:
                    graph[mod].add(r)
                    if node in in_function:
                        inner.add((mod, r))
    return Graph(graph, inner, external)


def _graph(pkg: Path = PKG) -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """Module -> kafkalog modules it imports; and the (module, target) pairs imported inside a function."""
    g = _read_graph(_modules(pkg))
    return g.edges, g.inner


def _project_graph() -> Graph:
    """kafkalog and the CLI (kafkalog_cli) together."""
    return _read_graph({**_modules(PKG), **_modules(CLI, "kafkalog_cli")})


def _heavy(g: Graph) -> set[str]:
    """Modules whose import runs (at module top, through their package ``__init__``s too) an import of ``HEAVY``."""
    def top_edges(m: str) -> set[str]:
        parents = {".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)}
        return ({t for t in g.edges[m] if (m, t) not in g.inner} | parents) & g.edges.keys()

    heavy = {m for m, ext in g.external.items() if ext & HEAVY}
    changed = True
    while changed:
        changed = False
        for m in g.edges:
            if m not in heavy and top_edges(m) & heavy:
                heavy.add(m)
                changed = True
    return heavy


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
    """No module of kafkalog or of the CLI reaches itself through imports."""
    graph = _project_graph().edges
    assert "kafkalog.manager.registry" in graph["kafkalog.manager.replica_mover"]
    assert "kafkalog_cli.dump" in graph["kafkalog_cli.main"]
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


def test_the_log_layer_does_not_know_the_cleaner() -> None:
    """The cleaner works on a Log; nothing below it (log, segment, index, records, checkpoint) reaches
    ``kafkalog.cleaner``, and the cleaner does not reach up into the manager, verify or Spark."""
    graph, _ = _graph()
    below = [m for m in graph if m.startswith(("kafkalog.log", "kafkalog.segment", "kafkalog.index",
                                                "kafkalog.records", "kafkalog.checkpoint"))]
    cleaner = [m for m in graph if m.startswith("kafkalog.cleaner")]
    assert below and "kafkalog.cleaner.cleaner" in cleaner
    for mod in below:
        assert not any(t.startswith("kafkalog.cleaner") for t in _reaches(graph, mod)), mod
    for mod in cleaner:
        above = {t for t in _reaches(graph, mod) if t.startswith(("kafkalog.manager", "kafkalog.verify",
                                                                    "kafkalog.spark"))}
        assert above == set(), mod


def test_tiered_objects_sit_in_the_storage_layer() -> None:
    """``kafkalog.archive.tiered`` reads objects through ``kafkalog.archive.storage`` and knows nothing of discovery, verification,
    logs, Spark or the CLI; verification, ``remote`` and the DataSource reach Aiven objects through it alone."""
    graph, _ = _graph()
    tiered = [m for m in graph if m.startswith("kafkalog.archive.tiered")]
    assert {"kafkalog.archive.tiered.aiven", "kafkalog.archive.tiered.manifest", "kafkalog.archive.tiered.rsm_config"} <= set(tiered)
    above = ("kafkalog.archive.discovery", "kafkalog.verify", "kafkalog.verify.remote", "kafkalog.spark", "kafkalog.log",
             "kafkalog.manager", "kafkalog.segment", "kafkalog_cli")  # fmt: skip
    for mod in tiered:
        assert {t for t in _reaches(graph, mod) if t.startswith(above)} == set(), mod
    for user in ("kafkalog.verify.segment", "kafkalog.verify.remote", "kafkalog.spark.datasource", "kafkalog.spark.split"):
        assert "kafkalog.archive.tiered.aiven" in _reaches(graph, user), user
    assert not any(t.startswith("kafkalog.archive.tiered") for t in _reaches(graph, "kafkalog.records.reader"))


def test_segment_index_log_and_manager_layers_import_at_module_top() -> None:
    _, inner = _graph()
    layers = ("kafkalog.segment", "kafkalog.index", "kafkalog.log", "kafkalog.manager", "kafkalog.cleaner")
    assert sorted((m, t) for m, t in inner if m.startswith(layers)) == []


def test_the_cli_imports_at_module_top_except_heavy_library_modules() -> None:
    """The CLI imports library modules at module top; only a module whose import pulls in numpy, pyarrow, pandas
    or pyspark is imported inside the command that uses it (so ``kafkalog --help`` does not load them), and
    nothing at module top does."""
    g = _project_graph()
    heavy = _heavy(g)
    assert {"kafkalog.index.base", "kafkalog.records.columns", "kafkalog.manager.log_manager"} <= heavy
    assert not {"kafkalog", "kafkalog.records", "kafkalog.records.reader", "kafkalog.verify.findings"} & heavy
    cli = [m for m in g.edges if m.startswith("kafkalog_cli")]
    assert len(cli) > 10
    inside = sorted((m, t) for m, t in g.inner if m in cli and t not in heavy)
    assert inside == []
    assert sorted(m for m in cli if m in heavy) == []


def _private_imports(pkg: Path, name: str) -> list[tuple[str, str]]:
    """(module, "target.name") for every ``from kafkalog.X... import _name`` whose target lies in another
    package (first two name parts) than the importing module: a private helper used as another package's API."""
    out = []
    for mod, path in _modules(pkg, name).items():
        if path is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                continue
            if not node.module.startswith("kafkalog") or node.module.split(".")[:2] == mod.split(".")[:2]:
                continue
            out += [(mod, f"{node.module}.{a.name}") for a in node.names
                    if a.name.startswith("_") and not a.name.endswith("__")]  # fmt: skip
    return sorted(out)


def test_no_package_imports_another_packages_private_names() -> None:
    """A name one package uses from another is public in its home module (the home module's tests and
    refactorings then see it is shared)."""
    assert _private_imports(PKG, "kafkalog") == []
    assert _private_imports(CLI, "kafkalog_cli") == []


def test_the_check_sees_a_private_import_inside_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "kafkalog"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "m.py").write_text("def _h():\n    pass\n")
    (pkg / "a" / "n.py").write_text("from kafkalog.a.m import _h\n")  # the same package: allowed
    (pkg / "b.py").write_text("def f():\n    from kafkalog.a.m import _h, g\n")
    assert _private_imports(pkg, "kafkalog") == [("kafkalog.b", "kafkalog.a.m._h")]


def test_the_check_sees_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    """The checker itself: a two-module cycle whose second edge is an import inside a function is found."""
    pkg = tmp_path / "kafkalog"
    pkg.mkdir()
    (pkg / "a.py").write_text("import kafkalog.b\n")
    (pkg / "b.py").write_text("def f():\n    from kafkalog import a\n")
    graph, inner = _graph(pkg)
    assert inner == {("kafkalog.b", "kafkalog.a")}
    assert sorted(m for m in graph if m in _reaches(graph, m)) == ["kafkalog.a", "kafkalog.b"]


def test_the_check_sees_a_heavy_import_behind_a_package(tmp_path: Path) -> None:
    """The checker itself: numpy imported by a package ``__init__`` makes every module below it heavy, an import
    inside a function or under TYPE_CHECKING does not, and the function import is reported as inner."""
    pkg = tmp_path / "kafkalog"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kafkalog.b\n")
    (pkg / "sub" / "__init__.py").write_text("import numpy\n")
    (pkg / "sub" / "leaf.py").write_text("import os\n")
    (pkg / "a.py").write_text("import kafkalog.sub.leaf\n")
    (pkg / "b.py").write_text("def f():\n    import kafkalog.a\n    import pyarrow\n")
    g = _read_graph(_modules(pkg))
    assert g.inner == {("kafkalog.b", "kafkalog.a")}
    assert g.edges["kafkalog"] == set()
    assert _heavy(g) == {"kafkalog.sub", "kafkalog.sub.leaf", "kafkalog.a"}


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


def test_the_record_and_log_layers_do_not_import_the_metadata_package() -> None:
    """``kafkalog.metadata`` (internal topics, the KRaft metadata log) sits above the log and the cleaner: the
    format and log layers never reach it, and it never reaches the manager's log manager."""
    graph, _ = _graph()
    assert "kafkalog.metadata.codec" in graph and "kafkalog.records.reader" in graph
    lower = [m for m in graph if m.startswith(("kafkalog.records", "kafkalog.log", "kafkalog.segment", "kafkalog.index"))]
    for mod in lower:
        assert not {t for t in _reaches(graph, mod) if t.startswith("kafkalog.metadata")}, mod
    assert "kafkalog.manager.log_manager" not in _reaches(graph, "kafkalog.metadata.image")


def test_timestamp_resolution_lives_in_the_library() -> None:
    """The DataSource only calls Kafka's ListOffsets rule (``kafkalog.log.timestamp_offsets``), which knows
    nothing of Spark."""
    graph, _ = _graph()
    assert "kafkalog.log.timestamp_offsets" in graph["kafkalog.spark.datasource"]
    assert not any(t.startswith("kafkalog.spark") for t in _reaches(graph, "kafkalog.log.timestamp_offsets"))


#: kafkalog's layers from the ground up (docs/architecture.md): a module may import its own package and any
#: layer below its own; packages that share a layer know nothing of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("kafkalog", "kafkalog._lazy", "kafkalog.errors", "kafkalog.names", "kafkalog.limits", "kafkalog.owned_lock"),
    ("kafkalog.io",),
    ("kafkalog.records", "kafkalog.index", "kafkalog.checkpoint"),
    ("kafkalog.segment",),
    ("kafkalog.archive",),
    ("kafkalog.log",),
    ("kafkalog.cleaner",),
    ("kafkalog.manager",),
    ("kafkalog.metadata",),
    ("kafkalog.verify",),
    ("kafkalog.spark",),
    ("kafkalog.iceberg",),
    ("kafkalog_cli",),
    ("kafkalog.__main__",),  # ``python -m kafkalog``: the command line's entry point
)
#: the public names of ``kafkalog`` (api.md) load on first access from every layer (``kafkalog._lazy``): the
#: package's ``__init__`` is a facade over the layers, not a layer of its own, and importing it runs none of them
FACADE = "kafkalog"


def _home(module: str) -> tuple[int, str]:
    """(layer, package) of a module: the longest package prefix named in ``LAYERS``."""
    best: tuple[int, str] | None = None
    for level, packages in enumerate(LAYERS):
        for p in packages:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > len(best[1])):
                best = (level, p)
    assert best is not None, f"{module} is in no layer of LAYERS: place it there and in docs/architecture.md"
    return best


def _upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    bad = []
    for mod, targets in edges.items():
        if mod == FACADE:
            continue
        level, pkg = _home(mod)
        for t in targets:
            t_level, t_pkg = _home(t)
            if t_level > level or (t_level == level and t_pkg != pkg and level > 0):
                bad.append((mod, t))
    return sorted(bad)


def test_no_module_imports_upward_or_sideways() -> None:
    """Every import, inside functions and under TYPE_CHECKING too, goes to the module's own package or down (the
    facade ``kafkalog/__init__`` apart: it imports nothing at run time but ``_lazy``)."""
    g = _read_graph({**_modules(PKG), **_modules(CLI, "kafkalog_cli")}, type_only=True)
    assert _read_graph(_modules(PKG)).edges[FACADE] == {"kafkalog._lazy"}
    assert {_home(m)[1] for m in g.edges} >= {p for ps in LAYERS for p in ps} - {"kafkalog.iceberg"}
    assert _upward(g.edges) == []


def test_no_import_cycles_even_for_type_checkers() -> None:
    g = _read_graph({**_modules(PKG), **_modules(CLI, "kafkalog_cli")}, type_only=True)
    assert sorted(m for m in g.edges if m in _reaches(g.edges, m)) == []


def test_the_root_holds_only_the_foundations() -> None:
    loose = sorted(p.name for p in PKG.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "_lazy.py", "errors.py", "limits.py", "names.py", "owned_lock.py"]


def test_the_layer_check_sees_an_upward_and_a_sideways_import(tmp_path: Path) -> None:
    pkg = tmp_path / "kafkalog"
    for sub in ("io", "records", "index", "log"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "io" / "f.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import kafkalog.log\n")
    (pkg / "records" / "r.py").write_text("def f():\n    import kafkalog.index\n")
    (pkg / "log" / "l.py").write_text("import kafkalog.records.r\nimport kafkalog.io.f\n")
    g = _read_graph(_modules(pkg), type_only=True)
    assert _upward(g.edges) == [("kafkalog.io.f", "kafkalog.log"), ("kafkalog.records.r", "kafkalog.index")]


def test_moved_module_paths_are_the_same_modules() -> None:
    """``kafkalog.storage`` and ``kafkalog.tiered`` (documented before they moved into ``kafkalog.archive``) import
    the very modules they name now, so a patch or an isinstance through either path agrees."""
    import kafkalog.storage
    import kafkalog.tiered.aiven
    from kafkalog.tiered import AivenSegment

    import kafkalog.archive.storage
    import kafkalog.archive.tiered.aiven

    assert kafkalog.storage is kafkalog.archive.storage
    assert kafkalog.tiered.aiven is kafkalog.archive.tiered.aiven
    assert AivenSegment is kafkalog.archive.tiered.aiven.AivenSegment
    assert kafkalog.storage.__spec__.name == "kafkalog.archive.storage"
