"""The CRC of every batch a cleaning pass reads (better than Kafka, whose cleaner never calls ``ensureValid``):
a batch that fails it would be copied as is or rebuilt under a fresh, valid CRC, laundering the damage, so the
pass refuses the partition instead (``CleanerCorruptBatchError``). The compiled core checks runs of magic 2
batches in C (``_cleaner.check_crcs``, hardware CRC32C); magic 0/1 batches and the pure-Python path check each
batch object (``is_valid``: CRC32C for v2, the message CRC32 for legacy)."""

from __future__ import annotations

from typing import Any

from kafkalog.errors import CleanerCorruptBatchError
from kafkalog.records.reader import read_batches

from . import native

__all__ = ["check_chunk", "crc_scan"]


def crc_scan(view: memoryview, start: int, end: int, compiled: bool) -> tuple[int, int | None]:
    """Walk the whole batches of ``view[start:end]``: (where the walk stopped: ``end`` or a batch that is not whole
    there, the position of the first batch whose CRC fails or None)."""
    pos = start
    if not compiled:
        reader = read_batches(view, position=start, end=end)
        for batch in reader:
            if not batch.is_valid():
                return batch.position, batch.position
        return reader.valid_bytes, None
    while pos < end:
        pos, bad = native.compiled.check_crcs(view, pos, end)
        if bad:
            return pos, pos
        if pos >= end:
            break
        batch = next(iter(read_batches(view, position=pos, end=end)), None)  # magic 0/1, or not whole: frame it
        if batch is None:
            break
        if not batch.is_valid():
            return pos, pos
        pos += batch.size_in_bytes
    return pos, None


def check_chunk(view: memoryview, valid: int, compiled: bool, path: Any, file_position: int) -> None:
    """Raise ``CleanerCorruptBatchError`` when a batch of ``view[:valid]`` (whole batches read at
    ``file_position`` of segment ``path``) fails its CRC."""
    _, bad = crc_scan(view, 0, valid, compiled)
    if bad is not None:
        raise_corrupt(view, bad, valid, path, file_position)


def raise_corrupt(view: memoryview, bad: int, end: int, path: Any, file_position: int) -> None:
    batch = next(iter(read_batches(view, position=bad, end=end)))
    raise CleanerCorruptBatchError(str(path), file_position + bad, batch.base_offset, batch.last_offset, batch.crc,
                                   batch.compute_checksum())
