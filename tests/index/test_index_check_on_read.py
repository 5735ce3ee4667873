"""An inactive segment's indexes answer only after the segment passed its check (KIP-263, on first use), for a
``Log`` opened alone after a clean shutdown and for one owned by a ``LogManager``: reads, timestamp lookups and
offset lookups. The indexes here are damaged so that Kafka's own sanity rules still pass (sizes, order) but
point to the wrong place: without the check the answers would be wrong; with it the index is rebuilt from the
``.log`` and the answer is Kafka's."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from kafkalog.log import Log, LogConfig
from kafkalog.manager import LogManager
from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.layouts import big_segment, evict_from_page_cache
from tests.log.test_log_golden import _writable_copy

pytestmark = needs_golden

CASE = "golden-segments-0"


def _setup(tmp_path: Path) -> tuple[Path, dict, LogConfig]:
    assert GOLDEN is not None
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    for name in ("meta.properties", ".kafka_cleanshutdown", "recovery-point-offset-checkpoint",
                 "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        shutil.copy(GOLDEN / "logdir" / name, logdir / name)
        (logdir / name).chmod(0o644)
    d = _writable_copy(GOLDEN / "logdir" / CASE, logdir / CASE)
    manifest = load_manifest(f"manifests/{CASE}.json")
    config = LogConfig.from_properties({k: v for k, v in manifest["scenario"]["topicConfig"].items()})
    return d, manifest, config


def _damage_offset_index(d: Path, seg: dict) -> None:
    """Entry 1 points one byte into its batch: still sorted, still a whole number of entries."""
    path = d / f"{seg['baseOffset']:020d}.index"
    data = bytearray(path.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 8)
    struct.pack_into(">ii", data, 8, rel, pos + 1)
    path.write_bytes(bytes(data))


def _damage_time_index(d: Path, seg: dict) -> int:
    """Entry 2's timestamp lowered to just above entry 1's: still non-decreasing. Returns a timestamp whose
    lookup the damaged entry would send past the right record."""
    path = d / f"{seg['baseOffset']:020d}.timeindex"
    data = bytearray(path.read_bytes())
    t1 = struct.unpack_from(">q", data, 12)[0]
    struct.pack_into(">q", data, 24, t1 + 1)
    path.write_bytes(bytes(data))
    return t1 + 1


def _expected(manifest: dict, timestamp: int) -> int:
    return min(r["offset"] for s in manifest["segments"] for b in s["log"]["batches"] for r in b["records"]
               if r["timestamp"] >= timestamp)


def _records_from(log: Log, offset: int) -> list[tuple[int, str | None]]:
    out = []
    for b in log.read(offset, 1 << 20):
        out.extend((r.offset, None if r.value is None else r.value.hex()) for r in b.records() if r.offset >= offset)
    return out


@pytest.mark.parametrize("owner", ["alone", "manager"])
def test_damaged_indexes_are_checked_and_rebuilt_before_answering(tmp_path: Path, owner: str) -> None:
    d, manifest, config = _setup(tmp_path)
    golden_index = (d / f"{manifest['segments'][2]['baseOffset']:020d}.index").read_bytes()
    seg_o, seg_t = manifest["segments"][2], manifest["segments"][4]
    _damage_offset_index(d, seg_o)
    ts = _damage_time_index(d, seg_t)
    target = seg_o["offsetIndex"]["entries"][1]["offset"]
    want = [(r["offset"], r["value"]) for s in manifest["segments"] for b in s["log"]["batches"]
            for r in b["records"] if r["offset"] >= target and s is seg_o]
    if owner == "alone":
        log = Log.open(d, config, clean_shutdown=True)
        close = log.close
    else:
        m = LogManager([d.parent], log_config=config, properties={"sanity.check.all.logs.enabled": "false"})
        m.startup()
        log = m.get_log(CASE.rsplit("-", 1)[0], 0)
        close = m.shutdown
    try:
        got = _records_from(log, target)
        assert got[: len(want)] == want
        assert (d / f"{seg_o['baseOffset']:020d}.index").read_bytes() == golden_index  # rebuilt from the .log
        found = log.offset_for_timestamp(ts)
        assert found is not None and found.offset == _expected(manifest, ts)
        batch = next(b for b in seg_o["log"]["batches"] if b["baseOffset"] <= target <= b["lastOffset"])
        assert log.translate_offset(target) == (seg_o["baseOffset"], batch["position"])
    finally:
        close()


def test_without_the_check_the_damaged_time_index_would_answer_wrong(tmp_path: Path) -> None:
    """The damage above is one Kafka's sanity rules accept: the segment's own lookup, unchecked, is wrong."""
    from kafkalog.segment.log_segment import LogSegment

    d, manifest, config = _setup(tmp_path)
    seg_t = manifest["segments"][4]
    ts = _damage_time_index(d, seg_t)
    seg = LogSegment(d, seg_t["baseOffset"])
    seg.time_index.sanity_check()  # Kafka's rules pass
    seg.offset_index.sanity_check()
    found = seg.find_offset_by_timestamp(ts)
    assert found is None or found.offset != _expected(manifest, ts)
    seg.close()


def test_the_datasource_lookup_uses_indexes_only_after_their_check(tmp_path: Path) -> None:
    """``checked_start_position`` (the DataSource's pushdown): read-only, the indexes' answer when they pass their
    check, position 0 (always right: the reader filters) when they fail it."""
    from kafkalog.log.index_check import checked_start_position

    d, manifest, _config = _setup(tmp_path)
    seg_o, seg_t = manifest["segments"][2], manifest["segments"][4]
    target = seg_o["offsetIndex"]["entries"][1]["offset"]
    batch = next(b for b in seg_o["log"]["batches"] if b["baseOffset"] <= target <= b["lastOffset"])
    log_o = str(d / f"{seg_o['baseOffset']:020d}.log")
    entry = seg_o["offsetIndex"]["entries"][1]
    assert checked_start_position(log_o, seg_o["baseOffset"], target) == (entry["position"], target)
    assert batch["position"] >= entry["position"]
    log_t = str(d / f"{seg_t['baseOffset']:020d}.log")
    t2 = seg_t["timeIndex"]["entries"][2]
    position, start = checked_start_position(log_t, seg_t["baseOffset"], 0, t2["timestamp"])
    assert start == t2["offset"] and position > 0
    _damage_offset_index(d, seg_o)
    ts = _damage_time_index(d, seg_t)
    for p in d.iterdir():
        p.chmod(0o444)  # an archive: nothing may be written
    assert checked_start_position(log_o, seg_o["baseOffset"], target) == (0, target)
    assert checked_start_position(log_t, seg_t["baseOffset"], 0, ts) == (0, seg_t["baseOffset"])
    assert _expected(manifest, ts) >= seg_t["baseOffset"]


def test_checked_range_bounds_and_the_remote_form(tmp_path: Path) -> None:
    """``checked_range``: the end position is that of the entry after the first one above the upper bound (that
    entry's batch ends above the bound, so the next entry's batch holds nothing wanted), and the
    remote form (index files alone, ``log_size`` given, Kafka's sanity checks) answers as the strict form does
    on good indexes; with no ``.log`` beside them the strict form falls back to the whole file."""
    from kafkalog.log.index_check import checked_range

    d, manifest, _config = _setup(tmp_path)
    seg = manifest["segments"][2]
    entries = seg["offsetIndex"]["entries"]
    assert len(entries) >= 3
    log = str(d / f"{seg['baseOffset']:020d}.log")
    size = Path(log).stat().st_size
    lo, hi = entries[0]["offset"], entries[0]["offset"]  # the bound is the first entry's offset
    strict = checked_range(log, seg["baseOffset"], lo + 1, hi)
    assert strict[1] == lo + 1 and strict[2] == entries[2]["position"] <= size
    remote = checked_range(log, seg["baseOffset"], lo + 1, hi, log_size=size)
    assert remote == strict
    Path(log).rename(log + ".away")  # a remote segment: its index files were fetched alone
    assert checked_range(log, seg["baseOffset"], lo + 1, hi, log_size=size) == strict
    assert checked_range(log, seg["baseOffset"], lo + 1, hi) == (0, lo + 1, -1)


def _resident_bytes(path: Path) -> int:
    """Bytes of ``path`` in the page cache (util-linux ``fincore``, mincore(2) underneath)."""
    import subprocess

    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    return int(out.split()[0])


def test_a_point_query_reads_the_index_and_a_range_not_the_segment(tmp_path: Path) -> None:
    """``checked_range`` for one offset checks only the index entries it uses (each points at a whole CRC-valid
    batch with the offset it claims), so the point query brings a small part of an 8 MiB segment into the page
    cache (evicted first with POSIX_FADV_DONTNEED); a wrong entry falls back to the whole file and the answer stays
    right."""
    import struct

    from kafkalog.log.index_check import checked_range
    from kafkalog.records import iter_record_columns

    seg = big_segment(tmp_path)
    size = seg.stat().st_size
    assert size > 8 << 20
    for p in seg.parent.iterdir():
        p.chmod(0o444)

    def evict() -> None:
        evict_from_page_cache(seg)

    def point(target: int) -> tuple[int, int, list[int]]:
        position, start, end = checked_range(str(seg), 0, target, target)
        reader = iter_record_columns(str(seg), position=position, end=end, max_records=8192)  # as the DataSource
        try:
            return position, end, [int(o) for chunk in reader for o in chunk.offset if o == target]
        finally:
            reader.close()

    evict()
    assert _resident_bytes(seg) < size // 10  # the eviction worked
    position, end, found = point(1234)
    assert found == [1234] and 0 < position < end < size
    assert _resident_bytes(seg) <= size // 4, (_resident_bytes(seg), size)

    # a time range seeks with the time index, its entry checked against the batch it names
    position, start, _ = checked_range(str(seg), 0, 0, ts_lo=1_000_000 + 1500)
    assert start == 1500 and position > 0

    # entry 1000 moved one byte into its batch: the lookups that use it fall back to position 0
    idx = seg.with_suffix(".index")
    idx.chmod(0o644)
    data = bytearray(idx.read_bytes())
    rel, pos = struct.unpack_from(">ii", data, 1000 * 8)
    struct.pack_into(">ii", data, 1000 * 8, rel, pos + 1)
    idx.write_bytes(bytes(data))
    position, end, found = point(rel)
    assert found == [rel] and position == 0
    assert point(5)[2] == [5] and point(5)[0] > 0  # the entries it uses still answer
