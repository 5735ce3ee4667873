"""A task's Aiven tiered segments opened ahead of the one being scanned (:func:`kafkalog.archive.tiered.open_ahead`).

A task reads its segments one after another; on a bucket each Aiven segment costs round trips before its first
byte (the manifest's GET, the ``.log``'s open, the GET of its first chunks). Opened ahead in the read pool, those
of the next segments overlap the current segment's scan, and each segment is opened once for both its indexes
and its ``.log`` range. Memory: :data:`~kafkalog.archive.tiered.aiven.OPEN_AHEAD` + 1 opened segments, each with
at most :data:`~kafkalog.archive.tiered.aiven.READ_BYTES` of first chunks fetched ahead (none when a segment is
read from an offset or byte position past its start, which the first chunks may not hold).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from kafkalog.archive import storage
from kafkalog.archive.discovery import SegmentItem
from kafkalog.archive.tiered import AivenSegment, is_aiven_item, materialize, open_ahead

__all__ = ["Opened", "indexes_of", "opened_ahead", "opened_segment"]

#: an opened Aiven segment, or the error its open raised (raised where the segment is read)
Opened = tuple[AivenSegment | None, BaseException | None]


def opened_ahead(parts: list[Any], options: Mapping[str, Any] | None, rsm: Any) -> Iterator[Opened]:
    """The Aiven segments among ``parts`` (:class:`kafkalog.spark.datasource.SegmentPartition`), in order,
    opened ahead (a generator: close it to stop); each segment's first chunks are fetched ahead when every part
    is read from its start."""
    aiven = [p for p in parts if is_aiven_item(p.item)]
    if not aiven:
        return
    whole = all(p.start == 0 and p.bounds.offset_lo <= p.item.base_offset for p in aiven)

    def opener(item: SegmentItem) -> AivenSegment:
        return AivenSegment.open_item(item, rsm=rsm, options=options)

    opened = open_ahead([p.item for p in aiven], opener, prefetch=whole, options=options or {})
    try:
        for _, seg, error in opened:
            yield seg, error
    finally:
        opened.close()


def opened_segment(opened: Opened | None) -> AivenSegment | None:
    """The segment of ``opened``; its open's error raised here, where the scan would have opened it."""
    if opened is None:
        return None
    seg, error = opened
    if error is not None:
        raise error
    return seg


@contextlib.contextmanager
def indexes_of(item: SegmentItem, seg: AivenSegment) -> Iterator[SegmentItem]:
    """``item``'s indexes out of the opened segment's ``.indexes``, as local files for the block's duration
    (:func:`kafkalog.log.timestamp_offsets.indexes_on_disk` for a segment opened already)."""
    with storage.scratch_dir() as root:
        yield materialize(item, root, with_log=False, segment=seg)
