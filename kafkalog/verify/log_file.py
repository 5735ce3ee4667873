"""One ``.log`` file's bytes: :func:`verify_log_file` -> :class:`LogFileReport` with :class:`BatchReports`.

Never raises for bad data (corruption is described: the invalid tail, batches whose CRC fails); I/O errors
propagate. Shared by ``kafkalog verify``, ``kafkalog recover`` and the Spark job, so they describe a file alike.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ..records.compression import CompressionType
from ..records.record import TimestampType
from ..records.scan import ScanResult, scan_batches

__all__ = ["BatchReport", "BatchReports", "LogFileReport", "log_file_report", "verify_log_file"]


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


#: ``BatchReport`` field names, in order, and the matching ``to_dict`` keys.
_FIELDS = (
    "position", "size", "base_offset", "last_offset", "count", "magic", "compression", "timestamp_type", "crc",
    "crc_valid", "max_timestamp", "base_timestamp", "partition_leader_epoch", "producer_id", "producer_epoch",
    "base_sequence", "is_transactional", "is_control",
)
_DICT_KEYS = (
    "position", "size", "baseOffset", "lastOffset", "count", "magic", "compresscodec", "timestampType", "crc",
    "isvalid", "maxTimestamp", "baseTimestamp", "partitionLeaderEpoch", "producerId", "producerEpoch",
    "baseSequence", "isTransactional", "isControl",
)
_CHUNK = 4096  # rows turned into Python objects at a time while iterating


class BatchReports(Sequence):
    """The batches of a ``LogFileReport``, held as numpy columns (one per ``BatchReport`` field).

    A ``BatchReport`` is built only when one is asked for (indexing, iteration), so a report over millions of
    batches costs a few numpy arrays, not millions of objects; objects are not cached (each access builds a fresh
    one). ``column(name)`` gives a field as a numpy array, ``where(mask)`` the reports of the selected rows only
    (e.g. ``where(~batches.column("crc_valid"))`` for the bad ones), ``to_dicts()`` the ``to_dict()`` forms.
    Compares equal to any sequence of the same ``BatchReport`` values, so callers may treat it as a list.
    """

    __slots__ = ("_cols",)

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self._cols = [columns[name] for name in _FIELDS]

    def __len__(self) -> int:
        return len(self._cols[0])

    def column(self, name: str) -> np.ndarray:
        """One field for every batch (numpy array; names and types as the ``BatchReport`` fields)."""
        return self._cols[_FIELDS.index(name)]

    def _rows(self, lo: int, hi: int) -> Iterator[tuple]:
        return zip(*[c[lo:hi].tolist() for c in self._cols], strict=True)

    def _reports(self, lo: int, hi: int) -> list[BatchReport]:
        return list(map(BatchReport, *[c[lo:hi].tolist() for c in self._cols]))

    def __iter__(self) -> Iterator[BatchReport]:
        n = len(self)
        for lo in range(0, n, _CHUNK):
            yield from self._reports(lo, min(n, lo + _CHUNK))

    def __getitem__(self, index):
        n = len(self)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("batch index out of range")
        return self._reports(i, i + 1)[0]

    def where(self, mask: np.ndarray) -> list[BatchReport]:
        """The reports of the rows where ``mask`` (a bool array, one per batch) is True."""
        rows = [c[mask].tolist() for c in self._cols]
        return list(map(BatchReport, *rows))

    def to_dicts(self) -> list[dict]:
        """``[b.to_dict() for b in self]`` without building the ``BatchReport`` objects."""
        out: list[dict] = []
        n = len(self)
        for lo in range(0, n, _CHUNK):
            out += [dict(zip(_DICT_KEYS, row, strict=True)) for row in self._rows(lo, min(n, lo + _CHUNK))]
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BatchReports({len(self)} batches)"


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
    #: ``BatchReports`` (columns, objects made on access) from ``verify_log_file``; a plain list otherwise.
    batches: Sequence[BatchReport] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.invalid_bytes == 0 and self.bad_crc_count == 0 and self.offsets_monotonic

    def to_dict(self, *, include_batches: bool = True) -> dict:
        # Every field but ``batches`` is a plain value (what ``asdict`` would copy); batches are not walked.
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "batches"}
        d["ok"] = self.ok
        if include_batches:
            b = self.batches
            d["batches"] = b.to_dicts() if isinstance(b, BatchReports) else [x.to_dict() for x in b]
        return d


_CODEC_NAMES = [c.kafka_name for c in CompressionType] + ["unknown"] * 3
_CODEC_NAME_ARRAY = np.array(_CODEC_NAMES, dtype=object)
#: timestamp type names by (magic != 0) * 2 + LogAppendTime bit
_TS_TYPE_NAMES = np.array(
    [TimestampType.NO_TIMESTAMP_TYPE.kafka_name] * 2
    + [TimestampType.CREATE_TIME.kafka_name, TimestampType.LOG_APPEND_TIME.kafka_name],
    dtype=object,
)


def verify_log_file(source, *, include_batches: bool = True, position: int = 0) -> LogFileReport:
    """Scan a ``.log`` file (path, bytes or memoryview): every header, every CRC, the valid region, offset order."""
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else None
    return log_file_report(scan_batches(source, position=position, check_crc=True), path, include_batches)


def log_file_report(scan: ScanResult, path: str | None = None, include_batches: bool = True) -> LogFileReport:
    """The report of one scan with CRCs checked: of a whole file, or of one streamed
    (:func:`kafkalog.verify.stream.scan_stream`), which gives the same scan without holding the file."""
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
        attrs = h["attributes"].astype(np.int64)
        magic = h["magic"].astype(np.int64)
        v2 = magic == 2
        report.batches = BatchReports(
            {
                "position": scan.positions,
                "size": scan.sizes,
                "base_offset": base,
                "last_offset": last,
                "count": counts,
                "magic": magic,
                "compression": _CODEC_NAME_ARRAY[attrs & 7],
                "timestamp_type": _TS_TYPE_NAMES[(magic != 0) * 2 + ((attrs & 0x08) != 0)],
                "crc": h["crc"].astype(np.int64),
                "crc_valid": scan.crc_ok,
                "max_timestamp": ts,
                "base_timestamp": h["base_timestamp"].astype(np.int64),
                "partition_leader_epoch": h["partition_leader_epoch"].astype(np.int64),
                "producer_id": h["producer_id"].astype(np.int64),
                "producer_epoch": h["producer_epoch"].astype(np.int64),
                "base_sequence": h["base_sequence"].astype(np.int64),
                "is_transactional": v2 & ((attrs & 0x10) != 0),
                "is_control": v2 & ((attrs & 0x20) != 0),
            }
        )
    return report
