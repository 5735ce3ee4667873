"""Log against Kafka's own files: open every golden partition, recover the unclean/loader cases, and re-write
every golden partition through ``append_as_follower``; all compared byte for byte with what Kafka wrote."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kafkalog.errors import KafkaStorageError
from kafkalog.log import Log
from kafkalog.log.producer_snapshot import read_producer_snapshot
from kafkalog.records import read_batches
from tests.conftest import GOLDEN, golden_cases, load_manifest, needs_golden

pytestmark = needs_golden

CLOCK_MS = 1_700_000_000_000


def _scenarios() -> dict[str, dict]:
    if GOLDEN is None:
        return {}
    data = json.loads((GOLDEN / "SCENARIOS.json").read_text())
    return {Path(s["dir"]).name: s for s in data["scenarios"]}


def _writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in dst.iterdir():
        p.chmod(0o644)
    dst.chmod(0o755)
    return dst


def _diff(expected: Path, actual: Path, *, ignore: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(files that differ or are missing, files that should not be there)."""
    differ = [
        f.name for f in sorted(expected.iterdir())
        if f.name not in ignore and (not (actual / f.name).exists() or f.read_bytes() != (actual / f.name).read_bytes())
    ]
    extra = sorted(f.name for f in actual.iterdir() if not (expected / f.name).exists() and f.name not in ignore)
    return differ, extra


def _unclean_cases(kind: str) -> list[dict]:
    if GOLDEN is None:
        return []
    out = []
    index = GOLDEN / kind / "SCENARIOS.json" if kind == "loader" else GOLDEN / "SCENARIOS.json"
    for entry in json.loads(index.read_text())["unclean"]:
        out.append(load_manifest(f"{kind}/manifests/{entry['case']}.result.json") | {"_kind": kind})
    return out


def _case_paths(case: dict) -> tuple[Path, Path]:
    assert GOLDEN is not None
    base = GOLDEN / case["_kind"] if case["_kind"] == "loader" else GOLDEN
    return base / case["input"], base / case["recovered"]


@pytest.mark.parametrize("case", golden_cases())
def test_open_golden_partition_matches_manifest(case: str, tmp_path: Path) -> None:
    scen = _scenarios()[case]
    manifest = load_manifest(f"manifests/{case}.json")
    d = _writable_copy(GOLDEN / "logdir" / case, tmp_path / case)
    log = Log.open(
        d, scen["topicConfig"], log_start_offset=scen["logStartOffset"], recovery_point=scen["recoveryPoint"],
        clock=lambda: CLOCK_MS,
    )
    assert log.log_start_offset == scen["logStartOffset"]
    assert log.log_end_offset == scen["logEndOffset"]
    assert log.recovery_point == scen["recoveryPoint"]
    assert log.topic_id == scen["topicId"]
    assert log.topic, log.partition == (case.rsplit("-", 1)[0], 0)
    assert len(log.segments) == scen["segments"]
    epochs = manifest["leaderEpochCheckpoint"]
    want = [(e["epoch"], e["startOffset"]) for e in (epochs.get("entries") if isinstance(epochs, dict) else epochs)]
    assert [tuple(e) for e in log.leader_epoch_cache.entries()] == want
    log.close()
    # Kafka's loader drops snapshots at or below the log start offset (see loader-deleted-leftovers).
    ignore = {f"{o:020d}.snapshot" for o in range(0, scen["logStartOffset"] + 1)}
    differ, extra = _diff(GOLDEN / "logdir" / case, d, ignore=ignore)
    assert differ == [] and extra == []


@pytest.mark.parametrize("case", golden_cases())
def test_producer_snapshots_match_manifest(case: str, tmp_path: Path) -> None:
    manifest = load_manifest(f"manifests/{case}.json")
    scen = _scenarios()[case]
    d = _writable_copy(GOLDEN / "logdir" / case, tmp_path / case)
    with Log.open(d, scen["topicConfig"], log_start_offset=scen["logStartOffset"], clock=lambda: CLOCK_MS) as log:
        psm = log.producer_state
        end = max(manifest["producerSnapshots"], key=lambda s: s.get("offset", 0)) if manifest["producerSnapshots"] else None
        if end is not None:
            entries = end.get("entries", [])
            assert sorted(psm.producers) == sorted(e["producerId"] for e in entries)
            for e in entries:
                got = psm.producers[e["producerId"]]
                assert got.producer_epoch == e["producerEpoch"]
                assert got.last_seq == e["lastSeq"]
                assert got.last_data_offset == e["lastDataOffset"]
                assert got.coordinator_epoch == e["coordinatorEpoch"]
                assert got.current_txn_first_offset == e["currentTxnFirstOffset"]
                assert got.last_timestamp == e["lastTimestamp"]
    for snap in manifest["producerSnapshots"]:
        path = d / snap["file"] if "file" in snap else d / f"{snap['offset']:020d}.snapshot"
        if path.exists():
            assert [e.producer_id for e in read_producer_snapshot(path)] == [
                e["producerId"] for e in snap.get("entries", [])
            ]


@pytest.mark.parametrize("case", _unclean_cases("unclean") + _unclean_cases("loader"), ids=lambda c: c["case"])
def test_unclean_and_loader_cases_match_kafka(case: dict, tmp_path: Path) -> None:
    src, recovered = _case_paths(case)
    d = _writable_copy(src, tmp_path / src.name)
    args = case["loadArgs"]
    clock = case.get("loadEnvironment", {}).get("brokerClockMs", CLOCK_MS + 10**7)
    open_kwargs = dict(
        log_start_offset=args["logStartOffsetCheckpoint"], recovery_point=args["recoveryPointCheckpoint"],
        clean_shutdown=args["hadCleanShutdown"], clock=lambda: clock,
    )
    if case.get("kafkaException"):
        # Kafka refuses a malformed leader-epoch checkpoint; kafkalog can do the same on request ...
        with pytest.raises(KafkaStorageError):
            Log.open(d, case["topicConfig"], rebuild_bad_epoch_checkpoint=False, **open_kwargs)
        # ... and by default rebuilds it from the batches without losing a record.
        with Log.open(d, case["topicConfig"], **open_kwargs) as log:
            assert log.epoch_cache_rebuilt
            assert log.log_end_offset == case["logEndOffsetBeforeDamage"]
        assert (d / "leader-epoch-checkpoint").read_text() == case["damage"]["originalContent"]
        differ, extra = _diff(recovered, d, ignore={"leader-epoch-checkpoint"})
        assert differ == [] and extra == []
        return
    log = Log.open(d, case["topicConfig"], **open_kwargs)
    result = case["kafkaLoadResult"]
    assert log.log_start_offset == result["logStartOffset"]
    assert log.log_end_offset == result["nextOffset"]
    assert log.active_segment.base_offset == result["nextOffsetSegmentBase"]
    assert log.active_segment.size == result["nextOffsetPosition"]
    after = case.get("afterInit")
    if after:
        assert log.segments.base_offsets() == after["segmentBaseOffsets"]
        assert log.recovery_point == after["recoveryPoint"]
        assert [tuple(e) for e in log.leader_epoch_cache.entries()] == [
            (e["epoch"], e["startOffset"]) for e in after["leaderEpochs"]
        ]
        assert sorted(log.producer_state.producers) == sorted(p["producerId"] for p in after["activeProducers"])
        for p in after["activeProducers"]:
            got = log.producer_state.producers[p["producerId"]]
            assert (got.producer_epoch, got.last_seq, got.last_data_offset, got.current_txn_first_offset) == (
                p["producerEpoch"], p["lastSeq"], p["lastDataOffset"], p["currentTxnFirstOffset"],
            )
    else:
        assert log.recovery_point == result["recoveryPoint"]
    log.close()
    differ, extra = _diff(recovered, d)
    assert differ == [] and extra == []


@pytest.mark.parametrize("case", golden_cases())
def test_rewrite_golden_through_follower_path_is_byte_identical(case: str, tmp_path: Path) -> None:
    """The strongest check: Kafka's batches appended one by one reproduce every file Kafka wrote."""
    scen = _scenarios()[case]
    src = GOLDEN / "logdir" / case
    d = tmp_path / case
    log = Log.open(d, scen["topicConfig"], topic_id=scen["topicId"], clock=lambda: CLOCK_MS)
    for f in sorted(src.glob("*.log")):
        for batch in read_batches(f.read_bytes()):
            log.append_as_follower(bytes(batch.raw))
    if scen["logStartOffset"]:
        log.maybe_increment_log_start_offset(scen["logStartOffset"])
    assert log.log_end_offset == scen["logEndOffset"]
    log.close()
    differ, extra = _diff(src, d)
    assert differ == [] and extra == []
