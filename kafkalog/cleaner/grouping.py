"""Which source segments become one cleaned segment (Kafka's ``Cleaner.groupSegmentsBySize``): consecutive segments
while their ``.log`` bytes stay within ``segment.bytes``, their offset-index and time-index bytes each within
``segment.index.bytes``, and their offsets within 32 bits of the group's base (a following empty segment needs no
such check)."""

from __future__ import annotations

from collections.abc import Sequence

from kafkalog.limits import INT_MAX
from kafkalog.segment.log_segment import LogSegment

__all__ = ["group_segments_by_size"]


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        first = segments[i]
        group = [first]
        log_size = first.size
        index_size = first.offset_index.size_in_bytes
        time_index_size = first.time_index.size_in_bytes
        i += 1
        while i < n:
            seg = segments[i]
            # the last offset of ``seg`` is at most the next base - 1 (or the first uncleanable offset - 1)
            last_offset = segments[i + 1].base_offset - 1 if i + 1 < n else first_uncleanable_offset - 1
            if not (log_size + seg.size <= max_size
                    and index_size + seg.offset_index.size_in_bytes <= max_index_size
                    and time_index_size + seg.time_index.size_in_bytes <= max_index_size
                    and (seg.size == 0 or last_offset - first.base_offset <= INT_MAX)):
                break
            group.append(seg)
            log_size += seg.size
            index_size += seg.offset_index.size_in_bytes
            time_index_size += seg.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups
