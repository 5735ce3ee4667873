"""Small segments in one DataSource task are decoded in one pass over their joined bytes (``scan.scan_joined``),
with the same rows, errors and skips as a pass per segment, and never a batch that mixes two topic-partitions.

Kafka's golden log dir (many segments of a few KiB: plain, compressed, transactional, control batches) read by the
DataSource's reader itself, in this process (no session: the tasks' code path), against the same reader with the
joining switched off (``SMALL_SEGMENT_BYTES`` = 0: every segment its own scan).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, load_manifest, needs_golden

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = needs_golden

NARROW = "topic string, partition int, offset long, timestamp long"
CASE = "golden-segments-0"


def _schema(ddl: str | None):
    from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

    if ddl is None:
        return None
    types = {"string": StringType(), "int": IntegerType(), "long": LongType(), "binary": BinaryType()}
    return StructType([StructField(n, types[t]) for n, t in (f.split() for f in ddl.split(", "))])


def _read(root: Path, ddl: str | None = None, **options: str) -> tuple[list, list]:
    """(rows as dicts, each batch's set of (topic, partition)) of every task's batches, one task for all."""
    from kafkalog.spark.datasource import KafkaLogReader

    reader = KafkaLogReader({"path": str(root), "minPartitions": "1", **options}, _schema(ddl), 1)
    rows, keys = [], []
    for part in reader.partitions():
        for batch in reader.read(part):
            got = batch.to_pylist()
            rows += got
            keys.append({(r.get("topic"), r.get("partition")) for r in got})
    return rows, keys


def _decoder_passes(monkeypatch) -> list:
    import kafkalog.spark.scan as scan

    calls: list = []
    real = scan.iter_record_columns

    def spy(*args, **kwargs):
        calls.append(args[0] if isinstance(args[0], str) else len(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(scan, "iter_record_columns", spy)
    return calls


def _per_segment(monkeypatch) -> None:
    import kafkalog.spark.datasource as ds

    monkeypatch.setattr(ds, "SMALL_SEGMENT_BYTES", 0)


@pytest.mark.parametrize("ddl", [None, NARROW, "offset long, value binary"])
def test_small_segments_decode_in_one_pass_with_the_same_rows(monkeypatch, ddl: str | None) -> None:
    assert GOLDEN is not None
    root = GOLDEN / "logdir"
    segments = sorted(root.glob("*/*.log"))
    dirs = {p.parent for p in segments}
    assert len(segments) > len(dirs) + 5  # golden-segments-0 alone holds several
    with monkeypatch.context() as m:
        _per_segment(m)
        want, _ = _read(root, ddl)
    passes = _decoder_passes(monkeypatch)
    got, keys = _read(root, ddl)
    assert got == want and len(want) > 2000
    assert len(passes) <= len(dirs), passes  # one pass per partition dir, not one per segment
    if ddl != "offset long, value binary":
        assert all(len(k) == 1 for k in keys), keys  # a batch never mixes two topic-partitions


def test_options_that_need_a_segment_scan_keep_it(monkeypatch) -> None:
    """A range, read_committed or metricsDir: every segment gets its own scan (its seek, mask and metrics line)."""
    root = GOLDEN / "logdir" / CASE
    n = len(list(root.glob("*.log")))
    for options in ({"startingOffsets": "50"}, {"isolation": "read_committed"}):
        passes = _decoder_passes(monkeypatch)
        _read(root, NARROW, **options)
        assert len(passes) >= n - 2, (options, passes)
        monkeypatch.undo()


def _damaged(tmp_path: Path, how: str) -> Path:
    """A copy of golden-segments-0 whose third segment has a broken CRC (``crc``) or lost its last 10 bytes
    (``truncated``: the next segment's bytes would follow a partial batch)."""
    root = tmp_path / "logdir"
    shutil.copytree(GOLDEN / "logdir" / CASE, root / CASE)
    seg = load_manifest(f"manifests/{CASE}.json")["segments"][2]
    log = root / CASE / Path(seg["log"]["file"]).name
    data = bytearray(log.read_bytes())
    if how == "crc":
        bad = seg["log"]["batches"][1]
        data[bad["position"] + bad["sizeInBytes"] - 3] ^= 0xFF
    else:
        del data[-10:]
    log.write_bytes(bytes(data))
    return root


@pytest.mark.parametrize("how", ["crc", "truncated"])
def test_damage_is_found_as_a_segment_scan_finds_it(monkeypatch, tmp_path: Path, how: str) -> None:
    """onCorrupt=fail raises the same error (segment, position, reason) and onCorrupt=skip keeps the same rows as
    a scan per segment: the joined pass gives way to the segments' own scans."""
    from kafkalog.errors import CorruptRecordError

    root = _damaged(tmp_path, how)
    outcomes = []
    for joined in (False, True):
        with monkeypatch.context() as m:
            if not joined:
                _per_segment(m)
            with pytest.raises(CorruptRecordError) as err:
                _read(root)
            skipped, _ = _read(root, onCorrupt="skip")
            outcomes.append((str(err.value), err.value.position, skipped))
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0][2]) > 100


def test_a_long_run_is_read_in_passes_of_bounded_bytes(monkeypatch) -> None:
    """JOINED_BYTES bounds what one pass holds: golden-segments-0 (11 segments of ~4 KB) in passes of 2-3 segments,
    rows unchanged."""
    import kafkalog.spark.datasource as ds

    root = GOLDEN / "logdir" / CASE
    sizes = [p.stat().st_size for p in sorted(root.glob("*.log"))]
    want, _ = _read(root)
    monkeypatch.setattr(ds, "JOINED_BYTES", 2 * max(sizes))
    passes = _decoder_passes(monkeypatch)
    got, _ = _read(root)
    assert got == want
    assert len(sizes) // 3 <= len(passes) <= len(sizes) // 2, (len(sizes), passes)
