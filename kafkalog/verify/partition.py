"""One partition dir: :func:`verify_partition` -> :class:`PartitionReport` (the Spark job's partition row), and
:func:`partition_finding`, the verdict ``kafkalog verify`` prints for it.

The segments' results (reports, dicts or Spark rows) are checked against each other (gaps, overlaps), against the
log dir's offset checkpoints and against the partition dir's own metadata files, so the CLI and Spark agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..checkpoint.offset_checkpoint import effective_log_start_offset
from ..errors import InvalidArgumentError
from .findings import Finding, row_value
from .metadata import PartitionFiles, check_partition_files, gap_not_from_compaction, read_checkpoint_offsets
from .segment import SegmentReport, segment_status

__all__ = ["PARTITION_FIELDS", "PARTITION_STATUS", "PartitionReport", "partition_finding", "row_value", "verify_partition"]


#: ``PartitionReport.to_row()``/``to_dict()`` names, in order (the Spark job's partition columns).
PARTITION_FIELDS = (
    "partition_dir", "topic", "partition", "segment_count", "corrupt_segments", "log_start_offset", "log_end_offset",
    "gaps", "overlaps", "checkpoint_recovery_point", "checkpoint_log_start_offset", "checkpoint_high_watermark",
    "status", "problems",
)  # fmt: skip


@dataclass
class PartitionReport:
    """What :func:`verify_partition` found in one partition dir; fields in ``PARTITION_FIELDS`` order.

    ``status``: ``ok``, ``gap`` (offsets missing between segments: normal after compaction), ``overlap`` (a segment
    starting at or below the previous one's last offset), ``checkpoint_mismatch`` (a checkpoint beyond the log end
    offset), ``corrupt`` (a segment or one of its indexes is corrupt, or a metadata file is) or ``unreadable`` (a
    segment, an index or a metadata file could not be read). ``log_start_offset`` is Kafka's: the
    ``log-start-offset-checkpoint`` entry, never below the first segment's base offset. ``corrupt_segments``
    counts the segments that are not ok (corrupt or unreadable). ``gaps`` are ``(from_offset, to_offset)``, ``overlaps``
    ``(segment_base_offset, previous_last_offset)``. Not in the row: ``continuity`` (the status from the segments
    alone) and ``files`` (the metadata files, :class:`PartitionFiles`).
    """

    partition_dir: str
    topic: str
    partition: int
    segment_count: int
    corrupt_segments: int
    log_start_offset: int | None
    log_end_offset: int | None
    gaps: list[tuple[int, int]]
    overlaps: list[tuple[int, int]]
    checkpoint_recovery_point: int | None
    checkpoint_log_start_offset: int | None
    checkpoint_high_watermark: int | None
    status: str
    problems: list[str]
    continuity: str = ""
    files: PartitionFiles = field(default_factory=PartitionFiles, repr=False, compare=False)

    def to_row(self) -> tuple:
        return tuple(getattr(self, name) for name in PARTITION_FIELDS)

    def to_dict(self) -> dict:
        return dict(zip(PARTITION_FIELDS, self.to_row(), strict=True))


def verify_partition(segments: Iterable[SegmentReport | dict | Any]) -> PartitionReport:
    """Continuity of one partition dir from its segments' results (``SegmentReport``s, or rows/dicts with
    ``partition_dir``, ``topic``, ``partition``, ``base_offset``, ``first_offset``, ``last_offset``, ``status``).

    Segments are put in base-offset order; an overlap is an error, a gap is reported; a segment's own verdict is
    :func:`~kafkalog.verify.segment.segment_status` (its ``.log`` and, when the row has it, ``index_status``),
    so an unreadable one makes the partition ``unreadable`` and a corrupt one (or a corrupt index) ``corrupt``.
    When the partition dir's
    parent holds Kafka's checkpoints, the recovery point, log start offset and high watermark must not lie beyond
    the data; the partition dir's own metadata files must parse (:func:`check_partition_files`). Raises
    InvalidArgumentError (a ValueError) for no segments.
    """
    get = row_value
    rows = sorted(segments, key=lambda r: int(get(r, "base_offset")))
    if not rows:
        raise InvalidArgumentError("verify_partition needs at least one segment")
    first = rows[0]
    pdir, topic, partition = get(first, "partition_dir"), get(first, "topic"), int(get(first, "partition"))
    gaps: list[tuple[int, int]] = []
    overlaps: list[tuple[int, int]] = []
    problems: list[str] = []
    verdicts = [segment_status(r) for r in rows]
    corrupt = verdicts.count("corrupt")
    unreadable = verdicts.count("error")
    prev_last: int | None = None
    log_end = None
    for r in rows:
        lo = _int_or_none(get(r, "first_offset"))
        hi = _int_or_none(get(r, "last_offset"))
        base = int(get(r, "base_offset"))
        start = lo if lo is not None else base
        if prev_last is not None:
            if base <= prev_last:
                overlaps.append((base, prev_last))
            elif start > prev_last + 1:
                gaps.append((prev_last + 1, start - 1))
        if hi is not None:
            prev_last = hi if prev_last is None else max(prev_last, hi)
    if prev_last is not None:
        log_end = prev_last + 1
    else:
        log_end = int(get(rows[-1], "base_offset"))
    recovery, lso, hwm = read_checkpoint_offsets(pdir, topic, partition)
    log_start = effective_log_start_offset(lso, int(get(rows[0], "base_offset")))
    if overlaps:
        problems.append(f"{len(overlaps)} segment(s) overlap the previous one")
    missing = gap_not_from_compaction(pdir, topic, partition, gaps)
    if missing is not None:
        problems.append(f"{len(gaps)} offset gap(s) between segments ({_ranges(gaps)}) not from compaction: {missing}")
    elif gaps:
        problems.append(f"{len(gaps)} offset gap(s) between segments (normal after compaction)")
    if corrupt:
        problems.append(f"{corrupt} segment(s) not ok")
    if unreadable:
        problems.append(f"{unreadable} segment(s) with a file that could not be read")
    ck = []
    if recovery is not None and recovery > log_end:
        ck.append(f"recovery point {recovery} is beyond the log end offset {log_end}")
    if lso is not None and lso > log_end:
        ck.append(f"log start offset checkpoint {lso} is beyond the log end offset {log_end}")
    if hwm is not None and hwm > log_end:
        ck.append(f"high watermark {hwm} is beyond the log end offset {log_end}")
    problems.extend(ck)
    if corrupt or missing is not None:
        continuity = "corrupt"
    elif overlaps:
        continuity = "overlap"
    elif ck:
        continuity = "checkpoint_mismatch"
    elif gaps:
        continuity = "gap"
    else:
        continuity = "ok"
    files = check_partition_files(pdir, log_end)
    problems.extend(files.problems)
    status = continuity
    if continuity != "corrupt" and files.status == "corrupt":
        status = "corrupt"
    if unreadable or files.status == "error":
        status = "unreadable"  # exit 2 wins over 1, as everywhere
    return PartitionReport(
        pdir, topic, partition, len(rows), corrupt + unreadable, log_start, log_end, gaps, overlaps, recovery, lso, hwm, status,
        problems, continuity, files,
    )  # fmt: skip


def _ranges(gaps: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}-{b}" for a, b in gaps)


def _int_or_none(v) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):  # a null long column through pandas
        return None
    return int(v)


#: the finding status of each ``PartitionReport.status``
PARTITION_STATUS = {"ok": "ok", "gap": "ok", "overlap": "corrupt", "checkpoint_mismatch": "corrupt", "corrupt": "corrupt",
           "unreadable": "error"}  # fmt: skip


def partition_finding(partition_dir: str, segments: Sequence[Any]) -> Finding:
    """The verdict on one partition dir from its segments' reports (every one, read or not): ERROR when one of its
    files could not be read, CORRUPT when one is corrupt (a segment, an index, a metadata file), segments overlap
    or a checkpoint lies beyond the data; gaps alone are normal after compaction. The offsets come from the
    segments that could be read. A dir with no segments still has its metadata files checked."""
    readable = [r for r in segments if getattr(r, "exception", None) is None]
    lost = len(segments) - len(readable)
    data: dict[str, Any] = {"segmentCount": len(segments)}
    status = "ok"
    summary = ""
    problems: list[str] = []
    if readable:
        p = verify_partition(readable)
        files = p.files
        data.update(
            topic=p.topic,
            partition=p.partition,
            logStartOffset=p.log_start_offset,
            logEndOffset=p.log_end_offset,
            gaps=[{"from": a, "to": b} for a, b in p.gaps],
            overlaps=[{"segmentBaseOffset": a, "previousLastOffset": b} for a, b in p.overlaps],
            recoveryPoint=p.checkpoint_recovery_point,
            logStartOffsetCheckpoint=p.checkpoint_log_start_offset,
            highWatermark=p.checkpoint_high_watermark,
            continuity=p.continuity,
        )
        problems = list(p.problems)
        status = PARTITION_STATUS[p.status]
        summary = f"{len(segments)} segments, log start {p.log_start_offset}, log end {p.log_end_offset}"
    else:
        files = check_partition_files(partition_dir, None)
        problems = list(files.problems)
        status = {"ok": "ok", "corrupt": "corrupt"}.get(files.status, "error")
    if lost:
        problems.append(f"{lost} segment(s) could not be read: their offsets are not checked")
        status = "error"
        summary = summary or f"{len(segments)} segments, none readable"
    if files.leader_epochs is not None:
        data["leaderEpochs"] = files.leader_epochs
    if files.topic_id is not None:
        data["topicId"] = files.topic_id
    return Finding("partition", partition_dir, status, summary, problems, data)
