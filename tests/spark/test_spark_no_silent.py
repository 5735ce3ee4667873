"""The DataSource's reader refuses what every other entry point refuses, and reads what Kafka's consumer reads.

In process, no JVM: ``KafkaLogReader`` is what Spark's planner and tasks run (``partitions()`` on the driver,
``read()`` in a task); the same reader through Spark, and the export, are in tests/spark/test_spark_export.py.

* options: an unknown key, a bad value or an inverted range is an ``InvalidArgumentError`` naming it; a root with
  no segment is ``NothingToCheckError``, as for ``kafkalog verify``;
* ``isolation=read_committed`` stops at the last stable offset: on Kafka's ``gen-txn-0`` (``kafka-oracle
  generate``) and the golden ``golden-txn-0``, the records a read_committed consumer gets, computed from the
  oracle's dump of the ``.log`` files (control batches, ABORT markers, the transaction still open at the end);
* ``onCorrupt=skip`` reports the offsets it lost, the ranges ``recover --salvage --dry-run`` names.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.oracle import needs_oracle, run_oracle

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [needs_golden]


def _read(options: dict[str, str]) -> list[int]:
    """The offsets the reader returns, planned and read as Spark would (no JVM)."""
    from kafkalog.spark.datasource import KafkaLogReader

    reader = KafkaLogReader(options)
    return [o for g in reader.partitions() for b in reader.read(g) for o in b.column("offset").to_pylist()]


@pytest.mark.parametrize(("options", "named"), [
    ({"startingOffset": "5"}, "'startingOffset' (did you mean startingOffsets?)"),
    ({"endingTimestamps": "1"}, "'endingTimestamps' (did you mean endingTimestamp?)"),
    ({"oncorupt": "skip"}, "'oncorupt' (did you mean onCorrupt?)"),
    ({"includeDirStates": "bogus"}, "includeDirStates takes a comma list of live, future, delete, stray, not 'bogus'"),
    ({"startingOffsets": "10", "endingOffsets": "5"}, "startingOffsets=10 > endingOffsets=5: an inverted range"),
    ({"startingTimestamp": "10", "endingTimestamp": "5"}, "startingTimestamp=10 > endingTimestamp=5"),
    ({"startingOffsets": "-5"}, "startingOffsets must be an offset >= 0, not '-5'"),
    ({"endingOffsets": "x"}, "endingOffsets must be an integer"),
    ({"verifyCrc": "maybe"}, "verifyCrc must be true or false, not 'maybe'"),
    ({"isolation": "committed"}, "isolation must be read_uncommitted or read_committed"),
])  # fmt: skip
def test_bad_options_are_refused_naming_them(options: dict[str, str], named: str) -> None:
    from kafkalog.errors import InvalidArgumentError
    from kafkalog.spark.datasource import KafkaLogDataSource
    from kafkalog.spark.options import check_options

    root = str(GOLDEN / "logdir" / "golden-none-0")
    with pytest.raises(InvalidArgumentError) as err:
        _read({"path": root, **options})
    assert named in str(err.value)
    with pytest.raises(InvalidArgumentError, match="kafkalog"):  # load() itself fails, before any planning
        KafkaLogDataSource({"path": root, **options})
    with pytest.raises(InvalidArgumentError):  # the one check, which export_archive and the CLI's --option run
        check_options(options)


def test_good_options_in_any_case_pass() -> None:
    from kafkalog.spark.options import check_options

    opts = {"STARTINGOFFSETS": "3", "endingoffsets": "3", "verifyCrc": "FALSE", "includeDirStates": "live, stray",
            "onCorrupt": "Skip", "endpoint_url": "http://x", "path": "/p"}  # fmt: skip
    assert check_options(opts)["startingoffsets"] == "3"
    root = str(GOLDEN / "logdir" / "golden-none-0")
    assert _read({"path": root, "startingOffsets": "3", "endingOffsets": "3"}) == []  # an empty range is a range
    assert _read({"path": root, "verifyCrc": "FALSE"}) == _read({"path": root})


def test_a_root_without_segments_is_refused(tmp_path: Path) -> None:
    from kafkalog.errors import NothingToCheckError

    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("not a segment")
    (other / "00000000000000000000.index").write_bytes(b"")
    for root in (empty, other):
        with pytest.raises(NothingToCheckError, match="no Kafka log files found"):
            _read({"path": str(root)})


def _consumer_offsets(dump: list[dict]) -> list[int]:
    """What a read_committed consumer gets, from ``kafka-oracle dump`` of a partition's ``.log`` files: records
    of data batches below the last stable offset (the first offset of the earliest transaction open at the end),
    minus those of aborted transactions."""
    batches = sorted((b for f in dump for b in f["batches"]), key=lambda b: b["baseOffset"])
    open_txns: dict[int, int] = {}
    txn_of: dict[int, tuple[int, int]] = {}
    aborted: set[tuple[int, int]] = set()
    for b in batches:
        if not b["isTransactional"]:
            continue
        pid = b["producerId"]
        if b["isControl"]:
            first = open_txns.pop(pid, None)
            if b["records"][0]["controlType"] == "ABORT":
                aborted.add((pid, first))
        else:
            txn_of[b["baseOffset"]] = (pid, open_txns.setdefault(pid, b["baseOffset"]))
    lso = min(open_txns.values(), default=None)
    return [r["offset"] for b in batches if not b["isControl"]
            and not (b["isTransactional"] and txn_of[b["baseOffset"]] in aborted)
            for r in b["records"] if lso is None or r["offset"] < lso]  # fmt: skip


@needs_oracle
def test_read_committed_is_what_a_read_committed_consumer_gets(tmp_path: Path) -> None:
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.log.committed import committed_view

    run_oracle("generate", tmp_path / "gen")
    dirs = {"gen-txn-0": tmp_path / "gen" / "gen-txn-0", "golden-txn-0": GOLDEN / "logdir" / "golden-txn-0"}
    for name, pdir in dirs.items():
        dump = json.loads(run_oracle("dump", *sorted(pdir.glob("*.log"))).stdout)
        want = _consumer_offsets(dump)
        got = _read({"path": str(pdir), "isolation": "read_committed"})
        assert sorted(got) == want, name
        everything = _read({"path": str(pdir)})
        if name == "gen-txn-0":  # the case: offsets 197-199 lie past the last stable offset
            assert (len(got), len(everything)) == (109, 200)
            assert committed_view(discover_segments(str(pdir))).last_stable_offset == 197
        # the ranges intersect with it: an end past the LSO still stops there
        assert sorted(_read({"path": str(pdir), "isolation": "read_committed", "endingOffsets": "100000"})) == want
    # without the producer snapshots the batch headers of the whole partition say the same
    bare = tmp_path / "bare" / "gen-txn-0"
    shutil.copytree(dirs["gen-txn-0"], bare)
    for snap in bare.glob("*.snapshot"):
        snap.unlink()
    assert len(_read({"path": str(bare), "isolation": "read_committed"})) == 109


def test_skip_reports_the_offsets_it_lost_as_salvage_does(tmp_path: Path) -> None:
    from kafkalog.log.salvage import salvage_partition
    from kafkalog.spark.channel import skipped_line
    from kafkalog.spark.datasource import KafkaLogReader

    case = "golden-none-0"
    pdir = tmp_path / "logdir" / case
    shutil.copytree(GOLDEN / "logdir" / case, pdir)
    batches = load_manifest(f"manifests/{case}.json")["segments"][0]["log"]["batches"]
    log = pdir / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    for i in (4, 9, 10):  # one bad batch, then two bad batches in a row: two lost ranges
        data[batches[i]["position"] + batches[i]["sizeInBytes"] - 3] ^= 0xFF
    log.write_bytes(bytes(data))
    reader = KafkaLogReader({"path": str(pdir), "onCorrupt": "skip"})
    reader.skipped_reports = []
    kept = [o for g in reader.partitions() for b in reader.read(g) for o in b.column("offset").to_pylist()]
    (msg,) = reader.skipped_reports
    salvage = salvage_partition(pdir, dry_run=True)
    assert [tuple(r) for r in msg["lost_offsets"]] == salvage.lost_ranges
    lost = {o for a, b in salvage.lost_ranges for o in range(a, b + 1)}
    assert len(lost) == salvage.offsets_lost > 0 and not lost & set(kept)
    assert msg["regions"] == 2 and msg["position"] == batches[4]["position"]
    ranges = ", ".join(f"{a}-{b}" for a, b in salvage.lost_ranges)
    assert f"offsets {ranges} lost" in skipped_line(msg)


def test_an_ending_timestamp_early_in_a_segment_reads_little_of_it(tmp_path: Path) -> None:
    """The end offset of ``endingTimestamp`` found with the time index stops the reading there: of an 8 MiB
    segment whose end is 5% in, at most a quarter comes into the page cache (evicted first), planning included;
    a plain map's page faults read around them by the device's readahead size (8 MiB on this project's disks),
    which brought the whole segment in. The later segment is never planned."""
    import subprocess

    from kafkalog.log import Log
    from kafkalog.spark.datasource import KafkaLogReader, read_scan_metrics
    from tests.layouts import evict_from_page_cache

    pdir = tmp_path / "logdir" / "big-0"
    with Log.open(pdir, {"segment.bytes": str(8 << 20)}) as log:
        for i in range(2400):
            log.append_as_leader([(b"k%d" % i, bytes([i % 251]) * 4200)], timestamp=1_000_000 + i)
        log.flush()
    first = pdir / "00000000000000000000.log"
    assert len(list(pdir.glob("*.log"))) == 2 and first.stat().st_size > 8_000_000
    for p in pdir.iterdir():
        evict_from_page_cache(p)
    metrics = tmp_path / "metrics"
    reader = KafkaLogReader({"path": str(pdir.parent), "endingTimestamp": str(1_000_000 + 100),
                             "metricsDir": str(metrics)})  # fmt: skip
    offsets = [o for g in reader.partitions() for b in reader.read(g) for o in b.column("offset").to_pylist()]
    assert offsets == list(range(100))
    resident = int(subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(first)], check=True,
                                  capture_output=True, text=True).stdout.split()[0])  # fmt: skip
    assert resident <= first.stat().st_size // 4, (resident, first.stat().st_size)
    assert read_scan_metrics(str(metrics))["segments"] == 1
