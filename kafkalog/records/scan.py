"""Fast shallow scan of a batch file: every header as a numpy column, CRCs checked in bulk.

Verifying a segment needs each batch's header and CRC but no per-batch Python object. The only per-batch Python
work is one tight loop that follows the length chain (one ``unpack_from``) and, in the same iteration, takes the
CRC32C of the batch (a memoryview slice, no copy); the structural checks (magic, minimum sizes, truncation) are then
done on numpy columns, and the 61 header bytes of every batch are copied out with one numpy gather over a
sliding-window view of the buffer and decoded as a structured array. Legacy (magic 0/1) messages, rare in practice,
fall back to the per-message walk and ``LegacyBatch`` objects.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import numpy as np
from crc32c import crc32c

from ..errors import CorruptRecordError, InvalidArgumentError, UnsupportedMagicError
from . import native
from .batch import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from .legacy import LegacyBatch
from .reader import (
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_RECORD_OVERHEAD_V0,
    LEGACY_RECORD_OVERHEAD_V1,
    V2_MIN_LENGTH,
    open_source,
)

__all__ = ["ScanResult", "scan_batches", "HEADER_DTYPE"]

#: The 61-byte v2 header as a packed big-endian numpy record (legacy rows are filled in from LegacyBatch).
HEADER_DTYPE = np.dtype(
    [
        ("base_offset", ">i8"),
        ("length", ">i4"),
        ("partition_leader_epoch", ">i4"),
        ("magic", "i1"),
        ("crc", ">u4"),
        ("attributes", ">i2"),
        ("last_offset_delta", ">i4"),
        ("base_timestamp", ">i8"),
        ("max_timestamp", ">i8"),
        ("producer_id", ">i8"),
        ("producer_epoch", ">i2"),
        ("base_sequence", ">i4"),
        ("record_count", ">i4"),
    ]
)
assert HEADER_DTYPE.itemsize == RECORD_BATCH_OVERHEAD

_SIZE_MAGIC = struct.Struct(">8xi4xb").unpack_from


@dataclass
class ScanResult:
    """Columns for the batches found (file order) and where the valid region ends.

    ``headers`` holds the v2 header fields for every batch (legacy rows: base offset = first inner offset,
    last_offset_delta from the wrapper, max_timestamp = wrapper timestamp, record_count = inner count,
    producer fields -1). ``crc_ok`` is all True when ``check_crc`` was False.
    """

    positions: np.ndarray
    sizes: np.ndarray
    headers: np.ndarray
    crc_ok: np.ndarray
    valid_bytes: int
    invalid_bytes: int
    error: CorruptRecordError | None = None
    start: int = 0
    end: int = 0
    legacy_rows: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.positions)

    @property
    def last_offsets(self) -> np.ndarray:
        return self.headers["base_offset"].astype(np.int64) + self.headers["last_offset_delta"]

    @property
    def all_crc_ok(self) -> bool:
        return bool(self.crc_ok.all())

    @property
    def first_bad_crc(self) -> int | None:
        """Index of the first batch whose CRC fails, or None."""
        bad = np.flatnonzero(~self.crc_ok)
        return int(bad[0]) if len(bad) else None


def _walk(buf, pos: int, end: int) -> tuple[list[int], list[int], bool, CorruptRecordError | None, int]:
    """Follow the length chain; returns starts, stops, any-legacy flag, stop error, stop position."""
    starts: list[int] = []
    stops: list[int] = []
    add_start = starts.append
    add_stop = stops.append
    legacy = False
    error = None
    v2_min = V2_MIN_LENGTH
    while pos < end:
        if end - pos < HEADER_SIZE_UP_TO_MAGIC:
            error = CorruptRecordError(f"truncated batch header: {end - pos} bytes left", position=pos)
            break
        size, magic = _SIZE_MAGIC(buf, pos)
        stop = pos + LOG_OVERHEAD + size
        if magic == 2:
            if size < v2_min:
                error = CorruptRecordError(f"batch length {size} is smaller than the v2 header", position=pos)
                break
        elif magic == 0 or magic == 1:
            minimum = LEGACY_RECORD_OVERHEAD_V0 if magic == 0 else LEGACY_RECORD_OVERHEAD_V1
            if size < minimum:
                error = CorruptRecordError(f"message size {size} is smaller than the minimum {minimum}", position=pos)
                break
            legacy = True
        else:
            error = UnsupportedMagicError(f"unknown magic byte {magic}", position=pos)
            break
        if stop > end:
            error = CorruptRecordError(
                f"truncated batch: length says {size + LOG_OVERHEAD} bytes, {end - pos} present", position=pos
            )
            break
        add_start(pos)
        add_stop(stop)
        pos = stop
    return starts, stops, legacy, error, pos


_SIZE = struct.Struct(">8xi").unpack_from
_MIN_SIZE = LEGACY_RECORD_OVERHEAD_V0  # the smallest length field any magic allows: the chain always moves on


def _walk_fast(buf, pos: int, end: int, with_crc: bool):
    """Follow the length chain with as little per-batch Python as possible; returns (starts, stops, legacy,
    error, stop position, crcs or None, headers or None) exactly as ``_walk`` would (crcs: CRC32C of
    ``[start + 21, stop)``; headers: the rows ``_gather_headers`` would make, when the compiled walk took them).

    The loop only reads the length (and takes the CRC32C); it stops on a length below any magic's minimum (the
    chain could go backwards) or a header running past ``end``. The per-magic checks are then applied to all
    rows at once, and from the first failing row (or the loop's stop position) ``_walk`` takes over, so errors
    and stop positions are the ones of the one-batch-at-a-time walk.
    """
    starts: list[int] = []
    add_start = starts.append
    last = end - HEADER_SIZE_UP_TO_MAGIC  # a header starting past this is truncated
    size_of = _SIZE
    crcs: list[int] | None = None
    headers: np.ndarray | None = None
    if with_crc and native.available():  # the same loop in C: no Python work per batch
        raw_starts, raw_crcs, raw_headers, pos = native.compiled.walk_chain(buf, pos, end, crc32c)
        starts = np.frombuffer(raw_starts, np.int64)  # arrays all the way: no list round trips
        crcs = np.frombuffer(raw_crcs, np.uint32)
        headers = np.frombuffer(raw_headers, HEADER_DTYPE)  # gathered while the walk had the bytes in cache
    elif with_crc:
        crcs = []
        add_crc = crcs.append
        view = buf if isinstance(buf, memoryview) else memoryview(buf)
        while pos <= last:
            (size,) = size_of(view, pos)
            if size < _MIN_SIZE:
                break
            add_start(pos)
            stop = pos + LOG_OVERHEAD + size
            add_crc(crc32c(view[pos + 21 : stop]))
            pos = stop
    else:
        while pos <= last:
            (size,) = size_of(buf, pos)
            if size < _MIN_SIZE:
                break
            add_start(pos)
            pos += LOG_OVERHEAD + size
    n = len(starts)
    if not n:
        return _walk(buf, pos, end) + (None, None)
    arr = np.frombuffer(buf, dtype=np.uint8)
    first = starts if isinstance(starts, np.ndarray) else np.fromiter(starts, np.int64, n)
    stops_arr = np.empty(n, dtype=np.int64)
    stops_arr[:-1] = first[1:]
    stops_arr[-1] = pos
    sizes = stops_arr - first - LOG_OVERHEAD
    magic = arr[first + 16].view(np.int8)
    ok = (
        ((magic == 2) & (sizes >= V2_MIN_LENGTH))
        | ((magic == 1) & (sizes >= LEGACY_RECORD_OVERHEAD_V1))
        | ((magic == 0) & (sizes >= LEGACY_RECORD_OVERHEAD_V0))
    ) & (stops_arr <= end)
    if not ok.all():
        cut = int(np.argmin(ok))  # the first failing row: the one-by-one walk stops there
        pos = int(starts[cut])
        starts = starts[:cut]
        if crcs is not None:
            crcs = crcs[:cut]
        if headers is not None:
            headers = headers[:cut]
        n = cut
        stops_arr = stops_arr[:cut]
        magic = magic[:cut]
    legacy = bool(n) and bool((magic != 2).any())
    if legacy or not isinstance(starts, np.ndarray):  # the legacy paths index with Python ints
        starts, stops = _as_list(starts), stops_arr.tolist()
    else:
        stops = stops_arr
    if pos < end:
        more_starts, more_stops, more_legacy, error, pos = _walk(buf, pos, end)
        legacy = legacy or more_legacy  # as _walk: a legacy header seen before the stop counts
        if more_starts:  # not expected (the row failed the same checks), but never lose a batch
            starts = _as_list(starts) + more_starts
            stops = _as_list(stops) + more_stops
            crcs = headers = None
    else:
        error = None
    if legacy:
        crcs = headers = None
    return starts, stops, legacy, error, pos, crcs, headers


def _as_list(values) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else values


def _gather_headers(buf, starts: list[int] | np.ndarray) -> np.ndarray:
    """Copy the 61 header bytes of every batch into one structured array: one numpy gather of rows of a
    sliding-window view (every row a 61-byte window of the buffer), no index matrix. Every start must have 61
    bytes after it (true for v2 batches)."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    windows = np.lib.stride_tricks.as_strided(
        arr, shape=(len(arr) - RECORD_BATCH_OVERHEAD + 1, RECORD_BATCH_OVERHEAD), strides=(1, 1), writeable=False
    )
    out = windows[np.asarray(starts, dtype=np.intp)]
    return out.view(HEADER_DTYPE).reshape(len(starts))


def scan_batches(
    source, *, position: int = 0, end: int | None = None, check_crc: bool = True, stop_at_bad_crc: bool = False
) -> ScanResult:
    """Scan every batch header of ``source`` (path, bytes, memoryview) and optionally check every CRC.

    Stops (never raises) at a truncated or structurally impossible batch, like ``read_batches``; with
    ``stop_at_bad_crc`` the valid region also ends before the first batch whose CRC fails (Kafka's recovery rule).
    """
    buf, keep = open_source(source)
    total = len(buf)
    if end is None or end > total:
        end = total
    if position < 0 or position > end:
        raise InvalidArgumentError(f"position {position} outside the source (0..{end})")
    starts, stops, legacy, error, stop_pos, crcs, gathered = _walk_fast(buf, position, end, check_crc)
    n = len(starts)
    getitem = buf.__getitem__
    if n:
        if not legacy:
            hdr_bytes = None
            headers = gathered if gathered is not None else _gather_headers(buf, starts)
        else:
            # legacy messages can be shorter than 61 bytes: pad each header slice to a fixed width
            hdr_bytes = b"".join(
                bytes(buf[s : min(s + RECORD_BATCH_OVERHEAD, e)]).ljust(RECORD_BATCH_OVERHEAD, b"\0")
                for s, e in zip(starts, stops, strict=True)
            )
        if hdr_bytes is not None:
            headers = np.frombuffer(hdr_bytes, dtype=HEADER_DTYPE).copy()
    else:
        headers = np.zeros(0, dtype=HEADER_DTYPE)
    legacy_rows: list[int] = []
    if legacy:
        for i in np.flatnonzero(headers["magic"] != 2).tolist():
            b = LegacyBatch(buf[starts[i] : stops[i]], starts[i])
            row = headers[i]
            try:
                base = b.base_offset
                count = b.record_count
            except CorruptRecordError:
                base, count = b.last_offset, -1
            if not -(1 << 31) <= b.last_offset - base < 1 << 31:
                # a wrapper offset (outside the CRC) no int32 delta can tie to its inner offsets: damaged, so the
                # row describes it by its own offset alone, as when its payload cannot be read
                base, count = b.last_offset, -1
            row["base_offset"] = base
            row["last_offset_delta"] = b.last_offset - base
            row["partition_leader_epoch"] = -1
            row["crc"] = b.crc
            row["attributes"] = b.attributes
            row["base_timestamp"] = b.max_timestamp
            row["max_timestamp"] = b.max_timestamp
            row["producer_id"] = -1
            row["producer_epoch"] = -1
            row["base_sequence"] = -1
            row["record_count"] = count
            legacy_rows.append(i)
    if check_crc and n:
        if legacy:
            ok = []
            for i, (s, e) in enumerate(zip(starts, stops, strict=True)):
                if headers["magic"][i] == 2:
                    ok.append(crc32c(buf[s + 21 : e]) == int(headers["crc"][i]))
                else:
                    ok.append(zlib.crc32(buf[s + 16 : e]) == int(headers["crc"][i]))
            crc_ok = np.array(ok, dtype=bool)
        else:
            if crcs is None:
                crcs = list(map(crc32c, map(getitem, map(slice, [s + 21 for s in starts], stops))))
            crc_ok = np.asarray(crcs, dtype=np.uint32) == headers["crc"]
    else:
        crc_ok = np.ones(n, dtype=bool)
    positions = np.array(starts, dtype=np.int64)
    sizes = np.array(stops, dtype=np.int64) - positions
    valid_bytes = stop_pos
    if stop_at_bad_crc and n and not crc_ok.all():
        first = int(np.flatnonzero(~crc_ok)[0])
        valid_bytes = int(starts[first])
        error = CorruptRecordError("record batch CRC mismatch", position=valid_bytes)
        positions, sizes, headers, crc_ok = positions[:first], sizes[:first], headers[:first], crc_ok[:first]
        legacy_rows = [i for i in legacy_rows if i < first]
    return ScanResult(
        positions=positions,
        sizes=sizes,
        headers=headers,
        crc_ok=crc_ok,
        valid_bytes=valid_bytes,
        invalid_bytes=end - valid_bytes,
        error=error,
        start=position,
        end=end,
        legacy_rows=legacy_rows,
    )


#: ``small_batch_table`` takes files up to this size: below it numpy's fixed cost per call outweighs the loop.
SMALL_TABLE_BYTES = 64 * 1024
# base offset, length, magic at 16, last offset delta at 23, max timestamp at 35
_TABLE_ROW = struct.Struct(">qi4xb6xi8xq").unpack_from


def small_batch_table(buf, size: int) -> tuple[list[int], list[int], list[int]] | None:
    """``(starts, last offsets, max timestamps)`` of a small ``.log`` that is nothing but whole v2 batches with
    strictly increasing last offsets, as Python lists: the common case of a check, answered by one loop instead
    of :func:`scan_batches`' numpy calls. None for anything else (a legacy, short or truncated batch, trailing
    bytes, offsets not increasing, a file past ``SMALL_TABLE_BYTES``): the caller then scans with
    ``scan_batches``, which decides the error and the valid prefix. When this answers, ``scan_batches(buf,
    end=size, check_crc=False)`` finds the same batches and a valid prefix of ``size``."""
    if size > SMALL_TABLE_BYTES or len(buf) < size:
        return None
    starts: list[int] = []
    lasts: list[int] = []
    max_ts: list[int] = []
    row = _TABLE_ROW
    pos = 0
    last_header = size - RECORD_BATCH_OVERHEAD
    prev = None
    while pos <= last_header:
        base, length, magic, delta, ts = row(buf, pos)
        if magic != 2 or length < V2_MIN_LENGTH:
            return None
        stop = pos + LOG_OVERHEAD + length
        if stop > size:
            return None
        last = base + delta
        if prev is not None and last <= prev:
            return None
        starts.append(pos)
        lasts.append(last)
        max_ts.append(ts)
        prev = last
        pos = stop
    if pos != size:
        return None
    return starts, lasts, max_ts
