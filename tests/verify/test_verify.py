"""kafkalog.verify's segment and partition checks (the ones ``kafkalog verify`` and the Spark job share): golden
copies are ok, damaged copies give every corrupt range, I/O errors are ``unreadable`` (not ``corrupt``), and
partition continuity finds gaps, overlaps and checkpoints beyond the data."""

from __future__ import annotations

import builtins
import dataclasses
import json
import os
import struct
from pathlib import Path

import pytest

from kafkalog.archive.discovery import SegmentItem, discover_segments
from kafkalog.checkpoint import write_offset_checkpoint
from kafkalog.records import build_batch
from kafkalog.verify import (
    PARTITION_FIELDS,
    SEGMENT_FIELDS,
    PartitionReport,
    SegmentReport,
    exit_code,
    summarize,
    verify_log_file,
    verify_partition,
    verify_segment,
)
from tests.conftest import golden_cases, load_manifest, needs_golden


def _writable(root: Path) -> Path:
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for n in filenames:
            os.chmod(os.path.join(dirpath, n), 0o644)
    return root


def _reference_ranges(path: str, base_offset: int) -> list[tuple[int, int]]:
    """The corrupt ranges as the per-batch loop (the Spark job's original check) computed them, from BatchReport
    objects: every bad CRC, the first batch moving offsets backwards, the unreadable tail."""
    log = verify_log_file(path)
    ranges = []
    prev_last = base_offset - 1
    backwards_seen = False
    for b in log.batches:
        if not b.crc_valid:
            ranges.append((b.position, b.size))
        elif not backwards_seen and b.base_offset <= prev_last:
            backwards_seen = True
            ranges.append((b.position, b.size))
        prev_last = max(prev_last, b.last_offset)
    if log.invalid_bytes:
        ranges.append((log.invalid_position, log.invalid_bytes))
    return ranges


# ------------------------------------------------------------------------------------------------- segments


@needs_golden
@pytest.mark.parametrize("case", golden_cases())
def test_verify_segment_golden_is_ok(golden_copy, case: str) -> None:
    pdir = golden_copy(f"logdir/{case}")
    manifest = {s["baseOffset"]: s for s in load_manifest(f"manifests/{case}.json")["segments"]}
    items = discover_segments(pdir)
    assert [i.base_offset for i in items] == sorted(manifest)
    for item in items:
        rep = verify_segment(item)
        assert (rep.status, rep.error, rep.corrupt_ranges, rep.exception) == ("ok", None, [], None)
        assert rep.index_status == "ok", rep.index_error
        batches = manifest[item.base_offset]["log"]["batches"]
        assert rep.batch_count == len(batches)
        assert rep.record_count == sum(b["recordCount"] for b in batches)
        assert rep.valid_bytes == rep.size_bytes == os.path.getsize(item.path) and rep.invalid_bytes == 0
        if batches:
            assert (rep.first_offset, rep.last_offset) == (batches[0]["baseOffset"], batches[-1]["lastOffset"])
            assert rep.codecs == {b["compression"] for b in batches}
            assert rep.magics == {b["magic"] for b in batches}
            assert all(type(c) is str for c in rep.codecs) and all(type(m) is int for m in rep.magics)
        d = rep.to_dict()
        assert tuple(d) == SEGMENT_FIELDS and tuple(d.values()) == rep.to_row()
        assert d["path"] == rep.path == item.path and d["codecs"] == sorted(rep.codecs)
        json.dumps(d)  # plain values only


@needs_golden
def test_verify_segment_bad_crcs_and_backwards_offset(golden_copy) -> None:
    d = _writable(golden_copy("logdir/golden-segments-0"))
    seg = load_manifest("manifests/golden-segments-0.json")["segments"][0]
    batches = seg["log"]["batches"]
    path = d / seg["log"]["file"]
    data = bytearray(path.read_bytes())
    for i in (1, 5):  # last byte of the batch: CRC fails, structure intact
        data[batches[i]["position"] + batches[i]["sizeInBytes"] - 1] ^= 0xFF
    # batch 8 claims batch 3's base offset (the CRC does not cover the base offset): offsets move backwards
    struct.pack_into(">q", data, batches[8]["position"], batches[3]["baseOffset"])
    path.write_bytes(bytes(data))
    (item,) = [i for i in discover_segments(d) if i.base_offset == 0]
    rep = verify_segment(item)
    want = [(batches[i]["position"], batches[i]["sizeInBytes"]) for i in (1, 5, 8)]
    assert rep.status == "corrupt" and rep.corrupt_ranges == want == _reference_ranges(item.path, 0)
    assert all(type(p) is int and type(s) is int for p, s in rep.corrupt_ranges)
    assert rep.error == (
        f"2 batch(es) fail their CRC, first at position {batches[1]['position']}; "
        f"offset {batches[3]['baseOffset']} at position {batches[8]['position']} "
        f"does not follow {batches[7]['lastOffset']}"
    )
    assert rep.invalid_bytes == 0 and rep.exception is None


@needs_golden
def test_verify_segment_truncated_tail(golden_copy) -> None:
    d = _writable(golden_copy("logdir/golden-segments-0"))
    seg = load_manifest("manifests/golden-segments-0.json")["segments"][-1]
    last = seg["log"]["batches"][-1]
    path = d / seg["log"]["file"]
    cut = last["position"] + last["sizeInBytes"] // 2
    os.truncate(path, cut)
    (item,) = [i for i in discover_segments(d) if i.base_offset == seg["baseOffset"]]
    rep = verify_segment(item, index_check=False)
    assert rep.status == "corrupt" and rep.index_status == "not_checked"
    assert rep.corrupt_ranges == [(last["position"], cut - last["position"])] == _reference_ranges(item.path, 0)
    assert (rep.valid_bytes, rep.invalid_bytes, rep.size_bytes) == (last["position"], cut - last["position"], cut)
    assert rep.batch_count == len(seg["log"]["batches"]) - 1


def _one_segment(tmp_path: Path) -> SegmentItem:
    pdir = tmp_path / "logdir" / "t-0"
    pdir.mkdir(parents=True)
    (pdir / f"{0:020d}.log").write_bytes(build_batch([(b"k", b"v")] * 3, base_offset=0))
    (item,) = discover_segments(pdir)
    return item


def test_verify_segment_log_replaced_by_directory_is_unreadable(tmp_path: Path) -> None:
    item = _one_segment(tmp_path)
    os.unlink(item.path)
    os.mkdir(item.path)
    rep = verify_segment(item)
    assert rep.status == "unreadable" and isinstance(rep.exception, IsADirectoryError)
    assert rep.error.startswith("IsADirectoryError: ") and rep.corrupt_ranges == []
    assert rep.to_row()[SEGMENT_FIELDS.index("status")] == "unreadable"


def test_verify_segment_permission_denied_is_unreadable(tmp_path: Path, monkeypatch) -> None:
    item = _one_segment(tmp_path)
    real_open = builtins.open

    def deny(file, *a, **k):
        if os.fspath(file) == item.path:
            raise PermissionError(13, "Permission denied", item.path)
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", deny)
    rep = verify_segment(item)
    assert rep.status == "unreadable" and isinstance(rep.exception, PermissionError)
    assert rep.error == f"PermissionError: [Errno 13] Permission denied: '{item.path}'"
    monkeypatch.undo()
    assert verify_segment(item).status == "ok"


def test_verify_segment_vanished_file_is_unreadable(tmp_path: Path) -> None:
    item = _one_segment(tmp_path)
    os.unlink(item.path)
    rep = verify_segment(item)
    assert rep.status == "unreadable" and isinstance(rep.exception, FileNotFoundError)


def test_verify_segment_transformed_tiered_segment(tmp_path: Path) -> None:
    pdir = tmp_path / "t-AAAAAAAAAAAAAAAAAAAAAA" / "0"
    pdir.mkdir(parents=True)
    stem = f"{0:020d}-BBBBBBBBBBBBBBBBBBBBBB"
    (pdir / f"{stem}.log").write_bytes(b"\x00" * 100)
    (pdir / f"{stem}.indexes").write_bytes(b"")
    (pdir / f"{stem}.rsm-manifest").write_text(json.dumps({"compression": True}))
    (item,) = discover_segments(tmp_path)
    assert item.layout == "tiered-aiven"
    rep = verify_segment(item)  # a manifest that is no Aiven manifest: bad bytes, named, never "ok"
    assert rep.status == "corrupt" and rep.exception is None and "rsm-manifest: manifest version" in rep.error


# ----------------------------------------------------------------------------------------------- partitions


def _row(base: int, first: int | None, last: int | None, status: str = "ok", pdir: str = "/nowhere/t-0") -> dict:
    return {
        "partition_dir": pdir, "topic": "t", "partition": 0, "base_offset": base,
        "first_offset": first, "last_offset": last, "status": status,
    }  # fmt: skip


def test_verify_partition_continuous() -> None:
    p = verify_partition([_row(10, 10, 19), _row(0, 0, 9), _row(20, None, None)])  # any order in
    assert isinstance(p, PartitionReport)
    assert (p.status, p.gaps, p.overlaps, p.problems) == ("ok", [], [], [])
    assert (p.segment_count, p.corrupt_segments, p.log_start_offset, p.log_end_offset) == (3, 0, 0, 20)
    assert tuple(p.to_dict()) == PARTITION_FIELDS and p.to_row()[0] == "/nowhere/t-0"


def test_verify_partition_gap_and_overlap() -> None:
    gap = verify_partition([_row(0, 0, 9), _row(15, 17, 30)])
    assert gap.status == "gap" and gap.gaps == [(10, 16)] and gap.overlaps == []
    assert gap.log_end_offset == 31
    over = verify_partition([_row(0, 0, 9), _row(5, 5, 12), _row(13, 13, 14)])
    assert over.status == "overlap" and over.overlaps == [(5, 9)] and over.gaps == []
    assert over.problems == ["1 segment(s) overlap the previous one"]
    bad = verify_partition([_row(0, 0, 9), _row(10, 10, 19, status="corrupt")])
    assert bad.status == "corrupt" and bad.corrupt_segments == 1
    nan = verify_partition([_row(0, 0, 9), _row(10, float("nan"), float("nan"))])  # null longs via pandas
    assert nan.status == "ok" and nan.log_end_offset == 10
    with pytest.raises(ValueError):
        verify_partition([])


def test_verify_partition_checkpoint_beyond_log_end(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    write_offset_checkpoint(logdir / "recovery-point-offset-checkpoint", {("t", 0): 50})
    write_offset_checkpoint(logdir / "replication-offset-checkpoint", {("t", 0): 20})
    p = verify_partition([_row(0, 0, 19, pdir=str(logdir / "t-0"))])
    assert p.status == "checkpoint_mismatch"
    assert (p.checkpoint_recovery_point, p.checkpoint_log_start_offset, p.checkpoint_high_watermark) == (50, None, 20)
    assert p.problems == ["recovery point 50 is beyond the log end offset 20"]


@needs_golden
def test_verify_partition_from_segment_reports(golden_copy) -> None:
    logdir = golden_copy("logdir")
    reports = [verify_segment(i) for i in discover_segments(logdir / "golden-segments-0")]
    scenario = load_manifest("manifests/golden-segments-0.json")["scenario"]
    p = verify_partition(reversed(reports))
    assert p.status == "ok" and p.segment_count == scenario["segments"]
    assert (p.log_end_offset, p.checkpoint_recovery_point) == (scenario["logEndOffset"], scenario["recoveryPoint"])
    assert exit_code(reports, [p]) == 0
    text = summarize(reports, [p])
    assert text.startswith(f"kafkalog archive validation: {len(reports)} segment(s), 1 partition dir(s)")
    assert exit_code([r.to_dict() for r in reports], [p.to_dict()]) == 0


def test_exit_code_and_summary_of_damage(tmp_path: Path) -> None:
    item = _one_segment(tmp_path)
    with open(item.path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    rep = verify_segment(item)
    assert rep.status == "corrupt" and rep.corrupt_ranges == [(0, os.path.getsize(item.path))]
    part = verify_partition([rep])
    assert part.status == "corrupt" and exit_code([rep], [part]) == 1
    # an unreadable segment is an I/O error, as for `kafkalog verify` and api.md: 2 wins over 1
    gone = dataclasses.replace(item, path=str(tmp_path / "gone.log"))
    lost = verify_segment(gone)
    assert lost.status == "unreadable" and exit_code([lost], []) == 2
    assert exit_code([rep, lost], [part, verify_partition([lost])]) == 2
    assert exit_code([r.to_dict() for r in (rep, lost)], []) == 2
    assert f"  CORRUPT {item.path}: 1 batch(es) fail their CRC, first at position 0 [0+" in summarize([rep], [part])


def test_spark_schemas_name_the_library_fields() -> None:
    from kafkalog.spark.validate import PARTITION_SCHEMA, SEGMENT_SCHEMA

    def names(ddl: str) -> tuple[str, ...]:
        return tuple(col.split(" ")[0] for col in ddl.split(", "))

    assert names(SEGMENT_SCHEMA) == SEGMENT_FIELDS
    assert names(PARTITION_SCHEMA) == PARTITION_FIELDS
    assert SegmentReport.__dataclass_fields__.keys() >= set(SEGMENT_FIELDS) - {
        "path", "partition_dir", "topic", "partition", "base_offset", "layout", "dir_state", "log_status",
    }  # fmt: skip
