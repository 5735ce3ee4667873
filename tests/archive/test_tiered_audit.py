"""``kafkalog tiered audit``: a Kafka-written LocalTieredStorage bucket (``kafka-oracle generate-tiered``) against
its ``__remote_log_metadata``, healthy and with each kind of damage made here; Aiven's golden objects likewise."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.metadata.codec import write_message
from kafkalog.metadata.remote_log import decode_remote_log_record, read_remote_log_metadata
from kafkalog.metadata.remote_log_records import REMOTE_LOG_RECORDS
from kafkalog.records import build_batch, read_batches
from kafkalog.verify.tiered_audit import audit_bucket
from tests.conftest import GOLDEN, needs_golden
from tests.oracle import needs_oracle, run_oracle

TOPIC_ID = "dGllcmVkAAAAAAAAAAAEBQ"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiered") / "gen"
    run_oracle("generate-tiered", out)
    return out


@pytest.fixture
def case(generated: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "case"
    shutil.copytree(generated, dst)
    return dst


def _bucket_dir(case: Path) -> Path:
    return case / "remote" / "kafka-tiered-storage" / f"tiered-0-{TOPIC_ID}"


def _segment_objects(case: Path, base: int) -> list[Path]:
    return sorted(_bucket_dir(case).glob(f"{base:020d}-*"))


def _append_event(case: Path, api_key: int, data: dict) -> None:
    """Append one record to ``__remote_log_metadata-0`` as the metadata manager's producer would."""
    log = case / "__remote_log_metadata-0" / "00000000000000000000.log"
    last = max(b.last_offset for b in read_batches(log))
    value = bytes([1, api_key, 0]) + write_message(REMOTE_LOG_RECORDS[api_key], 0, data)
    with open(log, "ab") as f:
        f.write(build_batch([(None, value)], base_offset=last + 1, timestamp=1700000009000))


def _update(segment_id: str, state: int) -> dict:
    return {"remoteLogSegmentId": {"topicIdPartition": {"name": "tiered", "id": TOPIC_ID, "partition": 0},
                                   "id": segment_id},
            "brokerId": 1, "eventTimestampMs": 1700000009000, "remoteLogSegmentState": state}


def _segment_id(case: Path, base: int) -> str:
    return _segment_objects(case, base)[0].name[21:43]


def _audit(case: Path, **kw) -> tuple[int, list[str]]:
    rep = audit_bucket(case / "remote", [case / "__remote_log_metadata-0"], **kw)
    return rep.exit_code, [p for f in rep.findings for p in f.problems]


@needs_oracle
def test_the_decoder_reads_what_kafkas_dump_decodes(generated: Path) -> None:
    kafka = json.loads((generated / "REMOTE_LOG_METADATA.json").read_text())
    expected = [r["remoteLogMetadata"] for b in kafka["batches"] for r in b["records"]]
    ours = [decode_remote_log_record(r.value)
            for b in read_batches(generated / "__remote_log_metadata-0" / "00000000000000000000.log")
            for r in b.records()]
    assert len(ours) == len(expected) == 10
    for e, o in zip(expected, ours, strict=False):
        assert (o.type_name, o.api_key, o.version) == (e["type"], e["apiKey"], e["version"])
        assert {k: v for k, v in o.data.items() if k in e["data"]} == e["data"]


@needs_oracle
def test_a_healthy_bucket_is_ok(case: Path) -> None:
    meta = read_remote_log_metadata([case])
    (part,) = meta.partitions.values()
    assert [(s.start_offset, s.end_offset) for s in part.live()] == [(0, 23), (24, 41), (42, 60), (61, 83), (84, 104)]
    assert _audit(case, log_dir=case) == (0, [])
    r = CliRunner().invoke(main, ["tiered", "audit", str(case / "remote"), "--remote-log-metadata",
                                  str(case / "__remote_log_metadata-0"), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["partitions"][0]["status"] == "ok" and doc["partitions"][0]["remote_end_offset"] == 104


@needs_oracle
def test_a_missing_and_a_short_object_are_found(case: Path) -> None:
    (next(p for p in _segment_objects(case, 24) if p.suffix == ".timeindex")).unlink()
    log = next(p for p in _segment_objects(case, 42) if p.suffix == ".log")
    log.write_bytes(log.read_bytes()[:-10])
    code, problems = _audit(case)
    assert code == 1
    assert [p.split(":")[0] for p in problems] == ["missing", "size"]
    assert "no .timeindex" in problems[0] and "2031 bytes, the metadata says 2041" in problems[1]


@needs_oracle
def test_orphans_and_an_unfinished_copy_are_found_with_their_bytes(case: Path) -> None:
    for p in _segment_objects(case, 84):  # a copy whose metadata was never written
        shutil.copy(p, p.with_name(p.name.replace(p.name[21:43], "T1JQSEFOAAAAAAAAAAAAAA")))
    orphan_bytes = sum(p.stat().st_size for p in _segment_objects(case, 84)) // 2
    started = {**_update("U1RBUlRFRAAAAAAAAAAAAA", 0), "startOffset": 105, "endOffset": 126,
               "maxTimestampMs": 1, "segmentLeaderEpochs": [{"leaderEpoch": 3, "offset": 105}],
               "segmentSizeInBytes": 100}
    del started["remoteLogSegmentState"]
    _append_event(case, 0, {**started, "remoteLogSegmentState": 0})
    code, problems = _audit(case)
    assert code == 1
    assert problems[0].startswith("orphan: segment T1JQSEFOAAAAAAAAAAAAAA at offset 84")
    assert f"{orphan_bytes} bytes" in problems[0]
    assert problems[1].startswith("unfinished-copy: segment U1RBUlRFRAAAAAAAAAAAAA (offsets 105-126)")


@needs_oracle
def test_undeleted_objects_a_gap_and_a_refused_transition(case: Path) -> None:
    first, middle = _segment_id(case, 0), _segment_id(case, 42)
    for sid in (first, middle):
        _append_event(case, 1, _update(sid, 2))
        _append_event(case, 1, _update(sid, 3))
    for p in _segment_objects(case, 42):  # the middle one really deleted: a hole in the remote offsets
        p.unlink()
    _append_event(case, 1, _update(_segment_id(case, 61), 1))  # FINISHED twice: Kafka refuses it
    code, problems = _audit(case)
    assert code == 1
    kinds = [p.split(":")[0] for p in problems]
    assert kinds == ["undeleted", "gap", "metadata"], problems
    assert "offsets 0-23" in problems[0] and "offsets 42-60 are in no remote segment" in problems[1]
    assert "cannot go from COPY_SEGMENT_FINISHED to COPY_SEGMENT_FINISHED" in problems[2]


@needs_oracle
def test_a_gap_between_remote_and_local_offsets(case: Path) -> None:
    (case / "log-start-offset-checkpoint").write_text("0\n1\ntiered 0 110\n")
    code, problems = _audit(case, log_dir=case)
    assert code == 1 and problems == ["gap: offsets 105-109 are neither in remote storage (which ends at 104) nor "
                                      "in the local log (which starts at 110)"]


@needs_oracle
def test_epoch_lineage_going_back_is_found(case: Path) -> None:
    sid = "RVBPQ0gAAAAAAAAAAAAAAA"
    ev = {**_update(sid, 0), "startOffset": 105, "endOffset": 110, "maxTimestampMs": 1,
          "segmentLeaderEpochs": [{"leaderEpoch": 1, "offset": 105}], "segmentSizeInBytes": 5}
    _append_event(case, 0, ev)
    _append_event(case, 1, _update(sid, 1))
    code, problems = _audit(case)
    assert code == 1
    assert any(p.startswith("epochs:") and "below the previous segment's 3" in p for p in problems)
    assert any(p.startswith("missing:") and sid in p for p in problems)


def test_unreadable_inputs_exit_2(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["tiered", "audit", str(tmp_path), "--remote-log-metadata", str(tmp_path)])
    assert r.exit_code == 2 and "no __remote_log_metadata-N partition dir here" in r.output
    r = CliRunner().invoke(main, ["tiered", "audit", str(tmp_path / "nope"), "--remote-log-metadata",
                                  str(tmp_path / "nope")])
    assert r.exit_code == 2 and "not a directory" in r.output


def _aiven_metadata(root: Path) -> Path:
    """``__remote_log_metadata-0`` for the golden Aiven variant: a STARTED and a FINISHED event per segment."""
    tiered = json.loads((GOLDEN / "tiered-aiven" / "partition" / "TIERED.json").read_text())
    pdir = root / "__remote_log_metadata-0"
    pdir.mkdir(parents=True)
    values = []
    for seg in tiered["segments"]:
        md = seg["metadata"]
        sid = {"topicIdPartition": {"name": "tiered", "id": md["topicId"], "partition": 0}, "id": md["segmentId"]}
        values.append(bytes([1, 0, 0]) + write_message(REMOTE_LOG_RECORDS[0], 0, {
            "remoteLogSegmentId": sid, "startOffset": md["startOffset"], "endOffset": md["endOffset"],
            "brokerId": 1, "maxTimestampMs": md["maxTimestampMs"], "eventTimestampMs": 1,
            "segmentLeaderEpochs": [{"leaderEpoch": int(e), "offset": o} for e, o in md["segmentLeaderEpochs"].items()],
            "segmentSizeInBytes": md["segmentSizeInBytes"], "remoteLogSegmentState": 0}))
        values.append(bytes([1, 1, 0]) + write_message(REMOTE_LOG_RECORDS[1], 0, {
            "remoteLogSegmentId": sid, "brokerId": 1, "eventTimestampMs": 2, "remoteLogSegmentState": 1}))
    data = b"".join(build_batch([(None, v)], base_offset=i, timestamp=1) for i, v in enumerate(values))
    (pdir / "00000000000000000000.log").write_bytes(data)
    return pdir


@needs_golden
@pytest.mark.parametrize("variant", ["plain-chunk512", "zstd-chunk256", "encrypted-zstd-chunk256"])
def test_aiven_buckets_are_audited_by_their_manifests(variant: str, tmp_path: Path) -> None:
    src = GOLDEN / "tiered-aiven" / "variants" / variant
    bucket = tmp_path / "remote"
    shutil.copytree(src / "remote", bucket)
    meta = _aiven_metadata(tmp_path)
    rep = audit_bucket(bucket, [meta])
    assert rep.exit_code == 0 and [f.data["segments"] for f in rep.findings] == [5], rep.to_dict()
    log = sorted(bucket.rglob("*.log"))[2]
    log.write_bytes(log.read_bytes()[:-1])
    manifest = sorted(bucket.rglob("*.rsm-manifest"))[4]
    manifest.unlink()
    rep = audit_bucket(bucket, [meta])
    problems = rep.findings[0].problems
    assert rep.exit_code == 1
    assert [p.split(":")[0] for p in problems] == ["size", "missing"], problems
    assert "the manifest's chunks add up to" in problems[0] and "no .rsm-manifest object" in problems[1]


def _restore(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, ["tiered", "restore", *args])
    return r.exit_code, r.output


@needs_oracle
def test_a_restored_partition_is_what_kafkas_loader_and_verify_accept(case: Path, tmp_path: Path) -> None:
    to = tmp_path / "logdir"
    code, out = _restore(str(case / "remote"), "--to", str(to), "--remote-log-metadata",
                         str(case / "__remote_log_metadata-0"), "--dry-run")
    assert code == 0 and "would restore 5 segment(s), offsets 0-104" in out and not to.exists()
    code, out = _restore(str(case / "remote"), "--to", str(to), "--remote-log-metadata",
                         str(case / "__remote_log_metadata-0"), "--json")
    assert code == 0, out
    assert json.loads(out)["partitions"][0]["log_end_offset"] == 105
    restored = to / "tiered-0"
    for base in (0, 24, 42, 61, 84):  # Kafka's own bytes at their original offsets
        name = f"{base:020d}.log"
        assert (restored / name).read_bytes() == (case / "tiered-0" / name).read_bytes()
    load = json.loads(run_oracle("load", to, "--clock-ms", "1700000010000").stdout)["partitions"][0]
    assert (load["logStartOffset"], load["logEndOffset"], load["segments"]) == (0, 105, [0, 24, 42, 61, 84])
    assert load["kafkaException"] is None and not load["truncated"]
    assert {p["producerId"] for p in load["producers"]} == {1000, 2000, 3000}
    assert [(e["epoch"], e["startOffset"]) for e in load["leaderEpochs"]] == [(0, 0), (2, 36), (3, 89)]
    verify = run_oracle("verify", restored)
    assert verify.returncode == 0 and "OK" in verify.stdout, verify.stdout
    # every segment's producer snapshot, under the next segment's base offset as the broker wrote it, and kept by
    # Kafka's loader (a load in place removes stray snapshots)
    snaps = sorted(p.name for p in restored.glob("*.snapshot"))
    assert snaps == [f"{o:020d}.snapshot" for o in (24, 42, 61, 84, 105)]
    for name in snaps:
        if (case / "tiered-0" / name).exists():
            assert (restored / name).read_bytes() == (case / "tiered-0" / name).read_bytes(), name
    loaded = tmp_path / "loaded"
    shutil.copytree(to, loaded)
    run_oracle("load", loaded, "--clock-ms", "1700000010000", "--in-place")
    assert sorted(p.name for p in (loaded / "tiered-0").glob("*.snapshot")) == snaps
    code, out = _restore(str(case / "remote"), "--to", str(to))
    assert code == 2 and "a partition dir is already there" in out


@needs_oracle
def test_restore_refuses_a_locked_dir_and_a_bad_copy_leaves_nothing(case: Path, tmp_path: Path) -> None:
    from kafkalog.manager.lock import DirLock

    to = tmp_path / "logdir"
    to.mkdir()
    with DirLock.acquire(str(to)):
        code, out = _restore(str(case / "remote"), "--to", str(to))
    assert code == 2 and ".lock" in out and not (to / "tiered-0").exists()
    log = next(p for p in _segment_objects(case, 42) if p.suffix == ".log")
    log.write_bytes(log.read_bytes()[:-10])  # a torn object: the read-back after the write refuses it
    code, out = _restore(str(case / "remote"), "--to", str(to), "--remote-log-metadata",
                         str(case / "__remote_log_metadata-0"))
    assert code != 0 and "tiered-0" in out
    assert sorted(p.name for p in to.iterdir()) == [".lock"]


@needs_oracle
def test_without_metadata_two_copies_of_one_segment_are_refused(case: Path, tmp_path: Path) -> None:
    for p in _segment_objects(case, 84):
        shutil.copy(p, p.with_name(p.name.replace(p.name[21:43], "T1JQSEFOAAAAAAAAAAAAAA")))
    code, out = _restore(str(case / "remote"), "--to", str(tmp_path / "d"))
    assert code == 2 and "both start at 84" in out
    code, out = _restore(str(case / "remote"), "--to", str(tmp_path / "d"), "--remote-log-metadata",
                         str(case / "__remote_log_metadata-0"), "--partition", "tiered-0")
    assert code == 0, out
    code, out = _restore(str(case / "remote"), "--to", str(tmp_path / "e"), "--partition", "other-3")
    assert code == 2 and "no remote segment of other-3" in out


@needs_oracle
@needs_golden
def test_an_encrypted_aiven_bucket_restores_to_kafkas_bytes(tmp_path: Path) -> None:
    variant = GOLDEN / "tiered-aiven" / "variants" / "encrypted-zstd-chunk256"
    meta = _aiven_metadata(tmp_path)
    to = tmp_path / "logdir"
    code, out = _restore(str(variant / "remote"), "--to", str(to), "--rsm-config", str(variant / "rsm.properties"),
                         "--remote-log-metadata", str(meta))
    assert code == 0, out
    original = GOLDEN / "tiered-aiven" / "partition" / "tiered-0"
    restored = to / "tiered-0"
    logs = sorted(p.name for p in restored.glob("*.log"))
    assert len(logs) == 5
    for name in logs:
        assert (restored / name).read_bytes() == (original / name).read_bytes()
    verify = run_oracle("verify", restored)
    assert verify.returncode == 0, verify.stdout


@needs_golden
def test_an_oversized_manifest_is_refused_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit reads a manifest as AivenSegment.open does: at most MAX_MANIFEST bytes, a larger one refused."""
    from kafkalog.archive.tiered import aiven

    variant = GOLDEN / "tiered-aiven" / "variants" / "plain-chunk512"
    bucket = tmp_path / "remote"
    shutil.copytree(variant / "remote", bucket)
    meta = _aiven_metadata(tmp_path)
    monkeypatch.setattr(aiven, "MAX_MANIFEST", 16)
    rep = audit_bucket(bucket, [meta])
    problems = rep.findings[0].problems
    assert rep.exit_code == 1 and len(problems) == 5
    assert all("unreadable: " in p and "manifest larger than 16 bytes" in p for p in problems), problems


@needs_golden
def test_restore_without_metadata_reads_each_segment_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no ``__remote_log_metadata`` the last segment's end is the log end: the read-back after the write finds
    it (each restored ``.log`` is read once), and the last producer snapshot is named by it."""
    from kafkalog.log import restore as restore_mod

    reads: list[str] = []
    real = restore_mod.read_batches
    monkeypatch.setattr(restore_mod, "read_batches", lambda path, *a, **k: reads.append(os.path.basename(path))
                        or real(path, *a, **k))  # fmt: skip
    variant = GOLDEN / "tiered-aiven" / "variants" / "encrypted-zstd-chunk256"
    to = tmp_path / "logdir"
    code, out = _restore(str(variant / "remote"), "--to", str(to), "--rsm-config", str(variant / "rsm.properties"),
                         "--json")  # fmt: skip
    assert code == 0, out
    assert json.loads(out)["partitions"][0]["log_end_offset"] == 105
    restored = to / "tiered-0"
    logs = sorted(p.name for p in restored.glob("*.log"))
    assert len(logs) == 5 and sorted(reads) == logs
    original = GOLDEN / "tiered-aiven" / "partition" / "tiered-0"
    for name in logs:
        assert (restored / name).read_bytes() == (original / name).read_bytes()
    assert (restored / f"{105:020d}.snapshot").is_file()


@needs_golden
def test_every_segments_producer_snapshot_is_restored_as_the_broker_had_it(tmp_path: Path) -> None:
    """Each remote segment carries the producer snapshot the broker took at the next segment's base offset; the
    restored dir holds all of them under those names, byte for byte the broker's own files (Kafka's loader keeps
    a snapshot at every segment's base offset and the last one past them: ``removeStraySnapshots``)."""
    variant = GOLDEN / "tiered-aiven" / "variants" / "encrypted-zstd-chunk256"
    to = tmp_path / "logdir"
    code, out = _restore(str(variant / "remote"), "--to", str(to), "--rsm-config", str(variant / "rsm.properties"))
    assert code == 0, out
    restored = to / "tiered-0"
    original = GOLDEN / "tiered-aiven" / "partition" / "tiered-0"
    names = sorted(p.name for p in restored.glob("*.snapshot"))
    assert names == [f"{o:020d}.snapshot" for o in (24, 42, 61, 84, 105)]
    for name in names:
        assert (restored / name).read_bytes() == (original / name).read_bytes(), name
    assert not [p.name for p in restored.iterdir() if not p.name.endswith((".log", ".index", ".timeindex",
                                                                            ".txnindex", ".snapshot"))
                and p.name not in ("leader-epoch-checkpoint", "partition.metadata")]  # fmt: skip
