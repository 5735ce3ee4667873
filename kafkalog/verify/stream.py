"""Verification of a segment over its bytes as they are fetched: a ``.log`` behind a URL (``s3://``, ``gs://``, ...)
and an Aiven tiered-storage segment (local or remote), checked with no copy on disk.

The bytes arrive in order while the next are fetched (:mod:`kafkalog.archive.ranged_reads`: ranged GETs, or Aiven
chunk groups fetched, decrypted and decompressed in the pool). Every window of at least :data:`WINDOW_BYTES` is
scanned as :func:`kafkalog.records.scan.scan_batches` scans a file (framing, CRC32C of every batch, headers) up to
the last whole batch in it; the batch cut by the window's end is scanned with the next window. The windows' scans
join into the scan of the whole object, so :func:`kafkalog.verify.log_file.log_file_report` gives the report the
local file gives, and the index objects are checked against the batch positions collected on the way
(:func:`kafkalog.verify.segment.check_indexes`): verdicts identical to verifying a local copy.

Windows are written at their own offsets into an anonymous memory map the size of the object, so every position
and message is the file's own; the pages below the batch being assembled go back to the OS (``MADV_DONTNEED``) as
the scan moves on. Memory: the reads in flight (parallelism x 8 MiB, 64 MiB by default) plus the window
(:data:`WINDOW_BYTES` plus one fetched part, and the batch that straddles its end), plus each index object while it
is checked (at most ``segment.index.bytes``, 10 MiB by default).
"""

from __future__ import annotations

import dataclasses
import mmap
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from kafkalog.archive import storage
from kafkalog.archive.discovery import SegmentItem
from kafkalog.archive.ranged_reads import PART_BYTES
from kafkalog.errors import CorruptTieredObjectError, TieredConfigError
from kafkalog.records.batch import LOG_OVERHEAD
from kafkalog.records.reader import (
    HEADER_SIZE_UP_TO_MAGIC,
    LEGACY_RECORD_OVERHEAD_V0,
    LEGACY_RECORD_OVERHEAD_V1,
    V2_MIN_LENGTH,  # fmt: skip
)
from kafkalog.records.scan import HEADER_DTYPE, ScanResult, scan_batches

from .log_file import log_file_report
from .record_check import RecordCheck, add_record_problems
from .segment_report import INDEX_CHECKS, SegmentReport, apply_log_report, bad_base_offset, check_indexes

__all__ = ["WINDOW_BYTES", "needs_more", "scan_stream", "verify_streamed"]

#: bytes gathered before a window is scanned (fewer numpy calls per byte than scanning every piece)
WINDOW_BYTES = 4 << 20
#: bytes per ranged GET of a remote ``.log`` (:data:`kafkalog.archive.ranged_reads.PART_BYTES`)
FETCH_BYTES = PART_BYTES
_PAGE = mmap.PAGESIZE
_SIZE_MAGIC = struct.Struct(">8xi4xb").unpack_from
_MIN_SIZE = {0: LEGACY_RECORD_OVERHEAD_V0, 1: LEGACY_RECORD_OVERHEAD_V1, 2: V2_MIN_LENGTH}
#: stands for the partition dir in an in-memory index's name; messages then name the object's dir
_HERE = "\x00remote-partition-dir"

Window = Callable[[memoryview, int, int], None]


def scan_stream(pieces: Iterable[bytes | memoryview], size: int, *, on_window: Window | None = None,
                check_crc: bool = True) -> ScanResult:
    """The :func:`~kafkalog.records.scan.scan_batches` result (CRCs checked unless ``check_crc`` is false) of an
    object of ``size`` bytes given as consecutive ``pieces``, without holding it: the same batches, valid prefix
    and error. ``on_window(view, start, stop)`` sees each run of whole batches ``[start, stop)`` of the valid
    prefix (positions in the object) while its bytes are held. Raises StorageError when the pieces end before
    ``size`` bytes."""
    if size <= 0:
        for _ in pieces:
            pass
        return scan_batches(b"", check_crc=True)
    mm = mmap.mmap(-1, size)
    view = memoryview(mm)
    parts: list[ScanResult] = []
    filled = pos = released = 0
    done = False
    it = iter(pieces)
    try:
        for piece in it:
            n = len(piece)
            if filled + n > size:
                raise storage.StorageError(f"object is longer than the {size} bytes it had when opened")
            view[filled : filled + n] = piece
            filled += n
            if filled < size and filled - pos < WINDOW_BYTES:
                continue
            start = pos
            pos, done = _scan_window(view, pos, filled, size, parts, check_crc)
            if on_window is not None and pos > start:
                on_window(view, start, pos)
            keep = pos // _PAGE * _PAGE  # the page holding the next batch's start stays
            if keep > released:
                mm.madvise(mmap.MADV_DONTNEED, released, keep - released)
                released = keep
            if done:
                break
        if not done:
            raise storage.StorageError(f"object ended at byte {filled}, expected {size} bytes")
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()  # a scan that stopped early cancels the fetches not started
        view.release()
        try:
            mm.close()
        except BufferError:  # a view of a window is still referenced; the map goes with it
            pass
    return _join(parts, size)


def _scan_window(view: memoryview, pos: int, filled: int, size: int, parts: list[ScanResult],
                 check_crc: bool = True) -> tuple[int, bool]:
    """Scan ``[pos, filled)``; keep its whole batches in ``parts``; return where the next window starts and whether
    the scan of the object is complete (its end reached, or a batch no more bytes can mend)."""
    scan = scan_batches(view, position=pos, end=filled, check_crc=check_crc)
    if filled >= size or scan.error is None:
        parts.append(scan)
        return scan.valid_bytes, filled >= size
    stop = scan.valid_bytes
    if needs_more(view, stop, filled, size):  # the window's end cut a batch: it is scanned with the next one
        parts.append(dataclasses.replace(scan, error=None, invalid_bytes=0, end=stop))
        return stop, False
    # damage the rest of the object cannot change: scan to the object's end, as the whole file is scanned (the walk
    # stops at the same batch; the message counts the bytes to the object's end)
    parts.append(scan_batches(view, position=pos, end=size, check_crc=check_crc))
    return parts[-1].valid_bytes, True


def needs_more(view: memoryview, stop: int, filled: int, size: int) -> bool:
    """Whether the scan stopped at ``stop`` only because the window ends there: a header not all there yet, or a
    sound header whose batch ends past the window but within the object."""
    if filled - stop < HEADER_SIZE_UP_TO_MAGIC:
        return True
    length, magic = _SIZE_MAGIC(view, stop)
    if magic not in _MIN_SIZE or length < _MIN_SIZE[magic]:
        return False
    end = stop + LOG_OVERHEAD + length
    return filled < end <= size


def _join(parts: list[ScanResult], size: int) -> ScanResult:
    """The windows' scans as the one scan of the object (rows in order, the last window's end and error)."""
    last = parts[-1]
    legacy: list[int] = []
    rows = 0
    for p in parts:
        legacy += [rows + i for i in p.legacy_rows]
        rows += len(p)
    return ScanResult(
        positions=np.concatenate([p.positions for p in parts]).astype(np.int64, copy=False),
        sizes=np.concatenate([p.sizes for p in parts]).astype(np.int64, copy=False),
        headers=np.concatenate([p.headers for p in parts]) if rows else np.zeros(0, dtype=HEADER_DTYPE),
        crc_ok=np.concatenate([p.crc_ok for p in parts]).astype(bool, copy=False),
        valid_bytes=last.valid_bytes,
        invalid_bytes=size - last.valid_bytes,
        error=last.error,
        start=0,
        end=size,
        legacy_rows=legacy,
    )


# ------------------------------------------------------------------------------------------------ segments


def verify_streamed(item: SegmentItem, *, index_check: bool = True, rsm: Any = None,
                    options: Mapping[str, Any] | None = None, deep: bool = False,
                    opened: tuple[Any, BaseException | None] | None = None) -> SegmentReport:  # fmt: skip
    """:func:`kafkalog.verify.verify_segment` of a remote segment or an Aiven one, over the fetched bytes; never
    raises. An object that cannot be read gives ``unreadable``, as an ``OSError`` does for a local file; for Aiven
    no or the wrong key is ``unreadable`` too, a bad manifest or index object ``corrupt``, and a chunk that fails
    its tag or size is reported in ``corrupt_ranges`` while the rest is checked (zero-filled, as a restore would)."""
    from kafkalog.archive.tiered import is_aiven_item

    if is_aiven_item(item):
        return _verify_aiven(item, index_check, rsm, options, deep, opened)
    rep = SegmentReport(item, size_bytes=max(item.size_bytes, 0))
    if bad_base_offset(rep):
        return rep
    found = RecordCheck()
    try:
        size, pieces = storage.open_object_ranges(item.path, options, part=FETCH_BYTES)
        scan = scan_stream(pieces, size, on_window=_deep_hook(found) if deep else None)
    except OSError as exc:
        rep.status, rep.error, rep.exception = "unreadable", f"{type(exc).__name__}: {exc}", exc
        return rep
    starts = apply_log_report(rep, log_file_report(scan, item.path))
    if index_check:
        def open_index(suffix: str, cls: type) -> Any:
            return cls.from_bytes(_HERE + "/" + storage.basename(item.sibling(suffix)), item.base_offset,
                                  _read_whole(item.sibling(suffix), options))  # fmt: skip

        check_indexes(rep, starts, open_index, lambda: _remote_clean_shutdown(item, options))
        _name_objects(rep, item.partition_dir)
    if deep:
        add_record_problems(rep, lambda: found)
    return rep


def _verify_aiven(item: SegmentItem, index_check: bool, rsm: Any, options: Mapping[str, Any] | None,
                  deep: bool, opened: tuple[Any, BaseException | None] | None = None) -> SegmentReport:  # fmt: skip
    from kafkalog.archive.tiered import AivenSegment, ChunkDamage
    from kafkalog.archive.tiered.aiven import LOCAL_INDEX_SUFFIXES

    rep = SegmentReport(item, size_bytes=max(item.size_bytes, 0))
    damage: list[ChunkDamage] = []
    found = RecordCheck()
    try:
        if opened is None:
            seg = AivenSegment.open_item(item, rsm=rsm, options=options)
        else:  # opened ahead (:func:`kafkalog.archive.tiered.open_ahead`): its error is reported as if raised here
            seg, error = opened
            if error is not None:
                raise error
        scan = scan_stream(seg.iter_range(damage=damage), seg.size, on_window=_deep_hook(found) if deep else None)
        indexes = {LOCAL_INDEX_SUFFIXES[name]: data for name, data in seg.indexes().items()}
    except (OSError, TieredConfigError) as exc:
        rep.status, rep.error, rep.exception = "unreadable", f"{type(exc).__name__}: {exc}", exc
        return rep
    except CorruptTieredObjectError as exc:
        rep.status, rep.error = "corrupt", str(exc)
        return rep
    # the indexes out of ``.indexes``, checked as the files a restore writes (Kafka's LocalTieredStorage names)
    sizes = {field: len(indexes[suffix]) if suffix in indexes else -1 for suffix, field, _ in INDEX_CHECKS}
    rep.item = dataclasses.replace(item, size_bytes=seg.size, extra_files=(), **sizes)
    if not bad_base_offset(rep):
        starts = apply_log_report(rep, log_file_report(scan, item.path))
        if index_check:
            stem = storage.basename(item.path)[: -len(".log")]
            check_indexes(rep, starts, lambda suffix, cls: cls.from_bytes(f"{_HERE}/{stem}{suffix}", item.base_offset,
                                                                          indexes[suffix]),
                          lambda: False)  # fmt: skip
            _name_objects(rep, item.partition_dir)
        if deep:
            add_record_problems(rep, lambda: found)
    rep.item = item
    if damage:
        rep.status = "corrupt"
        known = set(rep.corrupt_ranges)
        rep.corrupt_ranges = sorted(known | {(d.position, d.size) for d in damage})
        rep.error = "; ".join([d.reason for d in damage] + ([rep.error] if rep.error else []))
    return rep


def _deep_hook(found: RecordCheck) -> Window:
    """The deep record check of each window of whole batches, until a batch does not decode (as one pass over
    the file stops there)."""
    from kafkalog.verify.record_check import check_records

    def hook(view: memoryview, start: int, stop: int) -> None:
        if not found.stopped:
            found.extend(check_records(view, position=start, end=stop))

    return hook


def _read_whole(url: str, options: Mapping[str, Any] | None) -> bytes:
    try:
        return storage.read_range(url, 0, None, options)
    except FileNotFoundError:
        raise storage.ObjectNotFoundError(f"{url}: no such object") from None


def _remote_clean_shutdown(item: SegmentItem, options: Mapping[str, Any] | None) -> bool:
    """Whether the log dir above the remote partition dir holds Kafka's clean-shutdown marker."""
    marker = storage.join(storage.dirname(item.partition_dir), ".kafka_cleanshutdown")
    try:
        return storage.stat_size(marker, options) >= 0
    except OSError:
        return False


def _name_objects(rep: SegmentReport, partition_dir: str) -> None:
    """Index messages name the objects (``<partition dir>/<name>``), as a check of a local copy would."""
    if rep.index_error:
        rep.index_error = rep.index_error.replace(_HERE, partition_dir)

