"""``kafkalog.log.timestamp_offsets``: an archived partition's timestamps resolved to offsets with Kafka's
ListOffsets rule, compared with ``Log.offset_for_timestamp`` (the broker's code path, golden-tested) on Kafka's
golden dirs, and kept right when the time indexes are missing, damaged or lying."""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from kafkalog.archive.discovery import discover_segments
from kafkalog.log import Log, LogConfig
from kafkalog.log.timestamp_offsets import PartitionTimes, largest_timestamp, offset_for_timestamp
from tests.conftest import GOLDEN, needs_golden
from tests.oracle import needs_oracle, run_oracle

T0 = 1_700_000_000_000


def _golden_dirs() -> list[Path]:
    if GOLDEN is None:
        return []
    dirs = [p for p in (GOLDEN / "logdir").iterdir() if p.is_dir()]
    return sorted(dirs + [p for p in (GOLDEN / "legacy" / "logdir").iterdir() if p.is_dir()])


def _manifest(d: Path) -> dict:
    sub = "legacy/manifests" if d.parent.parent.name == "legacy" else "manifests"
    return json.loads((GOLDEN / sub / f"{d.name}.json").read_text())


def _records(manifest: dict) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record, control records included (ListOffsets sees them too)."""
    return [(r["offset"], r["timestamp"]) for s in manifest["segments"] for b in s["log"]["batches"]
            for r in b["records"]]  # fmt: skip


@needs_golden
@pytest.mark.parametrize("src", _golden_dirs(), ids=lambda p: p.name)
def test_resolved_offsets_equal_kafkas_list_offsets_on_golden_dirs(src: Path, tmp_path: Path) -> None:
    """Every timestamp of the partition, and one either side, resolves to the offset ``Log.offset_for_timestamp``
    answers. The copy's mtimes are set to 0: Kafka's broker gives a segment without timestamps its mtime as its
    largest timestamp, which in an archive is the copy's time (documented difference)."""
    d = tmp_path / src.name
    shutil.copytree(src, d)
    for f in d.iterdir():
        os.utime(f, (0, 0))
    manifest = _manifest(src)
    recs = _records(manifest)
    stamps = {t for _, t in recs if t >= 0}
    probes = sorted({1} | stamps | {t + 1 for t in stamps} | {t - 1 for t in stamps if t > 1})
    times = PartitionTimes(discover_segments(str(d)))
    config = LogConfig.from_properties(dict(manifest.get("scenario", {}).get("topicConfig", {})))
    log = Log.open(d, config, clean_shutdown=True)
    try:
        kafka = {t: getattr(log.offset_for_timestamp(t), "offset", None) for t in probes}
    finally:
        log.close()
    ours = {t: times.offset_for(t) for t in probes}
    assert ours == kafka
    # and it is the earliest offset whose timestamp is >= t (for the dirs whose records all have timestamps)
    if all(t >= 0 for _, t in recs):
        for t in probes:
            assert ours[t] == min((o for o, ts in recs if ts >= t), default=None), t


GENERATED = ["gen-gzip-0", "gen-idempotent-0", "gen-index-dense-0", "gen-logappendtime-0", "gen-lz4-0", "gen-none-0",
             "gen-segments-0", "gen-snappy-0", "gen-txn-0", "gen-zstd-0"]  # fmt: skip


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A log dir written by Kafka's own code (``kafka-oracle generate``): out-of-order CreateTimes, rolls, every
    codec, transactions, LogAppendTime."""
    out = tmp_path_factory.mktemp("oracle") / "logdir"
    run_oracle("generate", out)
    return out


@needs_oracle
@pytest.mark.parametrize("case", GENERATED)
def test_resolved_offsets_equal_kafkas_on_dirs_kafka_generated(generated: Path, case: str) -> None:
    """Kafka-written partitions with many out-of-order timestamps: the same offsets as ``Log.offset_for_timestamp``
    and as the definition (the earliest offset whose timestamp is >= t, over the records Kafka wrote)."""
    from kafkalog.records import read_batches

    d = generated / case
    assert d.is_dir(), sorted(p.name for p in generated.iterdir())
    for f in d.iterdir():
        os.utime(f, (0, 0))
    recs = [(r.offset, r.timestamp) for f in sorted(d.glob("*.log")) for b in read_batches(str(f))
            for r in b.records()]  # fmt: skip
    assert recs
    stamps = sorted({t for _, t in recs})
    probes = sorted({stamps[0] - 1, *stamps[:: max(1, len(stamps) // 60)], stamps[-1], stamps[-1] + 1})
    log = Log.open(d, LogConfig.from_properties({}), clean_shutdown=True)
    try:
        kafka = {t: getattr(log.offset_for_timestamp(t), "offset", None) for t in probes}
    finally:
        log.close()
    times = PartitionTimes(discover_segments(str(d)))
    ours = {t: times.offset_for(t) for t in probes}
    assert ours == kafka
    assert ours == {t: min((o for o, ts in recs if ts >= t), default=None) for t in probes}


def _write(root: Path, stamps: list[list[int]], props: dict | None = None) -> Path:
    """A partition ``t-0`` under ``root`` written by kafkalog's Log as a leader: one batch per inner list, its
    records stamped with the list's first timestamp, rolled every ``segment.bytes``."""
    log = Log.open(root / "t-0", {"segment.bytes": "600", "index.interval.bytes": "1", **(props or {})})
    try:
        for batch in stamps:
            assert len(set(batch)) == 1
            log.append_as_leader([(b"k", b"v%d" % i) for i in range(len(batch))], timestamp=batch[0])
    finally:
        log.close()
    return root / "t-0"


def _expected(stamps: list[list[int]], t: int) -> int | None:
    flat = [ts for batch in stamps for ts in batch]
    return next((o for o, ts in enumerate(flat) if ts >= t), None)


def _increasing(n_batches: int = 60, per_batch: int = 2) -> list[list[int]]:
    return [[T0 + 1000 * b] * per_batch for b in range(n_batches)]


def test_non_monotonic_timestamps_resolve_to_the_first_offset_at_or_after(tmp_path: Path) -> None:
    stamps = [[T0 + 100], [T0 + 300], [T0 + 200], [T0 + 400], [T0 + 50], [T0 + 500]] * 8
    d = _write(tmp_path, stamps)
    items = discover_segments(str(d))
    assert len(items) > 2
    for t in sorted({ts for b in stamps for ts in b} | {T0, T0 + 250, T0 + 450, T0 + 501}):
        assert offset_for_timestamp(items, t) == _expected(stamps, t), t


def test_missing_or_lying_time_indexes_still_give_the_right_offset(tmp_path: Path) -> None:
    stamps = _increasing()
    d = _write(tmp_path, stamps)
    items = discover_segments(str(d))
    assert len(items) >= 5
    probes = [T0 + 1000 * b + 1 for b in range(0, 60, 7)] + [T0 + 60_000]
    want = {t: _expected(stamps, t) for t in probes}
    assert {t: offset_for_timestamp(items, t) for t in probes} == want
    # a rolled segment's time index claims a smaller max (passes Kafka's sanity check): checked against the .log
    second = Path(items[1].sibling(".timeindex"))
    data = bytearray(second.read_bytes())
    ts, rel = struct.unpack(">qi", data[-12:])
    data[-12:] = struct.pack(">qi", ts - 500, rel)
    second.write_bytes(bytes(data))
    assert largest_timestamp(items[1], items[2].base_offset) == ts
    # one cut short at an entry boundary (every check passes; the batches after its last entry say more)
    fourth = Path(items[4].sibling(".timeindex"))
    flat = [s for b in stamps for s in b]
    fourth.write_bytes(fourth.read_bytes()[:12])
    assert largest_timestamp(items[4], items[5].base_offset) == max(flat[items[4].base_offset : items[5].base_offset])
    # one is missing, one is garbage: batch headers answer
    os.remove(items[2].sibling(".timeindex"))
    Path(items[3].sibling(".timeindex")).write_bytes(b"\x7f" * 25)
    assert largest_timestamp(items[3], items[4].base_offset) == max(flat[items[3].base_offset : items[4].base_offset])
    items = discover_segments(str(d))
    assert {t: offset_for_timestamp(items, t) for t in probes} == want


def test_a_damaged_batch_answers_the_offset_before_it(tmp_path: Path) -> None:
    """The search meets a bad CRC before any late-enough record: the answer is where the damage starts (a reader
    from there reports it), not a later segment's offset."""
    stamps = _increasing(20)
    d = _write(tmp_path, stamps, {"segment.bytes": "100000"})
    items = discover_segments(str(d))
    assert len(items) == 1
    from kafkalog.records.reader import read_batches

    batches = list(read_batches(items[0].path))
    bad = batches[10]  # the one holding T0 + 10_000
    with open(items[0].path, "r+b") as f:
        f.seek(bad.position + bad.size_in_bytes - 1)
        last = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([last[0] ^ 0xFF]))
    assert offset_for_timestamp(items, T0 + 10_000) == bad.base_offset == 20
    assert offset_for_timestamp(items, T0 + 9_500) == 20  # batch 9 ends below it: the damage could hold it
    assert offset_for_timestamp(items, T0 + 2_000) == _expected(stamps, T0 + 2_000) == 4
    assert offset_for_timestamp(items, T0 + 15_000) == 30  # past the damage, found with the time index
    # as an end bound the damage is kept inside the range: the answer is looked for in later segments (none here)
    assert PartitionTimes(items).offset_for(T0 + 10_000, past_damage=True) is None
