"""Package names that load on first access (kafkalog/_lazy.py): what an import loads, and that every public name
still resolves, with ``__all__``, ``dir()`` and the ``TYPE_CHECKING`` imports telling the same list."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAZY_PACKAGES = ["kafkalog", "kafkalog.records", "kafkalog.verify", "kafkalog.log", "kafkalog.manager"]
HEAVY = ["numpy", "pyarrow", "pandas", "pyspark"]
#: the names ../shared/api.md imports from ``kafkalog``
API_NAMES = [
    "CompressionType", "TimestampType", "Record", "RecordBatch", "read_batches", "read_record_columns",
    "iter_record_columns", "RecordColumns", "build_batch", "LogConfig", "LogSegment", "OffsetIndex", "TimeIndex",
    "Log", "LogAppendInfo", "TimestampAndOffset", "LogManager", "LogDirOfflineEvent", "errors",
]  # fmt: skip


def _loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return set(out.stdout.split())


def test_the_cli_entry_point_loads_no_numpy_and_no_storage_layers() -> None:
    mods = _loaded_after("import kafkalog_cli.main")
    assert "kafkalog_cli.dump" in mods and "kafkalog.verify.findings" in mods  # the commands are there
    assert sorted(m for m in HEAVY if m in mods) == []
    below = ("kafkalog.index", "kafkalog.segment", "kafkalog.log.log", "kafkalog.manager.log_manager",
             "kafkalog.records.columns", "kafkalog.records.scan", "kafkalog.verify.segment")  # fmt: skip
    assert sorted(m for m in mods if m.startswith(below)) == []


def test_the_records_package_loads_only_what_is_asked_for() -> None:
    mods = _loaded_after("import kafkalog.records")
    assert sorted(m for m in mods if m.startswith("kafkalog")) == ["kafkalog", "kafkalog._lazy", "kafkalog.records"]
    mods = _loaded_after("from kafkalog.records import read_batches, build_batch")
    assert "kafkalog.records.reader" in mods and "kafkalog.records.batch" in mods
    assert sorted(m for m in HEAVY if m in mods) == []
    assert "kafkalog.records.columns" not in mods
    mods = _loaded_after("from kafkalog import read_record_columns")
    assert {"kafkalog.records.columns", "numpy"} <= mods


def test_every_api_name_resolves_from_kafkalog() -> None:
    import kafkalog

    for name in API_NAMES:
        assert name in kafkalog.__all__, name
        assert getattr(kafkalog, name) is not None
    assert kafkalog.errors is importlib.import_module("kafkalog.errors")
    assert kafkalog.Log is importlib.import_module("kafkalog.log.log").Log
    from kafkalog import LogManager, read_batches

    assert LogManager.__module__ == "kafkalog.manager.log_manager"
    assert read_batches.__module__ == "kafkalog.records.reader"


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_all_dir_and_type_checking_imports_agree(package: str) -> None:
    mod = importlib.import_module(package)
    table = {name: module for module, names in mod._EXPORTS.items() for name in names}
    assert sorted(mod.__all__) == sorted(table)
    assert set(mod.__all__) <= set(dir(mod))
    tree = ast.parse(Path(mod.__file__).read_text())
    typed: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                src = importlib.util.resolve_name("." * stmt.level + (stmt.module or ""), package)
                typed.update({a.name: src for a in stmt.names})
    assert sorted(typed) == sorted(table)
    for name, module in table.items():
        value = getattr(mod, name)
        source = importlib.import_module(typed[name])
        assert value is getattr(source, name), name
        assert value is (importlib.import_module(module) if module == f"{package}.{name}"
                         else getattr(importlib.import_module(module), name)), name  # fmt: skip


def test_an_unknown_name_is_an_attribute_error_and_submodules_load_on_access() -> None:
    import kafkalog

    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        kafkalog.NoSuchName  # noqa: B018
    assert not hasattr(kafkalog, "no_such_module")
    assert kafkalog.records.varint.decode_varint(b"\x02", 0) == (1, 1)
