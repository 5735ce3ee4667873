"""Shared fixtures: where Kafka's golden files are, and fresh copies of them for tests that touch files."""

from __future__ import annotations

import inspect
import json
import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def golden_root() -> Path | None:
    """The golden folder (``KAFKALOG_GOLDEN``, default ``../shared/golden`` from the repo root), or None.

    Resolved, since the library reports the real paths of what it lists (``../shared`` may be a symlink)."""
    root = Path(os.environ.get("KAFKALOG_GOLDEN", REPO_ROOT.parent / "shared" / "golden"))
    return root.resolve() if (root / "README.md").is_file() else None


GOLDEN = golden_root()
needs_golden = pytest.mark.skipif(
    GOLDEN is None, reason="Kafka golden files not found: set KAFKALOG_GOLDEN or put them at ../shared/golden"
)


def golden_segment_logs() -> list[Path]:
    """Every ``.log`` under the golden root that holds record batches as Kafka wrote them: all of them but the
    Aiven tiered objects whose ``.rsm-manifest`` says they are compressed or encrypted chunk streams (those are
    read through ``kafkalog.archive.tiered``, tests/archive/test_tiered_aiven.py)."""
    if GOLDEN is None:
        return []
    out = []
    for p in sorted(GOLDEN.rglob("*.log")):
        manifest = p.with_suffix(".rsm-manifest")
        if manifest.is_file():
            m = json.loads(manifest.read_text())
            if m.get("compression") or m.get("encryption"):
                continue
        out.append(p)
    return out


def golden_cases() -> list[str]:
    """Partition dir names under golden/logdir (e.g. ``golden-none-0``); empty when golden is absent."""
    if GOLDEN is None:
        return []
    return sorted(p.name for p in (GOLDEN / "logdir").iterdir() if p.is_dir())


def legacy_cases() -> list[str]:
    if GOLDEN is None:
        return []
    return sorted(p.name for p in (GOLDEN / "legacy" / "logdir").iterdir() if p.is_dir())


def load_manifest(relpath: str) -> dict:
    """Load a manifest JSON relative to the golden root, e.g. ``manifests/golden-none-0.json``."""
    assert GOLDEN is not None
    return json.loads((GOLDEN / relpath).read_text())


@pytest.fixture
def golden() -> Path:
    """The read-only golden root; tests that modify files must use ``golden_copy``."""
    if GOLDEN is None:
        pytest.skip("Kafka golden files not found: set KAFKALOG_GOLDEN or put them at ../shared/golden")
    return GOLDEN


@pytest.fixture
def golden_copy(tmp_path: Path, golden: Path):
    """Copy a golden path (relative to the golden root) into tmp_path and return the copy."""

    def _copy(relpath: str) -> Path:
        src = golden / relpath
        dst = tmp_path / "golden-copy" / relpath
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        return dst

    return _copy


#: the local[2] session the ``spark`` fixture shares between modules (empty while none runs)
_SHARED_SPARK: list = []
#: the modules (file paths as in node ids) that use the ``spark`` fixture, filled in at collection
_SPARK_MODULES: set[str] = set()


def _stop_shared_spark() -> None:
    while _SHARED_SPARK:
        _SHARED_SPARK.pop().stop()


@pytest.fixture(scope="module")
def spark():
    """A local[2] session with the kafkalog DataSource registered. Modules that use it one after another share one
    session (a new SparkContext and its Python workers take seconds each time, more beside another xdist worker);
    it is stopped before a module that does not use it (which may start a session of its own: Spark allows one per
    process) and at the end of the run. A module that stops it or starts another gets a new one in the next."""
    from pyspark.sql import SparkSession

    from kafkalog.spark import get_session, register

    if _SHARED_SPARK and (
        _SHARED_SPARK[0].sparkContext._jsc is None or SparkSession.getActiveSession() is not _SHARED_SPARK[0]
    ):
        _stop_shared_spark()
    if not _SHARED_SPARK:
        _SHARED_SPARK.append(get_session("local[2]", "kafkalog-tests"))
    session = _SHARED_SPARK[0]
    register(session)
    return session


@pytest.fixture(scope="module", autouse=True)
def _shared_spark_only_where_used(request: pytest.FixtureRequest) -> None:
    """Stops the shared session before a module that does not use the ``spark`` fixture."""
    if _SHARED_SPARK and request.node.nodeid.split("::", 1)[0] not in _SPARK_MODULES:
        _stop_shared_spark()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _stop_shared_spark()


# --- running under pytest-xdist (README's test command: ``-n auto --dist loadfile --no-loadscope-reorder``) ---------
#
# ``--dist loadfile`` runs each module whole on one worker, in file order: a module-scoped fixture (a Spark session,
# a moto server, a cluster) starts once per module as without xdist, and the one module of ``root`` tests (the
# network-namespace clusters) never runs on two workers at once. (``--dist loadgroup`` would let the other modules'
# tests spread, but with pytest 9.2 and pytest-xdist 3.8 it ignores ``xdist_group``: pytest-xdist issue #1386.)

_WIDE_SCOPES = ("class", "module", "package", "session")


def _uses_a_shared_fixture(item: pytest.Item) -> bool:
    """Whether the test uses one of the project's fixtures wider than one test (a Spark session, a moto server, a
    cluster); pytest's own (``tmp_path_factory``) do not count."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    tests_dir = str(REPO_ROOT / "tests") + os.sep
    return any(
        d and d[-1].scope in _WIDE_SCOPES and _defined_in(d[-1].func).startswith(tests_dir) for d in defs.values()
    )


def _defined_in(func) -> str:
    code = getattr(inspect.unwrap(func), "__code__", None)
    return os.path.realpath(code.co_filename) if code is not None else ""


def _rank(item: pytest.Item) -> int:
    """0 the namespace clusters, 1 Spark on sessions or processes of its own, 2 the shared ``spark`` session, 3 a
    shared fixture, 4 the rest: roughly the longest modules first, and those that share the session one after
    another (so that a worker keeps it from one to the next)."""
    if item.get_closest_marker("root") is not None:
        return 0
    if "spark" in item.fixturenames:
        return 2
    if "/spark/" in item.nodeid.split("::", 1)[0] or item.get_closest_marker("spark") is not None:
        return 1
    return 3 if _uses_a_shared_fixture(item) else 4


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On an xdist worker: the modules longest first (xdist keeps the order with
    ``--no-loadscope-reorder``), so that neither worker is left with a long tail; each module's tests stay together
    in file order. Without xdist the order is pytest's."""
    module_of = [item.nodeid.split("::", 1)[0] for item in items]
    _SPARK_MODULES.update(m for m, item in zip(module_of, items, strict=True) if "spark" in item.fixturenames)
    if not hasattr(config, "workerinput"):  # xdist sets it on its workers (and resets their ``dist`` to "no")
        return
    rank: dict[str, int] = {}
    for module, item in zip(module_of, items, strict=True):
        rank[module] = min(rank.get(module, 4), _rank(item))
    for module in _SPARK_MODULES & rank.keys():  # its tests that do not take the session keep it in the group
        if rank[module] != 0:
            rank[module] = 2
    first = {m: i for i, m in reversed(list(enumerate(module_of)))}
    order = sorted(range(len(items)), key=lambda i: (rank[module_of[i]], first[module_of[i]], i))
    items[:] = [items[i] for i in order]
