"""The DataSource's ``startingTimestamp``/``endingTimestamp`` with Spark's Kafka-source meaning: each resolves per
partition, on the driver, to the earliest offset whose timestamp is >= it (Kafka's ListOffsets), then only the
segments holding offsets of [start, end) are planned and the scan stops at the end offset.

Partitions are written by kafkalog's Log as a leader (its time and offset indexes as Kafka writes them); the
resolution itself is compared with Kafka's rule on the golden dirs in tests/log/test_timestamp_offsets.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkalog.log import Log

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.spark]

T0 = 1_700_000_000_000


def _write(d: Path, stamps: list[int], per_batch: int = 1, segment_batches: int | None = None) -> list[int]:
    """Partition dir ``d``: one batch of ``per_batch`` records per timestamp, a segment every ``segment_batches``
    batches (one segment when None); returns the segments' base offsets."""
    probe = Log.open(d.parent.parent / f"probe-{d.parent.name}-{d.name}" / "p-0", {})
    size = probe.append_as_leader([(b"k", b"v%04d" % 0)] * per_batch, timestamp=T0).valid_bytes
    probe.close()
    seg_bytes = size * segment_batches + size // 2 if segment_batches else 1 << 30
    log = Log.open(d, {"segment.bytes": str(seg_bytes), "index.interval.bytes": "1"})
    try:
        for i, t in enumerate(stamps):
            log.append_as_leader([(b"k", b"v%04d" % i)] * per_batch, timestamp=t)
        bases = [s.base_offset for s in log.segments.values()]
    finally:
        log.close()
    return bases


def _first_at(stamps: list[int], t: int, per_batch: int = 1) -> int | None:
    return next((i * per_batch for i, ts in enumerate(stamps) if ts >= t), None)


def _planned(root: str, **options: str) -> list[tuple[str, int]]:
    from kafkalog.spark.datasource import KafkaLogReader

    groups = KafkaLogReader({"path": root, **options}).partitions()
    return [(os.path.basename(s.item.partition_dir), s.item.base_offset) for g in groups for s in g.segments]


def _offsets(spark, root: str, **options: str) -> list[int]:
    df = spark.read.format("kafkalog").schema("offset long").options(**options).load(root)
    return sorted(r.offset for r in df.collect())


def test_ending_timestamp_inside_the_second_of_five_segments_plans_two_and_stops_at_the_cut(spark, tmp_path) -> None:
    """The issue's case: 5 segments of increasing timestamps, ``endingTimestamp`` inside the 2nd: the 3 segments
    after it are never planned, and the scan decodes the batches before the cut (and at most the one at it)."""
    from kafkalog.spark.datasource import read_scan_metrics

    per_batch, batches = 4, 120
    stamps = [T0 + 1000 * i for i in range(batches)]
    root = tmp_path / "arch"
    bases = _write(root / "t-0", stamps, per_batch, segment_batches=24)
    assert len(bases) == 5
    cut = T0 + 1000 * 30 + 500  # inside the 2nd segment (batches 24-47)
    end = _first_at(stamps, cut, per_batch)
    assert bases[1] < end < bases[2]
    assert _planned(str(root), endingTimestamp=str(cut)) == [("t-0", bases[0]), ("t-0", bases[1])]
    assert _planned(str(root)) == [("t-0", b) for b in bases]
    metrics = str(tmp_path / "m")
    assert _offsets(spark, str(root), endingTimestamp=str(cut), metricsDir=metrics) == list(range(end))
    m = read_scan_metrics(metrics)
    assert m["segments"] == 2
    assert end // per_batch <= m["batches_decoded"] <= end // per_batch + 1  # not the 120 of every batch
    assert m["records_returned"] == end
    # the lower bound: segments before the one holding its offset are not planned, the seek skips the rest
    lo = T0 + 1000 * 80 + 1
    start = _first_at(stamps, lo, per_batch)
    assert [b for _, b in _planned(str(root), startingTimestamp=str(lo))] == [b for b in bases if b + 96 > start]
    both = _offsets(spark, str(root), startingTimestamp=str(lo), endingTimestamp=str(T0 + 1000 * 90))
    assert both == list(range(start, _first_at(stamps, T0 + 1000 * 90, per_batch)))


def test_out_of_order_timestamps_come_back_by_offset(spark, tmp_path) -> None:
    """A later timestamp before an earlier one: the range is the offsets between the two resolved offsets, as
    Spark's Kafka source returns it, not a per-record timestamp filter; ``.filter`` gives that one."""
    stamps = [T0 + x for x in (100, 300, 200, 400, 50, 500, 250)]
    root = tmp_path / "arch"
    _write(root / "t-0", stamps)
    opts = {"startingTimestamp": str(T0 + 250), "endingTimestamp": str(T0 + 450)}
    assert _offsets(spark, str(root), **opts) == [1, 2, 3, 4]  # 300, 200, 400, 50: from offset 1 up to 5 (ts 500)
    df = spark.read.format("kafkalog").options(**opts).load(str(root))
    exact = df.filter(f"timestamp >= {T0 + 250} and timestamp < {T0 + 450}")
    assert sorted(r.offset for r in exact.collect()) == [1, 3]


def test_no_match_bounds_and_offsets_intersect(spark, tmp_path) -> None:
    """No offset at or after ``startingTimestamp``: the partition contributes nothing; none at or after
    ``endingTimestamp``: to the end; with offsets, the ranges intersect. Each partition resolves its own."""
    root = tmp_path / "arch"
    early = [T0 + 1000 * i for i in range(40)]
    late = [T0 + 100_000 + 1000 * i for i in range(40)]
    _write(root / "early-0", early, segment_batches=10)
    _write(root / "late-0", late, segment_batches=10)
    after_early = str(T0 + 50_000)
    assert {p for p, _ in _planned(str(root), startingTimestamp=after_early)} == {"late-0"}
    df = spark.read.format("kafkalog").schema("topic string, offset long").option("startingTimestamp", after_early)
    assert sorted((r.topic, r.offset) for r in df.load(str(root)).collect()) == [("late", o) for o in range(40)]
    assert _planned(str(root), startingTimestamp=str(T0 + 10**9)) == []
    assert _offsets(spark, str(root / "early-0"), startingTimestamp=str(T0 + 10**9)) == []
    assert _offsets(spark, str(root / "early-0"), endingTimestamp=str(T0 + 10**9)) == list(range(40))
    mid = str(T0 + 20_000)  # offset 20
    assert _offsets(spark, str(root / "early-0"), startingTimestamp=mid, startingOffsets="25") == list(range(25, 40))
    assert _offsets(spark, str(root / "early-0"), startingTimestamp=mid, startingOffsets="5") == list(range(20, 40))
    assert _offsets(spark, str(root / "early-0"), endingTimestamp=mid, endingOffsets="7") == list(range(7))
    assert _offsets(spark, str(root / "early-0"), endingTimestamp=mid, endingOffsets="30") == list(range(20))
    with pytest.raises(Exception, match="startingTimestamp must be a timestamp >= 0"):
        _planned(str(root), startingTimestamp="-1")


def test_missing_and_corrupt_time_indexes_give_the_same_rows(spark, tmp_path) -> None:
    stamps = [T0 + 1000 * i for i in range(60)]
    root = tmp_path / "arch"
    d = root / "t-0"
    bases = _write(d, stamps, segment_batches=10)
    opts = {"startingTimestamp": str(T0 + 21_500), "endingTimestamp": str(T0 + 44_000)}
    want = list(range(22, 44))
    assert _offsets(spark, str(root), **opts) == want
    os.remove(d / f"{bases[1]:020d}.timeindex")
    (d / f"{bases[2]:020d}.timeindex").write_bytes(b"\x00" * 7)
    (d / f"{bases[3]:020d}.timeindex").write_bytes(os.urandom(24))
    assert _offsets(spark, str(root), **opts) == want
    assert [b for _, b in _planned(str(root), **opts)] == bases[2:5]


@pytest.fixture(scope="module")
def s3():
    pytest.importorskip("moto")
    from tests.s3server import MotoServer

    server = MotoServer().start()
    yield server
    server.stop()


def test_remote_root_resolves_with_ranged_reads(spark, s3, tmp_path, monkeypatch) -> None:
    """On S3 the largest timestamps come from the time indexes' last 12 bytes and the cut segment is read in
    ranged chunks from its index position: far fewer bytes than the .log objects, no .log fetched whole."""
    from kafkalog.archive import storage
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.log.timestamp_offsets import PartitionTimes
    from tests.s3server import upload_tree

    stamps = [T0 + 1000 * i for i in range(200)]
    root = tmp_path / "arch"
    bases = _write(root / "t-0", stamps, per_batch=8, segment_batches=20)
    assert len(bases) == 10
    upload_tree(s3.client(), root, "tsrange", "arch")
    url = "s3://tsrange/arch"
    log_bytes = sum(f.stat().st_size for f in (root / "t-0").glob("*.log"))
    seen: list[tuple[str, int]] = []
    real_read, real_fetch = storage.read_range, storage.fetch

    def read_range(u, start=0, end=None, options=None):
        data = real_read(u, start, end, options)
        seen.append((u, len(data)))
        return data

    def fetch(u, dest, start=0, end=None, options=None):
        n = real_fetch(u, dest, start, end, options)
        seen.append((u, n))
        return n

    monkeypatch.setattr(storage, "read_range", read_range)
    monkeypatch.setattr(storage, "fetch", fetch)
    times = PartitionTimes(discover_segments(url, options=s3.options), s3.options)
    for t in (T0 + 55_500, T0 + 150_000, T0 + 10**9):
        assert times.offset_for(t) == _first_at(stamps, t, 8)
    fetched_log = sum(n for u, n in seen if u.endswith(".log"))
    assert 0 < fetched_log < log_bytes / 4
    assert {n for u, n in seen if u.endswith(".timeindex") and n <= 12} == {12}
    monkeypatch.undo()
    opts = {**s3.options, "startingTimestamp": str(T0 + 55_500), "endingTimestamp": str(T0 + 150_000)}
    assert _offsets(spark, url, **opts) == list(range(56 * 8, 150 * 8))
