"""Shared by the cleaner tests: Kafka's compacted golden cases (``golden/compacted``), running kafkalog's cleaner
on a copy the way ``kafka-oracle clean`` runs Kafka's, and comparing two cleaned partition dirs (byte for byte,
except re-compressed batches, whose headers and records must match)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from kafkalog.cleaner import (
    CleanerConfig,
    CleanReport,
    clean_partition,
    read_cleaner_checkpoint,
    update_cleaner_checkpoint,
)
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.reader import read_batches
from tests.conftest import GOLDEN

COMPACTED = GOLDEN / "compacted" if GOLDEN is not None else None
#: mtimes at or past this are the wall clock of the run that wrote the golden output (active segment's indexes,
#: files Kafka rewrites at close): not part of the contract
WALL_CLOCK_MS = 1_750_000_000_000


def compacted_cases() -> dict[str, dict[str, Any]]:
    if COMPACTED is None:
        return {}
    return {c["case"]: c for c in json.loads((COMPACTED / "CASES.json").read_text())["cases"]}


def prepare_case(case: dict[str, Any], work: Path) -> Path:
    """A writable copy of the case's input log dir with the input mtimes set; returns the partition dir."""
    assert COMPACTED is not None
    dst = work / case["dir"]
    shutil.copytree(COMPACTED / case["dir"] / "input", dst)
    for p in [dst, *dst.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    part = dst / case["partition"]
    for name, ms in case["inputMtimes"].items():
        os.utime(part / name, ns=(ms * 1_000_000, ms * 1_000_000))
    return part


def option(args: list[str], name: str, default: int) -> int:
    return int(args[args.index(name) + 1]) if name in args else default


def topic_partition(part: Path) -> tuple[str, int]:
    topic, _, p = part.name.rpartition("-")
    return topic, int(p)


def clean_like_oracle(part: Path, topic_config: dict[str, str], now_ms: int, *,
                      dedupe_buffer_bytes: int = 128 * 1024 * 1024) -> CleanReport:
    """What ``kafka-oracle clean PART --now-ms NOW`` does, with kafkalog: open after a clean shutdown, one pass
    from the parent dir's checkpoint, the checkpoint updated, scheduled deletions run, a clean close."""
    config = LogConfig.from_properties({"cleanup.policy": "compact", **topic_config})
    log = Log.open(part, config, clean_shutdown=True, clock=lambda: now_ms)
    try:
        tp = topic_partition(part)
        report = clean_partition(log, checkpointed=read_cleaner_checkpoint(part.parent).get(tp), now_ms=now_ms,
                                 config=CleanerConfig(dedupe_buffer_size=dedupe_buffer_bytes))
        if report.checkpoint_offset is not None:
            update_cleaner_checkpoint(part.parent, {tp: report.checkpoint_offset})
        log.delete_expired_files(now=1 << 62)
    finally:
        log.close()
    return report


_HEADER_FIELDS = ("base_offset", "partition_leader_epoch", "magic", "attributes", "last_offset_delta",
                  "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                  "record_count")


def _batches(path: Path) -> list:
    reader = read_batches(path.read_bytes())
    batches = list(reader)
    assert reader.invalid_bytes == 0, f"{path}: {reader.error}"
    return batches


def assert_same_log(ours: Path, theirs: Path) -> list[int]:
    """Equal ``.log`` files, or equal but for re-compressed batches (same header fields, same records); returns
    the batch positions in ``theirs`` by position in ``ours``' order."""
    a, b = _batches(ours), _batches(theirs)
    assert [x.base_offset for x in a] == [y.base_offset for y in b], ours.name
    raw_a, raw_b = ours.read_bytes(), theirs.read_bytes()
    for x, y in zip(a, b, strict=True):
        if raw_a[x.position:x.position + x.size_in_bytes] == raw_b[y.position:y.position + y.size_in_bytes]:
            continue
        assert y.compression.name != "NONE", f"{ours.name}: uncompressed batch at {y.base_offset} differs"
        if y.magic >= 2:
            assert [getattr(x, f) for f in _HEADER_FIELDS] == [getattr(y, f) for f in _HEADER_FIELDS], ours.name
        else:
            assert (x.magic, x.attributes, x.max_timestamp) == (y.magic, y.attributes, y.max_timestamp), ours.name
        assert x.records() == y.records(), f"{ours.name}: records of the batch at {y.base_offset} differ"
    return [y.position for y in b]


def _index_entries(path: Path, width: int) -> np.ndarray:
    data = path.read_bytes() if path.exists() else b""
    return np.frombuffer(data, dtype=">i4").reshape(-1, width) if data else np.zeros((0, width), ">i4")


def assert_same_partition(ours: Path, theirs: Path, files_after: list[dict[str, Any]] | None = None) -> None:
    """Same file names and bytes (see ``assert_same_log``); where a ``.log`` holds re-compressed batches, its
    ``.index`` must point at the same batches; mtimes as listed in ``files_after`` (Kafka's output)."""
    assert sorted(os.listdir(ours)) == sorted(os.listdir(theirs))
    mtimes = {f["name"]: f["lastModified"] for f in files_after or []}
    for name in sorted(os.listdir(theirs)):
        a, b = (ours / name).read_bytes(), (theirs / name).read_bytes()
        if a != b:
            if name.endswith(".log"):
                assert_same_log(ours / name, theirs / name)
            elif name.endswith(".index"):
                log_a, log_b = ours / (name[:-6] + ".log"), theirs / (name[:-6] + ".log")
                pos_a = [x.position for x in _batches(log_a)]
                pos_b = [y.position for y in _batches(log_b)]
                ea, eb = _index_entries(ours / name, 2), _index_entries(theirs / name, 2)
                assert ea[:, 0].tolist() == eb[:, 0].tolist(), name
                assert [pos_a.index(p) for p in ea[:, 1]] == [pos_b.index(p) for p in eb[:, 1]], name
            else:
                raise AssertionError(f"{name} differs ({len(a)} vs {len(b)} bytes)")
        expected = mtimes.get(name)
        if expected is not None and expected < WALL_CLOCK_MS and not name.endswith(".txnindex"):
            assert os.stat(ours / name).st_mtime_ns // 1_000_000 == expected, f"mtime of {name}"
