"""Big segments in object storage (moto's S3 server) and in Aiven tiered-storage objects are split into byte ranges
at checked ``.index`` entries like local ones: planned on the driver from the index alone plus one batch per cut,
read by several tasks, each fetching only its range, with exactly the rows of the unsplit read."""

from __future__ import annotations

import base64
import random
import shutil
from pathlib import Path

import pytest

from kafkalog.log import Log
from kafkalog.records.reader import read_batches
from tests.aiven_writer import SegmentFiles, new_key_pair, write_rsm_properties, write_segment
from tests.s3server import MotoServer, upload_tree

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
pytest.importorskip("moto")

pytestmark = [pytest.mark.spark]

BUCKET = "split"
N = 384  # batches of one ~4.2 KiB random record each (an .index entry per batch): a ~1.6 MiB segment
MAX = 512 << 10  # maxPartitionBytes for the split reads


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """``good/big-0``: one ~3.3 MiB segment; ``bad/big-0``: its copy whose ``.index`` entry for the first cut
    points one byte off its batch."""
    from kafkalog.log.index_check import batch_cuts

    root = tmp_path_factory.mktemp("archive")
    rng = random.Random(29)
    with Log.open(root / "good" / "big-0", {"segment.bytes": str(64 << 20)}) as log:
        for i in range(N):
            log.append_as_leader([(b"k%d" % i, rng.randbytes(4200))], timestamp=1_000_000 + i)
        log.flush()
    shutil.copytree(root / "good" / "big-0", root / "bad" / "big-0")
    log_file = root / "good" / "big-0" / "00000000000000000000.log"
    first_cut = batch_cuts(str(log_file), 0, log_file.stat().st_size, MAX)[0]
    idx = root / "bad" / "big-0" / "00000000000000000000.index"
    data = bytearray(idx.read_bytes())
    used = [int.from_bytes(data[8 * i + 4 : 8 * i + 8], "big") for i in range(len(data) // 8)].index(first_cut)
    data[8 * used + 7] ^= 0x01
    idx.write_bytes(bytes(data))
    return root


@pytest.fixture(scope="module")
def s3(archive: Path):
    server = MotoServer().start()
    try:
        upload_tree(server.client(), archive, BUCKET, "archive")
        yield server
    finally:
        server.stop()


def _log(archive: Path) -> Path:
    return archive / "good" / "big-0" / "00000000000000000000.log"


def _batch_starts(log: Path) -> set[int]:
    starts, pos = set(), 0
    for batch in read_batches(log.read_bytes(), validate=True):
        starts.add(pos)
        pos += batch.size_in_bytes
    return starts


def _planned(root: str, **options: str) -> list:
    from kafkalog.spark.datasource import KafkaLogReader

    reader = KafkaLogReader({"path": root, "minPartitions": "1", **options})
    return [s for g in reader.partitions() for s in g.segments]


def _rows(df) -> list[tuple[int, bytes]]:
    return sorted((r.offset, bytes(r.value)) for r in df.select("offset", "value").collect())


@pytest.fixture(scope="module")
def want(archive: Path) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of the local copy, decoded by the library."""
    from kafkalog.records import read_record_columns

    t = read_record_columns(_log(archive).read_bytes()).to_arrow(["offset", "value"])
    return list(zip(t["offset"].to_pylist(), t["value"].to_pylist(), strict=True))


def _check_ranges(parts: list, log: Path, size: int) -> None:
    """Contiguous ranges covering the segment, each at most MAX, each starting at a batch start."""
    assert len(parts) >= 3
    assert parts[0].start == 0 and parts[-1].stop == size
    assert all(a.stop == b.start for a, b in zip(parts, parts[1:], strict=False))
    assert all(0 < p.stop - p.start <= MAX for p in parts)
    assert {p.start for p in parts} <= _batch_starts(log)


def test_a_big_remote_segment_is_split_and_reads_the_same_rows(spark, s3, archive: Path, want, tmp_path: Path) -> None:
    from kafkalog.log.index_check import batch_cuts
    from kafkalog.spark.datasource import read_scan_metrics

    log = _log(archive)
    size = log.stat().st_size
    url = f"s3://{BUCKET}/archive/good"
    parts = _planned(url, maxPartitionBytes=str(MAX), **s3.options)
    _check_ranges(parts, log, size)
    assert [p.start for p in parts[1:]] == batch_cuts(str(log), 0, size, MAX)  # one rule, local or remote
    assert len(_planned(url, **s3.options)) == 1  # under the default maxPartitionBytes: whole

    mdir = tmp_path / "m"
    split = spark.read.format("kafkalog").options(**s3.options, maxPartitionBytes=str(MAX), minPartitions="1",
                                                  metricsDir=str(mdir)).load(url)  # fmt: skip
    assert split.rdd.getNumPartitions() == len(parts)
    got = _rows(split)  # the one query writing metrics
    whole = _rows(spark.read.format("kafkalog").options(**s3.options).load(url))
    assert got == whole == want and [o for o, _ in got] == list(range(N))
    m = read_scan_metrics(str(mdir))
    # each task fetched its own range: together the segment once, not once per task
    assert m["segments"] == len(parts) and m["log_bytes_fetched"] == size and m["records_returned"] == N


def test_small_segments_cost_no_planning_request_and_a_split_costs_the_index_plus_a_batch_per_cut(
    s3, archive: Path, monkeypatch
) -> None:
    from kafkalog.archive import storage
    calls: list[tuple[str, int, int | None]] = []
    real = storage.read_range

    def counting(url, start=0, end=None, options=None):
        calls.append((url, start, end))
        return real(url, start, end, options)

    monkeypatch.setattr(storage, "read_range", counting)
    monkeypatch.setattr(storage, "fetch", lambda *a, **k: pytest.fail("planning staged a whole object"))
    url = f"s3://{BUCKET}/archive/good"
    assert len(_planned(url, **s3.options)) == 1 and calls == []
    parts = _planned(url, maxPartitionBytes=str(MAX), **s3.options)
    index_reads = [c for c in calls if c[0].endswith(".index")]
    log_reads = [c for c in calls if c[0].endswith(".log")]
    assert len(index_reads) == 1 and len(calls) == 1 + len(log_reads)
    assert len(log_reads) == 2 * (len(parts) - 1)  # a cut's header, then its batch
    assert all(end - start <= 5000 for _, start, end in log_reads)


def test_a_wrong_remote_index_entry_means_the_segment_is_read_whole(spark, s3, want) -> None:
    url = f"s3://{BUCKET}/archive/bad"
    parts = _planned(url, maxPartitionBytes=str(MAX), **s3.options)
    assert [(p.start, p.stop) for p in parts] == [(0, None)]
    df = spark.read.format("kafkalog").options(**s3.options, maxPartitionBytes=str(MAX), minPartitions="1").load(url)
    assert _rows(df) == want


def test_several_big_remote_segments_are_planned_together(s3, archive: Path) -> None:
    """Two big segments (planned in the driver's thread pool): the good one split as alone, the bad one whole."""
    parts = _planned(f"s3://{BUCKET}/archive", maxPartitionBytes=str(MAX), **s3.options)
    by_dir: dict[str, list] = {}
    for p in parts:
        by_dir.setdefault(p.item.partition_dir.split("/archive/")[1], []).append((p.start, p.stop))
    alone = _planned(f"s3://{BUCKET}/archive/good", maxPartitionBytes=str(MAX), **s3.options)
    assert by_dir == {"bad/big-0": [(0, None)], "good/big-0": [(p.start, p.stop) for p in alone]}


def test_range_options_on_a_split_remote_segment(spark, s3, archive: Path, want, tmp_path: Path) -> None:
    from kafkalog.spark.datasource import read_scan_metrics

    url = f"s3://{BUCKET}/archive/good"
    mdir = tmp_path / "m"
    df = spark.read.format("kafkalog").options(**s3.options, maxPartitionBytes=str(MAX), minPartitions="1",
                                               startingOffsets="50", endingOffsets="300", metricsDir=str(mdir))  # fmt: skip
    rows = _rows(df.load(url))
    assert rows == want[50:300] and [o for o, _ in rows] == list(range(50, 300))
    m = read_scan_metrics(str(mdir))
    assert m["records_returned"] == 250 and m["log_bytes_fetched"] < _log(archive).stat().st_size * 0.75


def test_export_of_a_split_remote_segment(spark, s3, archive: Path, tmp_path: Path) -> None:
    from kafkalog.spark import export_archive

    url = f"s3://{BUCKET}/archive/good"
    result = export_archive(spark, url, str(tmp_path / "out"), maxPartitionBytes=str(MAX), minPartitions="1",
                            **s3.options)  # fmt: skip
    assert result.rows == N and result.tasks >= 3


def _aiven_bucket(archive: Path, dest: Path, *, chunk_size: int, compression: bool, encrypted: bool) -> Path:
    """The good segment as the Aiven plugin uploads it under ``dest/bucket``; returns the rsm.properties."""
    stem = archive / "good" / "big-0" / "00000000000000000000"
    seg = SegmentFiles(0, N - 1, base64.urlsafe_b64encode(bytes(range(16))).decode().rstrip("="),
                       Path(f"{stem}.log").read_bytes(),
                       {"offset": Path(f"{stem}.index").read_bytes(),
                        "timestamp": Path(f"{stem}.timeindex").read_bytes()})  # fmt: skip
    key_id = priv = pub = None
    if encrypted:
        key_id = "k-split"
        priv, pub = new_key_pair(dest / "keys")
    write_segment(dest / "bucket", seg, chunk_size=chunk_size, compression=compression, key_id=key_id, public=pub)
    props = dest / "rsm.properties"
    write_rsm_properties(props, chunk_size=chunk_size, compression=compression, key_id=key_id, private=priv,
                         public=pub)  # fmt: skip
    return props


@pytest.mark.parametrize(
    ("chunk_size", "compression", "encrypted", "on_s3"),
    [(65536, False, False, False), (100_000, True, False, False), (50_000, True, True, True)],
)
def test_a_big_aiven_segment_is_split_and_reads_the_same_rows(
    spark, s3, archive: Path, want, tmp_path: Path, chunk_size: int, compression: bool, encrypted: bool, on_s3: bool
) -> None:
    from kafkalog.spark.datasource import read_scan_metrics

    log = _log(archive)
    size = log.stat().st_size
    props = _aiven_bucket(archive, tmp_path, chunk_size=chunk_size, compression=compression, encrypted=encrypted)
    root, opts = str(tmp_path / "bucket"), {"rsmConfig": str(props)}
    if on_s3:
        prefix = f"aiven-{chunk_size}"
        upload_tree(s3.client(), tmp_path / "bucket", BUCKET, prefix)
        root, opts = f"s3://{BUCKET}/{prefix}", {**opts, **s3.options}
    parts = _planned(root, maxPartitionBytes=str(MAX), **opts)
    _check_ranges(parts, log, size)
    mdir = tmp_path / "m"
    df = spark.read.format("kafkalog").options(**opts, maxPartitionBytes=str(MAX), minPartitions="1",
                                               metricsDir=str(mdir)).load(root)  # fmt: skip
    assert df.rdd.getNumPartitions() == len(parts)
    assert _rows(df) == want
    m = read_scan_metrics(str(mdir))
    assert m["segments"] == len(parts) and m["log_bytes_fetched"] == size and m["records_returned"] == N
