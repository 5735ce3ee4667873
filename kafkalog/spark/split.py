"""Splitting segments above ``maxPartitionBytes`` into byte ranges for the DataSource's tasks.

A 1 GiB segment read by one task leaves the other cores idle. The cuts are ``.index`` entries, each checked to
start a whole CRC-valid batch ending at the offset it claims (:func:`kafkalog.log.index_check.batch_cuts`, one rule
for every kind of segment): a local segment is checked in place; a remote object or an Aiven tiered segment costs
the driver its offset index alone (for Aiven, the ``offset`` part of ``.indexes``) plus, per cut, a ranged read of
the batch's header and one of the batch. Any failed check leaves the segment whole, which is always right. Segments
at or under the limit (by their listed size) cost nothing here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kafkalog.archive import storage
from kafkalog.archive.tiered import AivenSegment, is_aiven_item
from kafkalog.errors import KafkaLogError
from kafkalog.log.index_check import batch_cuts

__all__ = ["segment_cuts", "split_big_segments"]

#: threads fetching the offset indexes of big remote segments on the driver
FETCH_THREADS = 8

P = TypeVar("P")


def split_big_segments(parts: list[P], max_bytes: int, options: dict[str, str], rsm=None) -> list[P]:
    """``parts`` (whole-segment :class:`kafkalog.spark.datasource.SegmentPartition` s, in order) with each one
    above ``max_bytes`` replaced by its byte ranges ``[start, stop)`` (cut at batch starts), when its cuts pass
    their checks."""
    big = [p for p in parts if p.stop is None and p.size > max_bytes]  # type: ignore[attr-defined]
    if not big:
        return parts

    def plan(p: Any) -> tuple[list[int], int]:
        return segment_cuts(p.item, max_bytes, options, rsm)

    if len(big) == 1:
        found = [plan(big[0])]
    else:
        with ThreadPoolExecutor(min(FETCH_THREADS, len(big)), thread_name_prefix="kafkalog-cuts") as pool:
            found = list(pool.map(plan, big))
    cuts_of = {id(p): f for p, f in zip(big, found, strict=True)}
    out: list[P] = []
    for p in parts:
        cuts, size = cuts_of.get(id(p), ([], 0))
        if not cuts:
            out.append(p)
            continue
        bounds = [0, *cuts, size]
        out.extend(dataclasses.replace(p, start=a, stop=b) for a, b in zip(bounds, bounds[1:], strict=False))
    return out


def segment_cuts(item: Any, max_bytes: int, options: dict[str, str], rsm=None) -> tuple[list[int], int]:
    """(cut positions, the segment's size in bytes) of one discovered segment (a
    :class:`kafkalog.archive.discovery.SegmentItem`): local, remote (``s3://`` and the other storage URLs) or Aiven
    tiered. ``[]`` when it is not worth splitting or a check fails (an I/O error included: the task then meets it
    with its own ``onCorrupt``)."""
    if not storage.is_remote(item.path) and not is_aiven_item(item):
        return batch_cuts(item.path, item.base_offset, item.size_bytes, max_bytes), item.size_bytes
    try:
        if is_aiven_item(item):
            seg = AivenSegment.open_item(item, rsm=rsm, options=options)
            if seg.size <= max_bytes:
                return [], seg.size
            return _remote_cuts(item, seg.size, max_bytes, lambda: seg.index("offset"), _ChunkReads(seg)), seg.size
        if item.index_size <= 0:
            return [], item.size_bytes

        def read_at(position: int, length: int) -> bytes:
            return storage.read_range(item.path, position, position + length, options)

        def index() -> bytes:
            return storage.read_range(item.sibling(".index"), 0, None, options)

        return _remote_cuts(item, item.size_bytes, max_bytes, index, read_at), item.size_bytes
    except (KafkaLogError, OSError):
        return [], item.size_bytes


def _remote_cuts(item: Any, size: int, max_bytes: int, index: Callable[[], bytes | None],
                 read_at: Callable[[int, int], bytes]) -> list[int]:  # fmt: skip
    """:func:`batch_cuts` of a segment whose ``.log`` is read through ``read_at``, with its offset index
    (``index()``'s bytes) in a scratch dir for the call."""
    data = index()
    if not data:
        return []
    with storage.scratch_dir() as root:
        stem = os.path.join(root, f"{item.base_offset:020d}")
        with open(stem + ".index", "wb") as f:
            f.write(data)
        return batch_cuts(stem + ".log", item.base_offset, size, max_bytes, read_at)


class _ChunkReads:
    """``read_at`` over an Aiven segment keeping the chunks last restored: a batch's header and the batch, almost
    always in the same chunk, cost one ranged read and one decrypt/decompress, not two."""

    def __init__(self, seg: AivenSegment) -> None:
        self.seg = seg
        self.lo = 0
        self.data = bytearray()

    def __call__(self, position: int, length: int) -> bytes:
        end = min(position + length, self.seg.size)
        if not (self.lo <= position and end <= self.lo + len(self.data)):
            ci = self.seg.manifest.chunk_index
            ids = ci.chunks_for_range(position, end)
            if not len(ids):
                return b""
            self.lo = int(ci.original_position[ids.start])
            last = ids.stop - 1
            self.data = self.seg.read(self.lo, int(ci.original_position[last] + ci.original_size[last]))
        return bytes(self.data[position - self.lo : end - self.lo])
