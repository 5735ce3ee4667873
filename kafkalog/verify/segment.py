"""One segment: :func:`verify_segment` -> :class:`SegmentReport` (the Spark job's segment row), and
:func:`segment_finding`, the verdict ``kafkalog verify`` prints for it.

The report never raises: ``status`` is ``ok``, ``corrupt`` (bad bytes) or ``unreadable`` (an ``OSError``, kept in
``exception``, or a tiered segment stored transformed). The report and the checks it shares with the streamed
check of remote segments live in :mod:`.segment_report`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import SegmentItem

from ..errors import KafkaLogError
from .findings import Finding, error_finding
from .log_file import verify_log_file
from .segment_report import (
    SEGMENT_FIELDS,
    SegmentReport,
    apply_log_report,
    bad_base_offset,
    check_indexes,
    row_status,  # fmt: skip
    segment_status,
)

__all__ = ["SEGMENT_FIELDS", "SegmentReport", "row_status", "segment_finding", "segment_status", "verify_segment"]


def verify_segment(
    item: SegmentItem,
    *,
    index_check: bool = True,
    rsm: Any = None,
    options: Mapping[str, Any] | None = None,
    deep: bool = False,
    opened: tuple[Any, BaseException | None] | None = None,
) -> SegmentReport:
    """Check one segment's ``.log`` with :func:`verify_log_file` (and its indexes); never raises.

    ``valid_bytes`` and ``invalid_bytes`` are the structurally readable prefix and the unreadable tail;
    ``corrupt_ranges`` lists every batch failing its CRC (position, size), the first batch moving offsets backwards,
    and the unreadable tail. An ``OSError`` (permission, EIO, a file that vanished) gives ``status="unreadable"``
    with the error in ``error`` and ``exception``; bad bytes give ``status="corrupt"``. ``deep`` also decodes every
    record of the valid prefix (:func:`kafkalog.verify.record_check.check_records`); a mismatch is ``corrupt``.

    A segment behind a URL (reached with the storage ``options``), and one stored by Aiven's RemoteStorageManager
    (``.log`` + ``.indexes`` + ``.rsm-manifest``, read with ``rsm``, a :class:`kafkalog.archive.tiered.RsmConfig`),
    is checked over its bytes as they are fetched (:mod:`kafkalog.verify.stream`): the same report, no copy.
    ``opened``: the Aiven segment already opened, or the error opening it raised (as
    :func:`kafkalog.archive.tiered.open_ahead` gives them), so a run over many segments opens them ahead.
    """
    from kafkalog.archive.tiered import is_aiven_item

    if is_aiven_item(item) or storage.is_remote(item.path):
        from .stream import verify_streamed

        return verify_streamed(item, index_check=index_check, rsm=rsm, options=options, deep=deep, opened=opened)
    rep = SegmentReport(item, size_bytes=max(item.size_bytes, 0))
    if bad_base_offset(rep):
        return rep
    try:
        log = verify_log_file(item.path, include_batches=True)
    except OSError as exc:
        rep.status, rep.error, rep.exception = "unreadable", f"{type(exc).__name__}: {exc}", exc
        return rep
    except (KafkaLogError, ValueError) as exc:  # not expected (the scan describes bad data), but bytes, not I/O
        rep.status, rep.error = "corrupt", f"{type(exc).__name__}: {exc}"
        return rep
    starts = apply_log_report(rep, log)
    if index_check:
        check_indexes(rep, starts, lambda suffix, cls: _open_local_index(item, suffix, cls),
                      lambda: _clean_shutdown(item))  # fmt: skip
    if deep:
        from .record_check import add_record_problems, check_records  # the record decoder's imports cost ~0.1 s

        add_record_problems(rep, lambda: check_records(item.path, end=rep.valid_bytes))
    return rep


def _open_local_index(item: SegmentItem, suffix: str, cls: type) -> Any:
    os.stat(item.sibling(suffix))  # an index may open lazily: a loop or a permission must not pass
    return cls(item.sibling(suffix), item.base_offset, writable=False)


def _clean_shutdown(item: SegmentItem) -> bool:
    """Whether the log dir above the partition dir has Kafka's clean-shutdown marker (then no recovery runs)."""
    logdir = os.path.dirname(os.path.normpath(item.partition_dir))
    return os.path.exists(os.path.join(logdir, ".kafka_cleanshutdown"))


def segment_finding(rep: SegmentReport) -> Finding:
    """The verdict on one segment (:func:`segment_status`): its bytes and its indexes. A ``.log`` that could not be
    read gives an ``error`` finding holding the exception; an index that could not be read an ``error`` finding
    that keeps what the ``.log`` showed and the index's ``OSError``."""
    item = rep.item
    if rep.exception is not None:
        return error_finding("segment", item.path, rep.exception)
    problems = []
    for pos, size in rep.corrupt_ranges:
        problems.append(f"corrupt range: position {pos} size {size}")
    if rep.error:
        problems.append(rep.error)
    if rep.index_status in ("corrupt", "unreadable"):
        problems.append(f"index: {rep.index_error}")
    elif rep.index_status in ("stale", "missing"):
        problems.append(f"index {rep.index_status}: {rep.index_error}")
    offsets = "empty" if rep.first_offset is None else f"offsets {rep.first_offset}-{rep.last_offset}"
    summary = f"{rep.batch_count} batches, {rep.record_count} records, {offsets}, {rep.size_bytes} bytes"
    data = {
        "baseOffset": item.base_offset,
        "firstOffset": rep.first_offset,
        "lastOffset": rep.last_offset,
        "batchCount": rep.batch_count,
        "recordCount": rep.record_count,
        "size": rep.size_bytes,
        "validBytes": rep.valid_bytes,
        "invalidBytes": rep.invalid_bytes,
        "segmentStatus": rep.status,
        "indexStatus": rep.index_status,
        "indexError": rep.index_error,
        "corruptRanges": [{"position": p, "size": s} for p, s in rep.corrupt_ranges],
        "error": rep.error,
    }
    return Finding("segment", item.path, segment_status(rep), summary, problems, data, exception=rep.index_exception,
                   checked_bytes=rep.size_bytes)  # fmt: skip
