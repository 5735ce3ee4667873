"""Units of the cleaner: the offset map's capacity rule, the empty batch and the rebuilt batch's last offset, the
throttle, the offline dirty ratio, the broker keys, and the library's dry run."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from kafkalog.cleaner import CleanerConfig, OffsetMap, clean_partition, dirty_ratio_from_sizes
from kafkalog.cleaner.throttle import Throttler
from kafkalog.errors import CleanerError, ConfigError, InvalidArgumentError, InvalidRecordError
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.batch import RecordBatch, build_batch, build_empty_batch
from kafkalog.records.record import Record, TimestampType
from tests.cleaner_cases import compacted_cases, prepare_case
from tests.conftest import needs_golden


def test_offset_map_capacity_is_kafkas_rule() -> None:
    m = OffsetMap(960)  # the golden partial case: 40 slots, 36 filled
    assert m.slots == 40 and m.desired_size(0.9) == 36
    for i in range(40):
        m.put(b"k%d" % i, i)
    assert m.size == 40 and m.get(b"k3") == 3 and m.get(b"nope") == -1 and m.latest_offset == 39
    for key in (b"k3", b"one more"):  # SkimpyOffsetMap.put: require(entries < slots), even for a known key
        with pytest.raises(CleanerError, match="full"):
            m.put(key, 100)
    assert m.utilization == 1.0
    m.clear()
    assert (m.size, m.latest_offset) == (0, -1)
    with pytest.raises(InvalidArgumentError):
        OffsetMap(23)


def test_empty_batch_keeps_the_producer_fields() -> None:
    data = build_empty_batch(base_offset=10, last_offset=14, producer_id=7, producer_epoch=2, base_sequence=30,
                             partition_leader_epoch=3, timestamp_type=TimestampType.CREATE_TIME, max_timestamp=555,
                             is_transactional=True, is_control=False)
    b = RecordBatch(data)
    assert b.is_valid() and b.record_count == 0 and b.records() == []
    assert (b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence) == (10, 14, 7, 2, 30)
    assert (b.last_sequence, b.base_timestamp, b.max_timestamp, b.partition_leader_epoch) == (34, -1, 555, 3)
    assert b.is_transactional and not b.is_control and b.size_in_bytes == 61


def test_rebuilt_batch_keeps_its_last_offset() -> None:
    data = build_batch([Record(11, 5, b"k", b"v")], base_offset=10, last_offset=14, producer_id=1, producer_epoch=0,
                       base_sequence=0)
    b = RecordBatch(data)
    assert b.is_valid() and b.last_offset == 14 and b.last_sequence == 4 and [r.offset for r in b.records()] == [11]
    with pytest.raises(InvalidRecordError):
        build_batch([Record(11, 5, b"k", b"v")], base_offset=10, last_offset=10)


def test_throttle_sleeps_to_the_configured_rate() -> None:
    now = [0.0]
    slept: list[float] = []
    t = Throttler(1000.0, check_interval_ms=100, clock=lambda: now[0], sleep=slept.append)
    t(50)  # inside the first interval: nothing
    now[0] = 0.1
    t(450)  # 500 bytes in 0.1 s at 1000 B/s should take 0.5 s
    assert slept == [pytest.approx(0.4)]
    Throttler(float("inf"), sleep=slept.append)(10**9)
    assert len(slept) == 1


def test_dirty_ratio_from_sizes() -> None:
    segs = [(0, 100), (10, 100), (20, 100), (30, 50)]  # 30 is active
    assert dirty_ratio_from_sizes(segs, 0, 35, None) == (0, 1.0)
    assert dirty_ratio_from_sizes(segs, 0, 35, 20) == (20, 100 / 300)
    assert dirty_ratio_from_sizes(segs, 0, 35, 99) == (0, 1.0)  # past the end: from the log start
    assert dirty_ratio_from_sizes(segs, 0, 35, 30) == (30, 0.0)
    assert dirty_ratio_from_sizes([(0, 10)], 0, 1, None) == (0, None)


def test_cleaner_config_reads_the_broker_keys() -> None:
    c = CleanerConfig.from_properties({"log.cleaner.threads": "4", "log.cleaner.dedupe.buffer.size": "4000",
                                       "log.cleaner.io.buffer.size": "1000", "unrelated": "x"})
    assert (c.offset_map_memory, c.cleaner_io_buffer_size) == (1000, 125)
    with pytest.raises(ConfigError):
        CleanerConfig.from_properties({"log.cleaner.io.buffer.load.factor": "lots"})


@needs_golden
def test_library_dry_run_measures_without_changing_the_log(tmp_path: Path) -> None:
    case = compacted_cases()["compact-groups-size"]
    part = prepare_case(case, tmp_path)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in part.iterdir() if p.suffix == ".log"}
    log = Log.open(part, LogConfig.from_properties(case["cleanConfig"]), clock=lambda: case["nowMs"])
    try:
        report = clean_partition(log, checkpointed=None, now_ms=case["nowMs"], dry_run=True)
    finally:
        log.close_handlers()
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in part.iterdir() if p.suffix == ".log"}
    assert after == before and not any(p.name.endswith(".cleaned") for p in part.iterdir())
    assert report.result is not None and report.result.segments_removed > 0 and report.result.bytes_removed > 0
