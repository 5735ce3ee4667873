"""Iceberg sync on bad input: corrupt segments, foreign tables, bad or unreachable catalogs (library and CLI)."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")

from click.testing import CliRunner  # noqa: E402
from kafkalog_cli.main import main  # noqa: E402

from kafkalog.errors import CorruptRecordError, IcebergConfigError  # noqa: E402
from kafkalog.iceberg import sync  # noqa: E402
from kafkalog.iceberg.catalog import CATALOG_NAME, embedded_properties  # noqa: E402
from tests.conftest import GOLDEN, needs_golden  # noqa: E402
from tests.iceberg.test_iceberg_sync import expected, open_table  # noqa: E402
from tests.iceberg_expect import table_rows  # noqa: E402

pytestmark = needs_golden


def _corrupt_copy(tmp_path, case="golden-none-0", segment_index=0, at=200):
    """A copy of ``case`` with one byte flipped inside a batch of one segment (its CRC fails)."""
    part = tmp_path / "logdir" / case
    shutil.copytree(GOLDEN / "logdir" / case, part)
    log = sorted(part.glob("*.log"))[segment_index]
    data = bytearray(log.read_bytes())
    data[at] ^= 0xFF
    log.write_bytes(bytes(data))
    return part, log


def test_corrupt_segment_fails_before_the_commit_and_names_the_file(tmp_path):
    part, log = _corrupt_copy(tmp_path)
    with pytest.raises(CorruptRecordError) as info:
        sync([part], "kafka.history", warehouse=tmp_path / "wh")
    assert str(log) in str(info.value)
    table = open_table(tmp_path / "wh")
    assert table.current_snapshot() is None
    root = table.location().removeprefix("file://")
    assert not list((tmp_path / "wh").rglob("*.parquet")), root  # the files written before the error are removed


def test_on_corrupt_skip_records_what_was_skipped_in_the_summary(tmp_path):
    part, log = _corrupt_copy(tmp_path)
    result = sync([part], "kafka.history", warehouse=tmp_path / "wh", on_corrupt="skip")
    assert result.skipped and result.skipped[0]["segment"] == str(log)
    snap = open_table(tmp_path / "wh").current_snapshot()
    skipped = json.loads(snap.summary["kafkalog.skipped"])
    assert skipped[0]["segment"] == str(log) and skipped[0]["regions"] >= 1
    rows = table_rows(open_table(tmp_path / "wh"))
    full = expected("golden-none-0")
    assert 0 < len(rows) < len(full) and set(rows) < set(full)


@pytest.mark.parametrize(("case", "segment_index", "at"), [("golden-none-0", 0, 200), ("golden-none-0", 0, 12100),
                                                         ("golden-segments-0", 1, 60),
                                                         ("golden-segments-0", 3, 3000)])  # fmt: skip
def test_on_corrupt_skip_records_the_offsets_salvage_would_lose(tmp_path, case, segment_index, at):
    """The summary names the lost offset ranges as ``recover --salvage --dry-run`` does for the same damage, and
    they are exactly the offsets missing from the rows (Kafka's records from the golden manifest)."""
    from kafkalog.log.salvage import salvage_partition

    part, log = _corrupt_copy(tmp_path, case, segment_index, at)
    lost = [list(r) for r in salvage_partition(part, dry_run=True).lost_ranges]
    assert lost  # the damage loses offsets
    result = sync([part], "kafka.history", warehouse=tmp_path / "wh", on_corrupt="skip")
    snap = open_table(tmp_path / "wh").current_snapshot()
    recorded = [r for s in json.loads(snap.summary["kafkalog.skipped"]) for r in s["lost_offsets"]]
    assert recorded == lost == [r for s in result.skipped for r in s["lost_offsets"]]
    have = {r[2] for r in table_rows(open_table(tmp_path / "wh"))}
    want = {r[2] for r in expected(case)}
    assert want - have == {o for a, b in lost for o in range(a, b + 1)} & want
    res = CliRunner().invoke(main, ["iceberg", "sync", str(part), "--table", "kafka.other", "--warehouse",
                                    str(tmp_path / "wh"), "--on-corrupt", "skip"])  # fmt: skip
    assert res.exit_code == 0 and f"offsets {lost[0][0]}-{lost[0][1]}" in res.output, res.output


def test_cli_corrupt_is_exit_1_with_one_line(tmp_path):
    part, log = _corrupt_copy(tmp_path)
    res = CliRunner().invoke(main, ["iceberg", "sync", str(part), "--table", "kafka.history",
                                    "--warehouse", str(tmp_path / "wh")])  # fmt: skip
    assert res.exit_code == 1, res.output
    lines = [x for x in res.output.splitlines() if x.startswith("kafkalog: error:")]
    assert len(lines) == 1 and str(log) in lines[0] and "Traceback" not in res.output


def test_a_table_that_is_not_kafkalogs_is_refused(tmp_path):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    (tmp_path / "wh").mkdir()
    cat = load_catalog(CATALOG_NAME, **embedded_properties(str(tmp_path / "wh")))
    cat.create_namespace("kafka")
    cat.create_table("kafka.history", Schema(NestedField(1, "id", LongType(), required=True),
                                             NestedField(2, "name", StringType(), required=False)))  # fmt: skip
    with pytest.raises(IcebergConfigError, match="not a kafkalog table"):
        sync([GOLDEN / "logdir" / "golden-none-0"], "kafka.history", warehouse=tmp_path / "wh")
    res = CliRunner().invoke(main, ["iceberg", "sync", str(GOLDEN / "logdir" / "golden-none-0"), "--table",
                                    "kafka.history", "--warehouse", str(tmp_path / "wh")])  # fmt: skip
    assert res.exit_code == 2 and "not a kafkalog table" in res.output and "Traceback" not in res.output
    assert cat.load_table("kafka.history").current_snapshot() is None


def test_the_other_isolation_is_refused(tmp_path):
    src = GOLDEN / "logdir" / "golden-txn-0"
    sync([src], "kafka.history", warehouse=tmp_path / "wh")
    with pytest.raises(IcebergConfigError, match="read_committed rows"):
        sync([src], "kafka.history", warehouse=tmp_path / "wh", isolation="read_uncommitted")


@pytest.mark.parametrize("config, message", [
    ("catalog: [1, 2", "not a JSON or YAML catalog config"),
    ('{"warehouse": "file:///tmp/x"}', "names no catalog"),
    ('{"type": "nosuchkind", "uri": "x://y"}', "catalog 'kafkalog'"),
    ('{"type": "rest", "uri": "http://127.0.0.1:9"}', "catalog 'kafkalog' at http://127.0.0.1:9"),
    ('{"type": "sql", "uri": "sqlite:////nonexistent-dir/x/catalog.db", "warehouse": "file:///tmp"}',
     "catalog 'kafkalog' at sqlite:////nonexistent-dir/x/catalog.db"),
])  # fmt: skip
def test_bad_or_unreachable_catalog_is_one_line_exit_2(tmp_path, config, message):
    path = tmp_path / "catalog.json"
    path.write_text(config)
    with pytest.raises(IcebergConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        sync([GOLDEN / "logdir" / "golden-none-0"], "kafka.history", catalog=str(path))
    res = CliRunner().invoke(main, ["iceberg", "sync", str(GOLDEN / "logdir" / "golden-none-0"), "--table",
                                    "kafka.history", "--catalog-config", str(path)])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1 and message in res.output


def test_missing_config_file_and_usage_errors(tmp_path):
    run = CliRunner().invoke
    src = str(GOLDEN / "logdir" / "golden-none-0")
    res = run(main, ["iceberg", "sync", src, "--table", "a.b", "--catalog-config", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2 and "cannot read the catalog config" in res.output
    res = run(main, ["iceberg", "sync", src, "--table", "a.b"])
    assert res.exit_code == 2 and "--warehouse" in res.output
    res = run(main, ["iceberg", "sync", str(tmp_path), "--table", "a.b", "--warehouse", str(tmp_path / "wh")])
    assert res.exit_code == 2 and "no segments found" in res.output


def test_yaml_catalog_config_in_pyicebergs_own_layout(tmp_path):
    wh = tmp_path / "wh"
    wh.mkdir()
    (tmp_path / "c.yaml").write_text(f"catalog:\n  mine:\n    type: sql\n    uri: sqlite:///{wh}/catalog.db\n"
                                     f"    warehouse: file://{wh}\n")  # fmt: skip
    result = sync([GOLDEN / "logdir" / "golden-none-0"], "kafka.history", catalog=str(tmp_path / "c.yaml"))
    from pyiceberg.catalog import load_catalog

    table = load_catalog("mine", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}",
                         type="sql").load_table("kafka.history")  # fmt: skip
    assert table_rows(table) == expected("golden-none-0") and result.rows == len(expected("golden-none-0"))


def test_cli_json_summary(tmp_path):
    src = str(GOLDEN / "logdir" / "golden-txn-0")
    args = ["iceberg", "sync", src, "--table", "kafka.history", "--warehouse", str(tmp_path / "wh"), "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output.strip().splitlines()[-1])
    assert obj["type"] == "iceberg-sync" and obj["rows"] == len(expected("golden-txn-0"))
    assert obj["next_offsets"] == {"golden-txn-0": 207} and obj["files"] and obj["bytes"] > 0
    assert obj["snapshot_id"] == open_table(tmp_path / "wh").current_snapshot().snapshot_id
    res = CliRunner().invoke(main, args)
    obj = json.loads(res.output.strip().splitlines()[-1])
    assert res.exit_code == 0 and obj["rows"] == 0 and obj["snapshot_id"] is None
