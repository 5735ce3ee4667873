"""Properties of a cleaned log on random histories (hypothesis picks the history): each key keeps at most its
latest value below where the pass ended (nothing once a tombstone's horizon has passed), records at or past that
offset stay, aborted data is gone, committed data that is still the latest stays, keyless records below it go."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalog.cleaner import CleanerConfig, clean_partition
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.reader import read_batches
from tests.cleaner_random import RandomHistory

PROPS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _visible(part: Path) -> dict[int, tuple[bytes | None, bytes | None]]:
    """Offset -> (key, value) of every data record left in the partition dir."""
    out = {}
    for name in sorted(n for n in os.listdir(part) if n.endswith(".log")):
        for batch in read_batches((part / name).read_bytes()):
            if batch.magic >= 2 and batch.is_control:
                continue
            for r in batch.records():
                out[r.offset] = (r.key, r.value)
    return out


def _pass(history: RandomHistory, part: Path, checkpoint: int | None, now: int, dedupe: int) -> tuple[int, bool]:
    log = Log.open(part, LogConfig.from_properties(history.topic_config), clock=lambda: now)
    try:
        report = clean_partition(log, checkpointed=checkpoint, now_ms=now,
                                 config=CleanerConfig(dedupe_buffer_size=dedupe), force=True)
        log.delete_expired_files(now=1 << 62)
    finally:
        log.close()
    if report.result is None:  # nothing below the active segment yet: nothing changed
        assert report.to_clean.cleanable_bytes == 0
        return report.to_clean.first_dirty_offset, False
    return report.result.end_offset, True


def _check(history: RandomHistory, before: dict, after: dict, end: int, tombstones_expired_below: int) -> None:
    latest: dict[bytes, int] = {}
    for off, (key, _value) in sorted(history.records.items()):
        if key is not None and off < end and off not in history.aborted:
            latest[key] = off
    later_keys = {k for off, (k, _v) in history.records.items() if off >= end and off not in history.aborted}
    for off, (key, value) in after.items():
        assert before.get(off) == (key, value) or history.records[off] == (key, value)
        if off >= end:
            continue
        assert off not in history.aborted, f"aborted record {off} survived"
        assert key is not None, f"keyless record {off} survived"
        assert latest[key] == off, f"record {off} of {key!r} survived though {latest[key]} is later"
        assert not (value is None and off < tombstones_expired_below), f"tombstone {off} outlived its horizon"
    for off, (key, value) in history.records.items():
        if off >= end and off not in history.aborted:
            assert after.get(off) == (key, value), f"record {off} at or past the end offset {end} is gone"
    for key, off in latest.items():
        value = history.records[off][1]
        if key not in later_keys and not (value is None and off < tombstones_expired_below):
            assert after.get(off) == (key, value), f"the latest record {off} of {key!r} is gone"


@PROPS
@given(seed=st.integers(0, 10**6), batches=st.integers(10, 50), small_map=st.booleans())
def test_cleaned_log_keeps_each_keys_latest_value(tmp_path_factory, seed: int, batches: int, small_map: bool) -> None:
    part = tmp_path_factory.mktemp("props") / f"p{seed}-0"
    history = RandomHistory(seed)
    history.append(part, batches)
    dedupe = 24 * 20 if small_map else 1 << 20
    before = _visible(part)
    now1 = history.clock_ms
    end1, _ = _pass(history, part, None, now1, dedupe)
    after1 = _visible(part)
    _check(history, before, after1, end1, tombstones_expired_below=0)
    # more writes, then a pass after the first pass's delete horizon: the tombstones it kept go
    history.append(part, batches // 2 + 2)
    now2 = max(history.clock_ms, now1 + 60_001)
    before2 = _visible(part)
    end2, cleaned = _pass(history, part, end1, now2, 1 << 20)
    _check(history, before2, _visible(part), end2, tombstones_expired_below=end1 if cleaned else 0)
