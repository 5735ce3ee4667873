"""Deep record checks (kafkalog.verify.record_check, ``kafkalog spark validate --deep``): every Kafka-written golden log
passes; a batch whose CRC is right but whose records disagree with its header is caught, where the shallow check
(headers + CRC) passes it."""

from __future__ import annotations

import glob
import struct
from pathlib import Path

import pytest
from crc32c import crc32c

from kafkalog.archive.discovery import discover_segments
from kafkalog.records import Record, build_batch
from kafkalog.verify import verify_log_file
from kafkalog.verify.record_check import check_records
from kafkalog.verify.remote import verify_segment_at
from tests.conftest import GOLDEN, needs_golden

pytestmark = [needs_golden]


def test_every_golden_log_passes_the_deep_check() -> None:
    assert GOLDEN is not None
    paths = sorted(glob.glob(str(GOLDEN / "logdir" / "*" / "*.log")) + glob.glob(str(GOLDEN / "legacy" / "logdir" / "*" / "*.log")))
    assert len(paths) > 30
    total = 0
    for p in paths:
        r = check_records(p)
        assert r.ok, (p, r.problems)
        total += r.records
    assert total > 3000


def _with_count(batch: bytes, count: int) -> bytes:
    """``batch`` with its header record count replaced and the CRC recomputed (a well-framed lie)."""
    b = bytearray(batch)
    struct.pack_into(">i", b, 57, count)
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    return bytes(b)


@pytest.mark.parametrize("count_delta", [-1, +1])
def test_a_header_count_that_lies_is_caught_where_the_shallow_check_passes(tmp_path: Path, count_delta: int) -> None:
    def recs(base: int) -> list[Record]:
        return [Record(base + i, 1_700_000_000_000 + i, b"k", b"v" * 10, ()) for i in range(5)]

    good = build_batch(recs(0), base_offset=0)
    liar = _with_count(build_batch(recs(5), base_offset=5), 5 + count_delta)
    pdir = tmp_path / "t-0"
    pdir.mkdir()
    log = pdir / "00000000000000000000.log"
    log.write_bytes(good + liar)
    shallow = verify_log_file(str(log))
    assert shallow.ok and shallow.bad_crc_count == 0  # headers and CRCs are fine
    r = check_records(str(log))
    assert not r.ok and r.bad_batches == [(len(good), len(liar))], r.problems
    [item] = discover_segments(str(pdir))
    assert verify_segment_at(item, index_check=False).status == "ok"
    deep = verify_segment_at(item, index_check=False, deep=True)
    assert deep.status == "corrupt" and (len(good), len(liar)) in deep.corrupt_ranges
