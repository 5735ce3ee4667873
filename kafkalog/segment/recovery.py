"""The recovery engines of a segment: what Kafka's ``LogSegment.recover`` computes, apart from the segment's
file handling (``LogSegment.recover`` drives them) and from the loader that decides which segments to recover.

Two engines compute the same bytes. :func:`one_pass_plan` works on ``scan_batches``' header columns (CRCs
checked) and builds both index files with numpy in one go; :func:`rebuild_per_batch` walks ``RecordBatch``
objects and appends entry by entry, and is the reference the first must equal byte for byte and the path for
what the columns cannot express (legacy batches, a file that cannot be mapped, an index that would fill up).
:func:`valid_prefix` is the rule both apply to find where the good bytes end.

This module sits in the segment layer: what recovery hands producer state and the leader-epoch cache is
described by the :class:`ProducerStateRecovery` and :class:`EpochRecovery` protocols, which the log layer's
``ProducerStateManager`` and ``LeaderEpochFileCache`` satisfy, so nothing here imports the log layer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol

import numpy as np

from kafkalog.errors import CorruptRecordError
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex, TimestampOffset
from kafkalog.records.batch import HEADER, RecordBatch
from kafkalog.records.scan import ScanResult, scan_batches

I32_MAX = 2**31 - 1
_unpack_header = HEADER.unpack_from


class ProducerStateRecovery(Protocol):
    """What recovery needs of producer state (``ProducerStateManager`` satisfies it).

    ``skips_batches_without_producer``: ``recover_batch`` of a batch without a producer id only moves the map end
    offset, so the one-pass engine may hand over only the batches with one and set the end offset once."""

    skips_batches_without_producer: bool

    def recover_batch(self, batch: RecordBatch, segment: object) -> None: ...

    def update_map_end_offset(self, offset: int) -> None: ...


class EpochRecovery(Protocol):
    """What recovery needs of the leader-epoch cache (``LeaderEpochFileCache`` satisfies it)."""

    @property
    def latest_epoch(self) -> int | None: ...

    def assign(self, epoch: int, start_offset: int) -> bool: ...


class OnePassPlan:
    """What one-pass recovery computed from the header columns (see :func:`one_pass_plan`)."""

    __slots__ = ("valid_bytes", "count", "scan", "offset_entries", "time_entries", "last_index_position",
                 "max_ts_and_offset")

    def __init__(self, valid_bytes: int, count: int, scan: ScanResult) -> None:
        self.valid_bytes = valid_bytes
        self.count = count  # batches in the valid prefix
        self.scan = scan
        self.offset_entries = b""
        self.time_entries = b""
        self.last_index_position = 0
        self.max_ts_and_offset = TimestampOffset(-1, -1)


def valid_prefix(batches: Iterable[RecordBatch], state: dict, base_offset: int) -> int:
    """End of the longest prefix of whole, CRC-valid batches whose offsets fit the segment and move forward.

    ``batches``/``state`` are a validating ``LogSegment.scan`` (``state['valid_end']`` is read after the
    iteration). The base offset sits outside the CRC, so a flipped bit there is only visible against the
    neighbours. When a batch goes backwards, either it or the batch before it is damaged: the earlier one is
    blamed when it had jumped ahead of its own predecessor (a gap; the first batch's predecessor is the segment's
    base offset) and this batch still starts after that predecessor; otherwise this one is. Kafka instead
    truncates the whole segment on such an offset; stopping at the damage keeps every good batch before it.
    """
    floor = base_offset - 1  # every batch must start after this
    prev_position = -1
    prev_floor = floor  # the floor the previous batch was checked against
    prev_jumped = False  # the previous batch left a gap after its predecessor
    for batch in batches:
        rel = batch.last_offset - base_offset
        if batch.last_offset < batch.base_offset or not 0 <= rel <= I32_MAX:
            return batch.position
        if batch.base_offset <= floor:
            if prev_jumped and batch.base_offset > prev_floor:
                return prev_position
            return batch.position
        prev_jumped = batch.base_offset > floor + 1
        prev_position, prev_floor, floor = batch.position, floor, batch.last_offset
    return state["valid_end"]


def one_pass_plan(buf: memoryview, size: int, base_offset: int, index_interval_bytes: int,
                  max_index_size: int) -> OnePassPlan | None:
    """Everything :func:`rebuild_per_batch` would compute, from the header columns; None when that path must run
    instead (legacy batches, an index that would fill, positions past i32)."""
    if max_index_size < TimeIndex.ENTRY_SIZE:
        return None
    try:
        scan = scan_batches(buf, position=0, end=size, check_crc=True, stop_at_bad_crc=True)
    except CorruptRecordError:
        return None
    if scan.legacy_rows:  # empty: every batch in the prefix is magic 2
        return None
    h = scan.headers
    n = len(scan)
    positions = scan.positions
    base = base_offset
    valid_bytes = scan.valid_bytes
    m = n
    if n:
        firsts = h["base_offset"].astype(np.int64)
        lasts = firsts + h["last_offset_delta"].astype(np.int64)
        # valid_prefix's rules on the columns: the first batch breaking them ends the prefix, or the one
        # before it when that one had jumped ahead of its own predecessor and this one still starts after it.
        floors = np.empty(n, dtype=np.int64)
        floors[0] = base - 1
        floors[1:] = lasts[:-1]
        rel = lasts - base
        bad_range = (lasts < firsts) | (rel < 0) | (rel > I32_MAX)
        bad = bad_range | (firsts <= floors)
        if bad.any():
            k = int(bad.argmax())
            m = k
            if not bad_range[k] and k >= 1 and firsts[k - 1] > floors[k - 1] + 1 and firsts[k] > floors[k - 1]:
                m = k - 1
            valid_bytes = int(positions[m])
    if m and int(positions[m - 1]) > I32_MAX:
        return None
    plan = OnePassPlan(valid_bytes, m, scan)
    if m == 0:
        return plan
    pos = positions[:m]
    lasts = lasts[:m]
    # Offset index: an entry at the first batch starting more than index.interval.bytes after the last entry
    # (position 0 before the first), checked before the batch counts.
    interval = index_interval_bytes
    if interval < 0:
        sel = np.arange(m)
    elif m == 1 or (scan.sizes[: m - 1] > interval).all():
        sel = np.arange(1, m)  # every gap is larger: every batch after the first
    else:
        nxt = np.searchsorted(pos, pos + interval, side="right").tolist()
        i = int(np.searchsorted(pos, interval, side="right"))
        chosen = []
        while i < m:
            chosen.append(i)
            i = nxt[i]
        sel = np.asarray(chosen, dtype=np.intp)
    k_entries = len(sel)
    if k_entries > max_index_size // OffsetIndex.ENTRY_SIZE:
        return None  # the per-batch path raises IndexFullError where Kafka would
    # Running (max timestamp, offset of the batch that first reached it), starting from (-1, -1).
    max_ts = np.maximum.accumulate(np.maximum(h["max_timestamp"][:m].astype(np.int64), -1))
    rises = np.empty(m, dtype=bool)
    rises[0] = max_ts[0] > -1
    rises[1:] = max_ts[1:] > max_ts[:-1]
    holder = np.maximum.accumulate(np.where(rises, np.arange(m), -1))
    final_ts = int(max_ts[-1])
    final_off = int(lasts[holder[-1]]) if holder[-1] >= 0 else -1
    plan.max_ts_and_offset = TimestampOffset(final_ts, final_off)
    time_cap = max_index_size // TimeIndex.ENTRY_SIZE
    if k_entries:
        plan.last_index_position = int(pos[sel[-1]])
        off_entries = np.empty(k_entries, dtype=OffsetIndex.DTYPE)
        off_entries["relative_offset"] = lasts[sel] - base
        off_entries["position"] = pos[sel]
        plan.offset_entries = off_entries.tobytes()
        # A time entry with each offset entry, kept when its timestamp exceeds the previous kept one's.
        cand_ts = max_ts[sel]
        keep = np.empty(k_entries, dtype=bool)
        keep[0] = cand_ts[0] > -1
        keep[1:] = cand_ts[1:] > cand_ts[:-1]
        # maybe_append refuses (IndexFullError) once the entries before an append leave no spare slot.
        if int(keep[:-1].sum()) >= time_cap - 1:
            return None
        kept = sel[keep]
        t_ts = cand_ts[keep]
        t_off = np.where(holder[kept] >= 0, lasts[holder[kept]], -1)
    else:
        t_ts = t_off = np.empty(0, dtype=np.int64)
    last_ts = int(t_ts[-1]) if len(t_ts) else -1
    if final_ts > last_ts:  # the entry written on close, in the reserved slot
        if len(t_ts) >= time_cap:
            return None
        t_ts = np.append(t_ts, final_ts)
        t_off = np.append(t_off, final_off)
    if len(t_ts):
        t_entries = np.empty(len(t_ts), dtype=TimeIndex.DTYPE)
        t_entries["timestamp"] = t_ts
        t_entries["relative_offset"] = t_off - base
        plan.time_entries = t_entries.tobytes()
    return plan


def replay_batches(buf: memoryview, plan: OnePassPlan, producer_state: ProducerStateRecovery | None,
                   leader_epoch_cache: EpochRecovery | None, segment: object) -> None:
    """The per-batch part of one-pass recovery: leader-epoch changes and producer state, from the plan's
    columns. ``segment`` is handed to ``recover_batch`` (where aborted transactions go)."""
    m = plan.count
    if m == 0:
        return
    h = plan.scan.headers[:m]
    positions = plan.scan.positions
    sizes = plan.scan.sizes
    if leader_epoch_cache is not None:
        epochs = h["partition_leader_epoch"].astype(np.int64)
        before = np.empty(m, dtype=np.int64)
        before[0] = -1
        before[1:] = np.maximum.accumulate(epochs)[:-1]
        # Only a batch whose epoch exceeds every earlier one can exceed the cache's latest epoch then.
        for i in np.flatnonzero((epochs >= 0) & (epochs > before)).tolist():
            epoch = int(epochs[i])
            latest = leader_epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                leader_epoch_cache.assign(epoch, int(h["base_offset"][i]))
    if producer_state is None:
        return
    skip_plain = producer_state.skips_batches_without_producer
    if skip_plain:
        rows: Iterable[int] = np.flatnonzero(h["producer_id"] != -1).tolist()
    else:
        rows = range(m)
    recover_batch = producer_state.recover_batch
    from_header = RecordBatch._from_header
    for i in rows:
        p = int(positions[i])
        recover_batch(from_header(buf[p : p + int(sizes[i])], p, _unpack_header(buf, p)), segment)
    if skip_plain:
        last = plan.scan.headers[m - 1]
        producer_state.update_map_end_offset(int(last["base_offset"]) + int(last["last_offset_delta"]) + 1)


class PerBatchProgress:
    """How far :func:`rebuild_per_batch` got: the running (max timestamp, its offset) and the position of the last
    index entry, current even when an append raised part way (the segment keeps what was reached)."""

    __slots__ = ("max_ts_and_offset", "last_index_entry")

    def __init__(self) -> None:
        self.max_ts_and_offset = TimestampOffset(-1, -1)
        self.last_index_entry = 0


def rebuild_per_batch(batches: Iterator[RecordBatch], offset_index: OffsetIndex, time_index: TimeIndex,
                      index_interval_bytes: int, producer_state: ProducerStateRecovery | None,
                      leader_epoch_cache: EpochRecovery | None, segment: object,
                      progress: PerBatchProgress) -> None:
    """The batch-at-a-time engine: appends the index entries of ``batches`` (the valid prefix, from position 0)
    to the reset indexes, one at a time, raising exactly where Kafka's appends would, and replays producer state
    and leader epochs, keeping ``progress`` current as it goes."""
    position = 0
    for batch in batches:
        if batch.max_timestamp > progress.max_ts_and_offset.timestamp:
            progress.max_ts_and_offset = TimestampOffset(batch.max_timestamp, batch.offset_of_max_timestamp)
        if position - progress.last_index_entry > index_interval_bytes:
            offset_index.append(batch.last_offset, position)
            time_index.maybe_append(*progress.max_ts_and_offset)
            progress.last_index_entry = position
        position += batch.size_in_bytes
        if batch.magic >= 2:
            if leader_epoch_cache is not None and batch.partition_leader_epoch >= 0:
                latest = leader_epoch_cache.latest_epoch
                if latest is None or batch.partition_leader_epoch > latest:
                    leader_epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
            if producer_state is not None:
                producer_state.recover_batch(batch, segment)
