"""Deep record checks of a ``.log``: every record decoded, at the columnar decoder's speed.

Shallow verification (:func:`kafkalog.verify.verify_log_file`) reads batch headers and CRCs; a batch can pass both
and still hold records that do not decode (bad varints, lengths past the batch) or do not match its header. This
decodes every record with :func:`kafkalog.records.iter_record_columns` and checks, per magic 2 batch, that the
record count equals the header's, and that record offsets increase strictly inside the header's
``[base_offset, last_offset]`` range (gaps are legal: the log cleaner drops records and keeps the batch's range).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kafkalog.errors import CorruptRecordError, KafkaLogError
from kafkalog.records import iter_record_columns
from kafkalog.records.scan import scan_batches

__all__ = ["RecordCheck", "add_record_problems", "check_records"]


@dataclass
class RecordCheck:
    """What :func:`check_records` found: ``problems`` in words, ``bad_batches`` as (position, size)."""

    records: int = 0
    batches: int = 0
    problems: list[str] = field(default_factory=list)
    bad_batches: list[tuple[int, int]] = field(default_factory=list)
    #: decoding stopped at a batch whose records do not decode (nothing after it was checked)
    stopped: bool = False

    def extend(self, other: RecordCheck) -> None:
        """Add the findings of the check of the bytes that follow (a streamed segment's next window)."""
        self.records += other.records
        self.batches += other.batches
        self.problems += other.problems
        self.bad_batches += other.bad_batches
        self.stopped = self.stopped or other.stopped

    @property
    def ok(self) -> bool:
        return not self.problems


def check_records(source, *, position: int = 0, end: int | None = None) -> RecordCheck:
    """Decode every record of the ``.log`` ``source`` (a path, or bytes/memoryview) from ``position`` (a batch
    start) up to ``end`` (the valid prefix) and check it against its batch header. Decoding stops at the first
    batch whose records do not decode (reported with its position; ``stopped`` is then True)."""
    out = RecordCheck()
    scan = scan_batches(source, position=position, end=end, check_crc=False)
    positions = scan.positions
    header_count = scan.headers["record_count"].astype(np.int64)
    header_base = scan.headers["base_offset"].astype(np.int64)
    header_last = scan.last_offsets
    magic = scan.headers["magic"].astype(np.int64)
    stop = scan.valid_bytes
    reader = iter_record_columns(source, position=position, end=stop, verify_crc=False)
    try:
        for chunk in reader:
            _check_chunk(chunk, positions, scan.sizes, header_count, header_base, header_last, magic, out)
    except (CorruptRecordError, KafkaLogError) as exc:
        pos = reader.valid_bytes
        i = int(np.searchsorted(positions, pos))
        size = int(scan.sizes[i]) if i < len(positions) and positions[i] == pos else 0
        out.problems.append(f"records of the batch at position {pos} do not decode: {exc}")
        out.bad_batches.append((pos, size))
        out.stopped = True
    finally:
        reader.close()
    return out


def add_record_problems(rep: Any, check: Callable[[], RecordCheck]) -> None:
    """Run the deep check ``check()`` for the segment report ``rep`` (one that could be read) and add what it
    found: a mismatch makes the segment ``corrupt``, its batches join ``corrupt_ranges``; an ``OSError`` makes it
    ``unreadable``."""
    if rep.status == "unreadable":
        return
    try:
        found = check()
    except OSError as exc:
        rep.status, rep.error, rep.exception = "unreadable", f"{type(exc).__name__}: {exc}", exc
        return
    if found.problems:
        rep.status = "corrupt"
        rep.error = "; ".join(([rep.error] if rep.error else []) + found.problems)
        known = set(rep.corrupt_ranges)
        rep.corrupt_ranges = sorted(known | set(found.bad_batches))


def _check_chunk(chunk, positions, sizes, header_count, header_base, header_last, magic, out: RecordCheck) -> None:
    n = len(chunk)
    starts = chunk.batch_start
    counts = np.diff(np.append(starts, n))
    idx = np.searchsorted(positions, chunk.batch_position)
    out.records += n
    out.batches += len(starts)
    v2 = magic[idx] == 2
    bad = v2 & (counts != header_count[idx])
    off = chunk.offset
    if n:
        per_record = np.repeat(idx, counts)
        outside = (off < header_base[per_record]) | (off > header_last[per_record])
        bad |= np.bincount(np.repeat(np.arange(len(starts)), counts), weights=outside, minlength=len(starts)) > 0
        rising = np.ones(n, dtype=bool)
        rising[1:] = off[1:] > off[:-1]
        rising[starts[counts > 0]] = True  # the first record of each batch starts a new run
        falls = np.bincount(np.repeat(np.arange(len(starts)), counts), weights=~rising, minlength=len(starts)) > 0
        bad |= v2 & falls
    for b in np.flatnonzero(bad).tolist():
        i = int(idx[b])
        out.problems.append(
            f"batch at position {int(positions[i])}: {int(counts[b])} record(s) with offsets that do not match its "
            f"header (count {int(header_count[i])}, offsets {int(header_base[i])}-{int(header_last[i])})"
        )
        out.bad_batches.append((int(positions[i]), int(sizes[i])))
