"""kafkalog.iceberg.sync against Kafka-written log dirs: the rows a consumer gets, resume, nothing-new, the LSO."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")

from kafkalog.archive.discovery import discover_segments  # noqa: E402
from kafkalog.iceberg import NEXT_OFFSETS, sync  # noqa: E402
from kafkalog.iceberg.catalog import CATALOG_NAME, embedded_properties  # noqa: E402
from kafkalog.log.stable_offset import partition_tail  # noqa: E402
from tests.conftest import GOLDEN, load_manifest, needs_golden  # noqa: E402
from tests.iceberg_expect import consumer_view, manifest_batches, table_rows  # noqa: E402

pytestmark = needs_golden

#: the golden cases with manifests (Kafka's dump of every batch)
CASES = ["golden-txn-0", "golden-none-0", "golden-gzip-0", "golden-segments-0", "golden-idempotent-0",
         "golden-logappendtime-0", "golden-deleterecords-0", "golden-zstd-0"]  # fmt: skip


def open_table(warehouse: Path, name: str = "kafka.history"):
    from pyiceberg.catalog import load_catalog

    return load_catalog(CATALOG_NAME, **embedded_properties(str(warehouse))).load_table(name)


def expected(case: str, isolation: str = "read_committed", bases: set[int] | None = None) -> list:
    topic, _, p = case.rpartition("-")
    return consumer_view(manifest_batches(load_manifest(f"manifests/{case}.json"), bases), topic, int(p), isolation)


def test_lso_of_golden_txn_is_the_open_transactions_first_offset():
    items = discover_segments([GOLDEN / "logdir" / "golden-txn-0"])
    batches = manifest_batches(load_manifest("manifests/golden-txn-0.json"))
    open_pid = {b["producerId"] for b in batches if b["isTransactional"]} - {
        b["producerId"] for b in batches[-20:] if b["isControl"]}  # fmt: skip
    first = min(b["baseOffset"] for b in batches if b["producerId"] in open_pid and b["isTransactional"])
    tail = partition_tail(items)
    assert (tail.first_unstable, tail.log_end, tail.last_stable) == (first, 210, first)
    # from a later start (a previous sync's LSO): the same answer, from the tail's headers only
    assert partition_tail(items, 181).last_stable == first


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_txn_rows_are_what_a_consumer_gets(tmp_path, isolation):
    result = sync([GOLDEN / "logdir" / "golden-txn-0"], "kafka.history", warehouse=tmp_path / "wh",
                  isolation=isolation)  # fmt: skip
    want = expected("golden-txn-0", isolation)
    table = open_table(tmp_path / "wh")
    assert table_rows(table) == want
    assert result.rows == len(want)
    snap = table.current_snapshot()
    assert snap.snapshot_id == result.snapshot_id
    stop = 207 if isolation == "read_committed" else 210
    assert json.loads(snap.summary[NEXT_OFFSETS]) == {"golden-txn-0": stop} == result.next_offsets
    assert table.properties["kafkalog.isolation"] == isolation


def test_every_golden_case_in_one_sync(tmp_path):
    logdir = tmp_path / "logdir"
    for case in CASES:
        shutil.copytree(GOLDEN / "logdir" / case, logdir / case)
    result = sync([logdir], "kafka.history", warehouse=tmp_path / "wh")
    want = sorted((r for c in CASES for r in expected(c)), key=lambda r: (r[0], r[1], r[2]))
    table = open_table(tmp_path / "wh")
    assert table_rows(table) == want
    assert result.partitions == len(CASES) and len(table.metadata.snapshots) == 1
    spec = table.spec()
    assert [(f.name, str(f.transform)) for f in spec.fields] == [("topic", "identity"), ("timestamp_day", "day")]


def test_second_sync_adds_exactly_the_new_records_and_a_third_nothing(tmp_path):
    """Segments arrive in two steps (a broker that kept writing): the second sync adds exactly the rest, the
    open transaction that held back the first sync's tail included once it is decided."""
    src = GOLDEN / "logdir" / "golden-txn-0"
    part = tmp_path / "logdir" / "golden-txn-0"
    part.mkdir(parents=True)
    early = [f for f in src.iterdir() if f.name[:20].isdigit() and int(f.name[:20]) < 136]
    for f in early:
        shutil.copy2(f, part / f.name)
    first = sync([part], "kafka.history", warehouse=tmp_path / "wh")
    table = open_table(tmp_path / "wh")
    want_first = expected("golden-txn-0", bases={0, 44, 88})
    assert table_rows(table) == want_first and first.rows == len(want_first)
    for f in src.iterdir():
        if not (part / f.name).exists():
            shutil.copy2(f, part / f.name)
    second = sync([part], "kafka.history", warehouse=tmp_path / "wh")
    table = open_table(tmp_path / "wh")
    assert table_rows(table) == expected("golden-txn-0")
    assert first.rows + second.rows == len(expected("golden-txn-0"))
    assert second.next_offsets == {"golden-txn-0": 207}
    third = sync([part], "kafka.history", warehouse=tmp_path / "wh")
    assert third.snapshot_id is None and third.rows == 0
    assert len(open_table(tmp_path / "wh").metadata.snapshots) == 2


def test_resume_seeks_instead_of_scanning(tmp_path, monkeypatch):
    """The second sync decodes only from the resume offset: the segments before it are not read, and the one
    holding it is read from the position the checked .index gives."""
    from kafkalog.spark import datasource

    src = GOLDEN / "logdir" / "golden-segments-0"
    sync([src], "kafka.history", warehouse=tmp_path / "wh")
    table = open_table(tmp_path / "wh")
    stop = json.loads(table.current_snapshot().summary[NEXT_OFFSETS])["golden-segments-0"]
    # pretend the table had stopped 5 records before the end: only the last segment's tail is read again
    resume = stop - 5
    from kafkalog.iceberg import syncer

    monkeypatch.setattr(syncer, "table_next_offsets", lambda t: {"golden-segments-0": resume})
    starts = []
    real = datasource.scan_segment

    def spy(reader, part, m):
        yield from real(reader, part, m)
        starts.append((part.item.base_offset, m.start_position))

    monkeypatch.setattr(datasource, "scan_segment", spy)
    again = sync([src], "kafka.history", warehouse=tmp_path / "wh")
    items = discover_segments([src])
    holding = max(i.base_offset for i in items if i.base_offset <= resume)
    assert [s[0] for s in starts] == [holding]
    assert starts[0][1] > 0
    assert again.rows == len([r for r in expected("golden-segments-0") if r[2] >= resume])


def test_legacy_magic_0_and_1_rows_null_timestamps_included(tmp_path):
    """Magic 0 records have no timestamp: null in the table (its own day partition), Kafka's value -1 nowhere."""
    cases = sorted(p.name for p in (GOLDEN / "legacy" / "logdir").iterdir() if p.is_dir())
    sync([GOLDEN / "legacy" / "logdir"], "kafka.history", warehouse=tmp_path / "wh")
    want = []
    for case in cases:
        topic, _, p = case.rpartition("-")
        batches = manifest_batches(load_manifest(f"legacy/manifests/{case}.json"))
        want += consumer_view(batches, topic, int(p))
    got = table_rows(open_table(tmp_path / "wh"))
    assert got == sorted(want, key=lambda r: (r[0], r[1], r[2]))
    assert any(r[3] is None for r in got) and all(r[3] is None or r[3] >= 0 for r in got)


def test_files_are_cut_at_the_target_size_with_few_open_files(tmp_path, monkeypatch):
    """A writer streams rows into one file per (topic, day), cut at the table's write.target-file-size-bytes, with
    at most MAX_OPEN_FILES open: a chunk holding magic-0 (no timestamp) and magic-2 rows is split, and every row
    still lands once."""
    from kafkalog.iceberg import write

    sync([GOLDEN / "logdir" / "golden-none-0"], "kafka.history", warehouse=tmp_path / "wh")
    table = open_table(tmp_path / "wh")
    with table.transaction() as tx:
        tx.set_properties(**{"write.target-file-size-bytes": "4000"})
    monkeypatch.setattr(write, "MAX_OPEN_FILES", 1)
    result = sync([GOLDEN / "legacy" / "logdir"], "kafka.history", warehouse=tmp_path / "wh")
    table = open_table(tmp_path / "wh")
    want = expected("golden-none-0")
    for case in sorted(p.name for p in (GOLDEN / "legacy" / "logdir").iterdir() if p.is_dir()):
        topic, _, p = case.rpartition("-")
        want += consumer_view(manifest_batches(load_manifest(f"legacy/manifests/{case}.json")), topic, int(p))
    assert table_rows(table) == sorted(want, key=lambda r: (r[0], r[1], r[2]))
    tasks = list(table.scan(row_filter="topic != 'golden-none'").plan_files())
    assert len(tasks) == len(result.files) > len({(t.file.partition[0], t.file.partition[1]) for t in tasks})
    assert any(t.file.partition[1] is None for t in tasks) and any(t.file.partition[1] is not None for t in tasks)
