"""Verification results shared by the CLI (``verify``, ``dump``) and Spark: plain dataclasses with ``to_dict()``.

This module holds the report types and the ``.log`` file check; segment and partition-dir checks build on the same
types. A report never raises for bad data: corruption is described (position and size of the invalid region,
batches whose CRC fails), and only I/O errors propagate.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

import numpy as np

from .records.compression import CompressionType
from .records.record import TimestampType
from .records.scan import scan_batches

__all__ = ["BatchReport", "LogFileReport", "verify_log_file"]


@dataclass
class BatchReport:
    """One batch (or legacy shallow message) as found in a ``.log`` file; Kafka's field names in ``to_dict``."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    count: int
    magic: int
    compression: str
    timestamp_type: str
    crc: int
    crc_valid: bool
    max_timestamp: int
    base_timestamp: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool

    def to_dict(self) -> dict:
        return {
            "position": self.position,
            "size": self.size,
            "baseOffset": self.base_offset,
            "lastOffset": self.last_offset,
            "count": self.count,
            "magic": self.magic,
            "compresscodec": self.compression,
            "timestampType": self.timestamp_type,
            "crc": self.crc,
            "isvalid": self.crc_valid,
            "maxTimestamp": self.max_timestamp,
            "baseTimestamp": self.base_timestamp,
            "partitionLeaderEpoch": self.partition_leader_epoch,
            "producerId": self.producer_id,
            "producerEpoch": self.producer_epoch,
            "baseSequence": self.base_sequence,
            "isTransactional": self.is_transactional,
            "isControl": self.is_control,
        }


@dataclass
class LogFileReport:
    """What a ``.log`` file holds and whether it is clean.

    ``ok`` means: no invalid bytes, every CRC valid, offsets strictly increasing. ``invalid_position`` is where the
    unreadable tail starts (None when clean); ``first_bad_crc_position`` the first batch failing its CRC.
    """

    path: str | None
    file_size: int
    valid_bytes: int
    invalid_bytes: int
    invalid_position: int | None
    error: str | None
    batch_count: int
    record_count: int
    first_offset: int | None
    last_offset: int | None
    min_timestamp: int | None
    max_timestamp: int | None
    bad_crc_count: int
    first_bad_crc_position: int | None
    offsets_monotonic: bool
    batches: list[BatchReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.invalid_bytes == 0 and self.bad_crc_count == 0 and self.offsets_monotonic

    def to_dict(self, *, include_batches: bool = True) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "batches"}
        d["ok"] = self.ok
        if include_batches:
            d["batches"] = [b.to_dict() for b in self.batches]
        return d


_CODEC_NAMES = [c.kafka_name for c in CompressionType] + ["unknown"] * 3


def verify_log_file(source, *, include_batches: bool = True, position: int = 0) -> LogFileReport:
    """Scan a ``.log`` file (path, bytes or memoryview): every header, every CRC, the valid region, offset order."""
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    scan = scan_batches(source, position=position, check_crc=True)
    h = scan.headers
    n = len(scan)
    last = scan.last_offsets
    base = h["base_offset"].astype(np.int64)
    bad = ~scan.crc_ok
    counts = h["record_count"].astype(np.int64)
    monotonic = bool(n < 2 or (np.all(base[1:] > last[:-1]) and np.all(last >= base)))
    ts = h["max_timestamp"].astype(np.int64)
    real_ts = ts[ts >= 0]
    report = LogFileReport(
        path=path,
        file_size=scan.end,
        valid_bytes=scan.valid_bytes,
        invalid_bytes=scan.invalid_bytes,
        invalid_position=scan.valid_bytes if scan.invalid_bytes else None,
        error=None if scan.error is None else str(scan.error),
        batch_count=n,
        record_count=int(counts[counts > 0].sum()) if n else 0,
        first_offset=int(base[0]) if n else None,
        last_offset=int(last[-1]) if n else None,
        min_timestamp=int(real_ts.min()) if len(real_ts) else None,
        max_timestamp=int(real_ts.max()) if len(real_ts) else None,
        bad_crc_count=int(bad.sum()),
        first_bad_crc_position=int(scan.positions[np.flatnonzero(bad)[0]]) if bad.any() else None,
        offsets_monotonic=monotonic,
    )
    if include_batches and n:
        attrs = h["attributes"].astype(np.int64).tolist()
        magics = h["magic"].tolist()
        cols = zip(
            scan.positions.tolist(),
            scan.sizes.tolist(),
            base.tolist(),
            last.tolist(),
            counts.tolist(),
            magics,
            attrs,
            h["crc"].tolist(),
            scan.crc_ok.tolist(),
            ts.tolist(),
            h["base_timestamp"].tolist(),
            h["partition_leader_epoch"].tolist(),
            h["producer_id"].tolist(),
            h["producer_epoch"].tolist(),
            h["base_sequence"].tolist(),
            strict=True,
        )
        out = report.batches
        for pos, size, b, lo, c, magic, a, crc, ok, mts, bts, ple, pid, pep, bseq in cols:
            if magic == 0:
                tstype = TimestampType.NO_TIMESTAMP_TYPE
            else:
                tstype = TimestampType.LOG_APPEND_TIME if a & 0x08 else TimestampType.CREATE_TIME
            out.append(
                BatchReport(
                    pos, size, b, lo, c, magic, _CODEC_NAMES[a & 7], tstype.kafka_name, crc, ok, mts, bts, ple, pid,
                    pep, bseq, magic == 2 and bool(a & 0x10), magic == 2 and bool(a & 0x20),
                )
            )
    return report
