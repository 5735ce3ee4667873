"""kafkalog.verify's metadata checks, findings and index-vs-log matching: the rules ``kafkalog verify``,
``kafkalog dump`` and the Spark job share (so a Spark partition row and the CLI's partition line agree)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from kafkalog.archive.discovery import discover_segments
from kafkalog.checkpoint import write_leader_epoch_checkpoint, write_offset_checkpoint
from kafkalog.checkpoint.leader_epoch import EpochEntry
from kafkalog.errors import CorruptCheckpointError, InvalidArgumentError, KafkaStorageError
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex
from kafkalog.records.reader import open_source, read_batches
from kafkalog.records.scan import scan_batches
from kafkalog.verify import (
    Finding,
    Tally,
    check_file,
    check_log_dir,
    check_partition_files,
    describe_error,
    error_finding,
    exit_code,
    index_match,
    match_offset_index,
    match_time_index,
    partition_finding,
    plan_paths,
    run_plan,
    verify_partition,
    verify_segment,
)
from kafkalog.verify.index_match import live_entry_count
from tests.conftest import needs_golden


def _row(base: int, first, last, *, pdir: str, status: str = "ok") -> dict:
    return {"partition_dir": pdir, "topic": "t", "partition": 0, "base_offset": base, "first_offset": first,
            "last_offset": last, "status": status, "index_status": "ok"}  # fmt: skip


def test_describe_error_is_the_corruption_rule() -> None:
    assert describe_error(CorruptCheckpointError("bad line 3")) == ("corrupt", "corrupt checkpoint: bad line 3")
    assert describe_error(KafkaStorageError("disk gone")) == ("error", "storage error: disk gone")
    assert describe_error(InvalidArgumentError("no")) == ("error", "no")
    assert describe_error(PermissionError(13, "Permission denied", "/x")) == ("error", "/x: Permission denied")
    assert describe_error(RuntimeError("bug"))[0] == "internal"
    corrupt = error_finding("file", "/x", CorruptCheckpointError("bad"))
    assert (corrupt.status, corrupt.problems, corrupt.exception) == ("corrupt", ["corrupt checkpoint: bad"], None)
    io = error_finding("file", "/x", OSError(5, "Input/output error"))
    assert io.status == "error" and isinstance(io.exception, OSError)


def test_tally_counts_and_exit_code() -> None:
    t = Tally()
    for status in ("ok", "warning", "ok"):
        t.add(Finding("segment", "/s", status, checked_bytes=10))
    assert (t.exit_code, t.checked_bytes, t.plain_counts()) == (0, 30, {"segment": {"ok": 2, "warning": 1}})
    t.add(Finding("partition", "/p", "corrupt"))
    assert t.exit_code == 1
    t.add(Finding("file", "/f", "error"))
    assert t.exit_code == 2


def test_partition_files_epochs_order_and_log_end(tmp_path: Path) -> None:
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    assert check_partition_files(str(pdir), 10).status == "ok"
    write_leader_epoch_checkpoint(pdir / "leader-epoch-checkpoint", [EpochEntry(0, 0), EpochEntry(2, 5)])
    ok = check_partition_files(str(pdir), 10)
    assert ok.status == "ok" and ok.leader_epochs == [{"epoch": 0, "startOffset": 0}, {"epoch": 2, "startOffset": 5}]
    beyond = check_partition_files(str(pdir), 4)
    assert beyond.status == "corrupt"
    assert beyond.problems == ["leader-epoch-checkpoint: epoch 2 starts at 5, beyond the log end offset 4"]
    (pdir / "partition.metadata").write_text("version: 0\ntopic_id: ???\n")
    bad_meta = check_partition_files(str(pdir), 10)
    assert bad_meta.status == "corrupt" and bad_meta.topic_id is None
    assert bad_meta.problems[0].startswith("partition.metadata: corrupt checkpoint")


def test_spark_partition_row_sees_metadata_files(tmp_path: Path) -> None:
    """verify_partition (the Spark job's partition check) reports what the CLI's partition line reports."""
    pdir = tmp_path / "logdir" / "t-0"
    pdir.mkdir(parents=True)
    (pdir / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n1 5\n")
    rows = [_row(0, 0, 9, pdir=str(pdir))]
    p = verify_partition(rows)
    assert (p.continuity, p.status) == ("ok", "corrupt")
    assert p.problems == ["leader-epoch-checkpoint: entry EpochEntry(epoch=1, start_offset=5) does not follow "
                          "EpochEntry(epoch=3, start_offset=0)"]  # fmt: skip
    assert exit_code(rows, [p]) == 1
    finding = partition_finding(str(pdir), rows)
    assert finding.status == "corrupt" and finding.problems == p.problems
    assert finding.data["continuity"] == "ok"


def test_partition_finding_corrupt_segment(tmp_path: Path) -> None:
    pdir = str(tmp_path / "t-0")
    f = partition_finding(pdir, [_row(0, 0, 9, pdir=pdir), _row(10, 10, 19, pdir=pdir, status="corrupt")])
    assert f.status == "corrupt" and f.data["continuity"] == "corrupt" and "1 segment(s) not ok" in f.problems
    gap = partition_finding(pdir, [_row(0, 0, 9, pdir=pdir), _row(20, 20, 29, pdir=pdir)])
    assert gap.status == "ok" and gap.data["continuity"] == "gap"


def test_log_dir_checkpoints_against_dirs_present(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    (logdir / "a-0").mkdir(parents=True)
    write_offset_checkpoint(logdir / "recovery-point-offset-checkpoint", {("a", 0): 1, ("b", 3): 2})
    f = check_log_dir(str(logdir), [str(logdir / "a-0")])
    assert f.status == "ok" and f.summary == "1 partition dirs"
    assert f.data["recovery-point-offset-checkpoint"] == {"entries": 2, "partitionsNotInDir": ["b-3"]}
    (logdir / "log-start-offset-checkpoint").write_text("0\n1\nbroken\n")
    bad = check_log_dir(str(logdir), [str(logdir / "a-0")])
    assert bad.status == "corrupt" and bad.problems[0].startswith("log-start-offset-checkpoint: corrupt checkpoint")


def test_loose_files(tmp_path: Path) -> None:
    cp = tmp_path / "replication-offset-checkpoint"
    write_offset_checkpoint(cp, {("a", 0): 1})
    assert (check_file(str(cp)).status, check_file(str(cp)).summary) == ("ok", "offset-checkpoint, 1 entries")
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert check_file(str(other)).problems == ["not a segment, checkpoint or metadata file"]


@needs_golden
def test_plan_and_run_over_a_log_dir(golden_copy) -> None:
    logdir = golden_copy("logdir")
    plan = plan_paths([str(logdir), str(logdir / "nope")])
    assert [e.path for e in plan.errors] == [str(logdir / "nope")]
    assert plan.log_dirs == {os.path.realpath(logdir)}
    findings = list(run_plan(plan))
    kinds = [f.kind for f in findings]
    assert kinds == sorted(kinds, key=["segment", "partition", "logdir", "file"].index)
    assert all(f.status == "ok" for f in findings)
    assert kinds.count("segment") == len(plan.segments)
    assert sum(f.checked_bytes for f in findings) == plan.total_bytes


def test_live_entry_count() -> None:
    assert live_entry_count(np.array([5, 7, 9]), 5) == 3
    assert live_entry_count(np.array([5, 7, 5, 5]), 5) == 2  # a sparse tail after a crash
    assert live_entry_count(np.array([], dtype=np.int64), 5) == 0


# --------------------------------------------------------------------------------- index entries vs the log


def _per_entry_offset_reference(offsets, positions, log, max_size):
    """Kafka's DumpLogSegments rule, entry by entry: read the batch at the entry's position."""
    out = []
    for off, pos in zip(offsets.tolist(), positions.tolist(), strict=True):
        batch = None
        if 0 <= pos < len(log):
            batch = next(iter(read_batches(log, position=pos, end=min(len(log), pos + max_size))), None)
        found = batch.last_offset if batch is not None else -1
        if found != off:
            out.append((off, found))
    return out


@needs_golden
def test_offset_index_match_finds_every_damaged_entry(golden_copy, tmp_path: Path) -> None:
    d = golden_copy("logdir/golden-index-dense-0")
    (item,) = [i for i in discover_segments(d) if i.base_offset == 0]
    index = OffsetIndex(item.sibling(".index"), 0, writable=False)
    entries = index.entries_array()
    index.close()
    assert len(entries) > 10
    log, _ = open_source(item.path)
    assert match_offset_index(entries["offset"], entries["position"], log, max_size=1 << 20).mismatches == []
    rng = np.random.default_rng(3)
    offsets, positions = entries["offset"].copy(), entries["position"].copy()
    picked = rng.choice(len(entries), 6, replace=False)
    offsets[picked[:2]] += 1  # wrong offset at a batch start
    positions[picked[2:4]] += 3  # a position between batch starts
    positions[picked[4]] = len(log) + 10  # past the end
    want = _per_entry_offset_reference(offsets, positions, log, 1 << 20)
    got = match_offset_index(offsets, positions, log, max_size=1 << 20).mismatches
    assert got == want and len(got) >= 3
    # a batch larger than the slice Kafka reads is not found (-1)
    tiny = match_offset_index(entries["offset"][:1], entries["position"][:1], log, max_size=10).mismatches
    assert tiny == [(int(entries["offset"][0]), -1)]


@needs_golden
def test_time_index_match(golden_copy) -> None:
    d = golden_copy("logdir/golden-index-dense-0")
    (item,) = [i for i in discover_segments(d) if i.base_offset == 0]
    index = TimeIndex(item.sibling(".timeindex"), 0, writable=False)
    entries = index.entries_array()
    index.close()
    log, _ = open_source(item.path)
    clean = match_time_index(entries["timestamp"], entries["offset"], log)
    assert (clean.not_found, clean.mismatch, clean.out_of_order) == ([], [], [])
    ts, off = entries["timestamp"].copy(), entries["offset"].copy()
    ts[2] = ts[1]  # repeats the previous timestamp: a mismatch and out of order
    off[4] += 1  # not a batch's last offset
    m = match_time_index(ts, off, log)
    assert m.out_of_order == [(int(ts[1]), int(ts[1]))]
    assert m.mismatch == [(int(ts[1]), int(entries["timestamp"][2]))]
    assert len(m.not_found) == 1 and m.not_found[0][0] == int(off[4]) and m.not_found[0][1] > off[4]


@needs_golden
def test_verify_segment_and_finding_agree(golden_copy) -> None:
    d = golden_copy("logdir/golden-segments-0")  # segment 0 is not the active one: a bad index there is damage
    (item,) = [i for i in discover_segments(d) if i.base_offset == 0]
    os.chmod(item.sibling(".index"), 0o644)
    data = bytearray(Path(item.sibling(".index")).read_bytes())
    struct.pack_into(">i", data, 4, 7)
    Path(item.sibling(".index")).write_bytes(bytes(data))
    rep = verify_segment(item)
    assert rep.index_status == "corrupt"
    (seg_finding,) = [f for f in run_plan(plan_paths([str(d)])) if f.kind == "segment" and f.path == item.path]
    assert seg_finding.status == "corrupt" and seg_finding.data["indexStatus"] == "corrupt"


def test_unknown_partition_dir_has_no_files(tmp_path: Path) -> None:
    assert check_partition_files(str(tmp_path / "missing"), None).problems == []
    with pytest.raises(ValueError):
        verify_partition([])


@needs_golden
@pytest.mark.parametrize("window", [100, 1000, 4096, 1 << 20])
def test_scan_log_batches_in_windows_equals_one_scan(golden_copy, monkeypatch, window: int) -> None:
    """Scanning in steps (pages given back behind) finds the same batches and stops where one scan stops, also
    with a batch larger than the step and a torn tail in the middle of the file."""
    monkeypatch.setattr(index_match, "_WINDOW", window)
    d = golden_copy("logdir/golden-segments-0")
    (item,) = [i for i in discover_segments(d) if i.base_offset == 0]
    data = Path(item.path).read_bytes()
    for log in (data, data[: len(data) // 2 + 7], data[:5]):
        whole = scan_batches(log, check_crc=False)
        released: list[int] = []
        got = index_match.scan_log_batches(memoryview(log), released.append)
        assert got.positions.tolist() == whole.positions.tolist()
        assert got.last_offsets.tolist() == whole.last_offsets.tolist()
        assert got.sizes.tolist() == whole.sizes.tolist()
        assert released == sorted(released) and all(r in set(whole.positions.tolist()) for r in released)


def test_a_log_dirs_checkpoints_are_parsed_once_per_version(tmp_path, monkeypatch) -> None:
    """read_checkpoint_offsets for each of a log dir's partitions parses each checkpoint once, not once per
    partition (that made a log dir's check quadratic in its partitions); a rewritten checkpoint is read again."""
    from kafkalog.checkpoint.offset_checkpoint import write_offset_checkpoint
    from kafkalog.verify import metadata

    parts = {("t", p): 10 * p for p in range(50)}
    for p in range(50):
        (tmp_path / f"t-{p}").mkdir()
    write_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint", parts)
    calls: list[str] = []
    real = metadata.read_offset_checkpoint
    monkeypatch.setattr(metadata, "read_offset_checkpoint", lambda path: calls.append(str(path)) or real(path))
    metadata._parsed_checkpoint.cache_clear()
    got = [metadata.read_checkpoint_offsets(str(tmp_path / f"t-{p}"), "t", p)[0] for p in range(50)]
    assert got == [10 * p for p in range(50)] and len(calls) == 1
    write_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint", {("t", 3): 99})
    assert metadata.read_checkpoint_offsets(str(tmp_path / "t-3"), "t", 3)[0] == 99 and len(calls) == 2
    assert metadata.read_checkpoint_offsets(str(tmp_path / "t-4"), "t", 4)[0] is None
