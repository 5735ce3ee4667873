"""Log.read refuses damaged batches that a load did not look at, and serves everything before them.

Kafka's broker hands out fetched bytes unchecked (its consumers verify CRCs). A damaged segment below the recovery
point, or under a clean-shutdown marker, is therefore served by Kafka as is. kafkalog's ``Log.read`` returns decoded
batches, so it checks them: a bad CRC, or offsets the CRC does not cover (v2 base offset, legacy message offset) going
backwards or past the segment, raise CorruptRecordError at that batch; reads before it return Kafka's records.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from kafkalog.errors import CorruptRecordError
from kafkalog.log import Log, LogConfig
from kafkalog.manager import LogManager
from kafkalog.names import file_name
from tests.conftest import GOLDEN, load_manifest, needs_golden
from tests.log.test_log_golden import _writable_copy

pytestmark = needs_golden


def _copy(case: str, dst: Path, *, legacy: bool = False) -> tuple[Path, dict]:
    assert GOLDEN is not None
    root = GOLDEN / "legacy" if legacy else GOLDEN
    return _writable_copy(root / "logdir" / case, dst), load_manifest(f"{'legacy/' if legacy else ''}manifests/{case}.json")


def _config(manifest: dict) -> LogConfig:
    props = {k: v for k, v in manifest["scenario"]["topicConfig"].items() if k != "message.format.version"}
    return LogConfig.from_properties(props)


def _patch(path: Path, position: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        f.write(data)


def _records(batches) -> list[tuple[int, str | None]]:
    return [(r.offset, None if r.value is None else r.value.hex()) for b in batches for r in b.records()]


def _manifest_records(segment: dict, upto_batch: int) -> list[tuple[int, str | None]]:
    return [(r["offset"], r["value"]) for b in segment["log"]["batches"][:upto_batch] for r in b["records"]]


def _read_all(log: Log, start: int) -> tuple[list, CorruptRecordError | None]:
    """Read batch after batch from ``start`` as a consumer would; stop at the first error."""
    out: list = []
    offset = start
    while offset < log.log_end_offset:
        try:
            got = log.read(offset, 1 << 20)
        except CorruptRecordError as e:
            return out, e
        out.extend(got)
        offset = got[-1].last_offset + 1
    return out, None


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_bad_crc_below_the_recovery_point_is_refused_not_served(tmp_path: Path, clean_shutdown: bool) -> None:
    d, manifest = _copy("golden-segments-0", tmp_path / "golden-segments-0")
    seg = manifest["segments"][1]
    bad = seg["log"]["batches"][5]
    # a flipped bit in the last record's value: inside the CRC-covered bytes, nothing else notices it
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"] + bad["sizeInBytes"] - 3, b"\xff")

    with Log.open(d, _config(manifest), clean_shutdown=clean_shutdown,
                  recovery_point=manifest["scenario"]["recoveryPoint"]) as log:
        batches, error = _read_all(log, seg["baseOffset"])
        assert _records(batches) == _manifest_records(seg, 5)
        assert error is not None and error.position == bad["position"]
        assert "crc" in str(error) and f"{seg['baseOffset']:020d}.log" in str(error)
        # reading at the damaged batch raises every time; nothing was cut from the file
        with pytest.raises(CorruptRecordError):
            log.read(bad["baseOffset"])
        after = seg["log"]["batches"][6]
        assert _records(log.read(after["baseOffset"])[:1]) == [(r["offset"], r["value"]) for r in after["records"]]
    # the read cut nothing: the .log still holds every batch Kafka wrote
    assert file_name(d, seg["baseOffset"], ".log").stat().st_size == sum(
        b["sizeInBytes"] for b in seg["log"]["batches"])


def test_v2_base_offset_flip_is_refused(tmp_path: Path) -> None:
    # the base offset is outside the CRC: only the order of offsets can tell it is wrong
    d, manifest = _copy("golden-segments-0", tmp_path / "golden-segments-0")
    seg = manifest["segments"][2]
    bad = seg["log"]["batches"][3]
    prev = seg["log"]["batches"][2]
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"], struct.pack(">q", prev["baseOffset"]))
    with Log.open(d, _config(manifest)) as log:
        got = log.read(seg["baseOffset"], 1 << 20)
        assert _records(got) == _manifest_records(seg, 3)
        with pytest.raises(CorruptRecordError, match="go backwards") as info:
            log.read(prev["lastOffset"] + 1)
        assert info.value.position == bad["position"]


def test_legacy_message_offset_flip_is_refused(tmp_path: Path) -> None:
    # magic 1, uncompressed: each message's offset is outside its CRC
    d, manifest = _copy("legacy-v1-none-0", tmp_path / "legacy-v1-none-0", legacy=True)
    seg = manifest["segments"][1]
    bad = seg["log"]["batches"][4]
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"], struct.pack(">q", bad["baseOffset"] + (1 << 23)))
    with Log.open(d, _config(manifest)) as log:
        batches, error = _read_all(log, seg["baseOffset"])
        assert _records(batches) == _manifest_records(seg, 4)
        assert error is not None and error.position == bad["position"]


def test_undamaged_golden_logs_read_back_whole(tmp_path: Path) -> None:
    for case, legacy in (("golden-txn-0", False), ("golden-zstd-0", False), ("legacy-mixed-0", True)):
        d, manifest = _copy(case, tmp_path / case, legacy=legacy)
        with Log.open(d, _config(manifest)) as log:
            batches, error = _read_all(log, log.log_start_offset)
        assert error is None, (case, error)
        expected = [(r["offset"], r["value"]) for s in manifest["segments"] for b in s["log"]["batches"]
                    for r in b["records"] if r["offset"] >= manifest["scenario"]["logStartOffset"]]
        assert _records(batches) == expected, case


def test_manager_read_of_a_lazily_checked_segment_with_a_bad_crc(tmp_path: Path) -> None:
    # KIP-263's check looks at indexes and batch framing, not CRCs: the read is what catches the bad payload,
    # with a typed error; the dir stays online and other offsets keep being served.
    assert GOLDEN is not None
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    for f in (GOLDEN / "logdir").iterdir():
        if f.is_file():
            shutil.copyfile(f, logdir / f.name)
    d, manifest = _copy("golden-segments-0", logdir / "golden-segments-0")
    seg = manifest["segments"][3]
    bad = seg["log"]["batches"][2]
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"] + bad["sizeInBytes"] - 2, b"\x00\x00")
    props = {"sanity.check.all.logs.enabled": "false", "node.id": 1,
             "cluster.id": (GOLDEN / "logdir" / "meta.properties").read_text().split("cluster.id=")[1].split()[0]}
    with LogManager([logdir], properties=props, log_config=_config(manifest)) as m:
        with pytest.raises(CorruptRecordError):
            m.read("golden-segments", 0, bad["baseOffset"])
        assert m.offline_log_dirs == []
        first = seg["log"]["batches"][0]
        assert _records(m.read("golden-segments", 0, first["baseOffset"])) == _manifest_records(seg, 2)


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_base_offset_flipped_back_in_the_batch_a_lookup_lands_on(tmp_path: Path, clean_shutdown: bool) -> None:
    # An index entry per batch: a read of a batch's last offset starts exactly at that batch, so no earlier batch
    # is scanned to compare its offsets with. The entry before it in the index still bounds them from below.
    d, manifest = _copy("golden-index-dense-0", tmp_path / "golden-index-dense-0")
    seg = manifest["segments"][0]
    bad, prev = seg["log"]["batches"][3], seg["log"]["batches"][2]
    assert {"offset": bad["lastOffset"], "position": bad["position"]} in seg["offsetIndex"]["entries"]
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"], struct.pack(">q", prev["baseOffset"]))
    with Log.open(d, _config(manifest), clean_shutdown=clean_shutdown,
                  recovery_point=manifest["scenario"]["recoveryPoint"]) as log:
        for target in range(bad["baseOffset"], bad["lastOffset"] + 1):
            with pytest.raises(CorruptRecordError, match="go backwards") as info:
                log.read(target, 1 << 20)
            assert info.value.position == bad["position"], target
        # the batches before and after it are served as Kafka wrote them
        assert _records(log.read(prev["baseOffset"], 1)) == _manifest_records({"log": {"batches": [prev]}}, 1)
        nxt = seg["log"]["batches"][4]
        assert _records(log.read(nxt["lastOffset"], 1)) == _manifest_records({"log": {"batches": [nxt]}}, 1)


def test_an_index_entry_that_overstates_its_offset_does_not_refuse_healthy_batches(tmp_path: Path) -> None:
    # The lower bound a lookup takes from the entry before its own is only a hint: when the batch disagrees with
    # it, the segment is scanned from that earlier entry, and only a real step backwards in the log is an error.
    d, manifest = _copy("golden-index-dense-0", tmp_path / "golden-index-dense-0")
    seg = manifest["segments"][0]
    entries = seg["offsetIndex"]["entries"]
    # entry 2 (offset 19) claims offset 20: lookups still work (no batch before its position holds 20)
    _patch(file_name(d, seg["baseOffset"], ".index"), 2 * 8, struct.pack(">i", entries[2]["offset"] + 1 - seg["baseOffset"]))
    with Log.open(d, _config(manifest)) as log:
        batches, error = _read_all(log, seg["baseOffset"])
        assert error is None
        assert _records(batches)[: sum(len(b["records"]) for b in seg["log"]["batches"])] == _manifest_records(
            seg, len(seg["log"]["batches"]))
        target = entries[3]["offset"]  # a lookup landing on entry 3 sees the overstated entry 2 before it
        got = log.read(target, 1)
        assert got[0].base_offset <= target <= got[0].last_offset


def test_first_batch_of_a_segment_flipped_below_the_segment_base_is_refused(tmp_path: Path) -> None:
    # no index entry below the target: the read starts at position 0, where the file name is the lower bound
    d, manifest = _copy("golden-segments-0", tmp_path / "golden-segments-0")
    seg = manifest["segments"][2]
    first = seg["log"]["batches"][0]
    _patch(file_name(d, seg["baseOffset"], ".log"), 0, struct.pack(">q", seg["baseOffset"] - 40))
    with Log.open(d, _config(manifest)) as log:
        with pytest.raises(CorruptRecordError, match="go backwards") as info:
            log.read(first["lastOffset"], 1 << 20)
        assert info.value.position == 0


@pytest.mark.parametrize("case", ["legacy-v0-gzip-0", "legacy-v1-gzip-0"])
def test_legacy_wrapper_offset_flipped_far_ahead_is_cut_by_recovery(tmp_path: Path, case: str) -> None:
    # Found by the damaged-golden harness (seed 20): a compressed wrapper's offset (outside its CRC) 2**35 ahead of
    # its inner offsets made the header scan overflow (an untyped OverflowError out of Log.open).
    d, manifest = _copy(case, tmp_path / case, legacy=True)
    seg = next(s for s in manifest["segments"] if len(s["log"]["batches"]) >= 3)
    bad = seg["log"]["batches"][1]
    assert bad["compression"] == "gzip"
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"], struct.pack(">q", bad["lastOffset"] + (1 << 35)))
    with Log.open(d, _config(manifest), clean_shutdown=False, recovery_point=0) as log:
        assert log.log_end_offset == bad["baseOffset"]
        batches, error = _read_all(log, log.log_start_offset)
    assert error is None
    expected = [(r["offset"], r["value"]) for s in manifest["segments"] for b in s["log"]["batches"]
                for r in b["records"] if r["offset"] < bad["baseOffset"]]
    assert _records(batches) == expected


def test_last_batch_of_the_log_flipped_beyond_what_its_segment_can_hold_is_refused(tmp_path: Path) -> None:
    # Found by the damaged-golden harness (seed 34): bit 60 of the log's final wrapper offset. No later batch or
    # segment contradicts it, but no segment holds offsets more than an int32 past its base offset.
    d, manifest = _copy("legacy-v1-gzip-0", tmp_path / "legacy-v1-gzip-0", legacy=True)
    seg = manifest["segments"][-1]
    bad = seg["log"]["batches"][-1]
    _patch(file_name(d, seg["baseOffset"], ".log"), bad["position"], struct.pack(">q", bad["lastOffset"] | (1 << 60)))
    with Log.open(d, _config(manifest)) as log:
        batches, error = _read_all(log, log.log_start_offset)
    assert error is not None and error.position == bad["position"]
    assert _records(batches) == [(r["offset"], r["value"]) for s in manifest["segments"] for b in s["log"]["batches"]
                                 for r in b["records"] if r["offset"] < bad["baseOffset"]]
