"""Which bytes of a partition's segments salvage keeps: every whole, CRC-valid batch whose offsets fit the log.

Kafka's recovery reads a segment from position 0 and stops at the first invalid batch. Salvage reads past it: after
a bad region it looks for the next position where a whole batch with a valid CRC starts (``_resync``) and reads on
from there, so a flipped byte costs one batch, not the rest of the log. The candidates found are then filtered
to those whose offsets a loader accepts:

* inside their segment: first offset >= the segment's base offset, last offset below the next segment's base
  and within the 32-bit relative range;
* renumbered batches go: the offset field of a batch is outside its CRC, so a flipped bit there moves a batch
  without failing any check. In a log Kafka wrote, ``first offset - offsets of the batches before it`` stays the
  same from batch to batch (it moves only at a gap, e.g. compaction). A batch that disagrees with both of its
  neighbours while they agree with each other across it has been renumbered, and is dropped;
* what remains must have strictly increasing offsets (a segment's batches must): among the candidates the
  chain keeping the most records wins (a weighted longest increasing subsequence).

The result is, per segment, the batches kept and the byte ranges removed (with why), which ``salvage.py`` turns
into a plan, a quarantine and a rewrite.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass, field

import numpy as np

from kafkalog.errors import CorruptRecordError
from kafkalog.limits import INT_MAX
from kafkalog.records.batch import LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from kafkalog.records.reader import LEGACY_RECORD_OVERHEAD_V0, LEGACY_RECORD_OVERHEAD_V1, V2_MIN_LENGTH, read_batches
from kafkalog.segment.reads import served_span

__all__ = ["Kept", "Removed", "SegmentScan", "choose_batches", "epoch_entries", "next_batch_position", "scan_segment"]

_PREFIX = struct.Struct(">qi4xb")  # base offset, length, magic (after the 4-byte epoch / legacy crc)
_MIN_SIZE = {2: V2_MIN_LENGTH, 1: LEGACY_RECORD_OVERHEAD_V1, 0: LEGACY_RECORD_OVERHEAD_V0}
_WINDOW = 1 << 18


@dataclass(frozen=True)
class Kept:
    """One whole, CRC-valid batch: where it is and the offsets it serves."""

    position: int
    size: int
    first: int
    last: int
    records: int
    epoch: int = -1  # partition leader epoch (magic 2; -1 for legacy batches)


@dataclass(frozen=True)
class Removed:
    """Bytes salvage removes from a segment, and why (``crc``, ``torn``, ``garbage``, ``offsets``)."""

    position: int
    size: int
    reason: str
    declared_last: int | None = None  # the last offset a readable header there claims, for reports only


@dataclass
class SegmentScan:
    """A segment's candidates (file order) and its bad regions, before the offset filter."""

    base_offset: int
    size: int
    batches: list[Kept] = field(default_factory=list)
    bad: list[Removed] = field(default_factory=list)


def _kept(batch) -> Kept:
    """A candidate from a batch: the offsets a reader is served (``LogSegment``'s rule: a legacy compressed
    wrapper is opened for its inner offsets). CorruptRecordError when they are not readable."""
    first, last = served_span(batch)
    epoch = batch.partition_leader_epoch if batch.magic >= 2 else -1
    return Kept(batch.position, batch.size_in_bytes, first, last, batch.record_count, epoch)


def _declared_last(buf: memoryview, pos: int, end: int) -> int | None:
    """The last offset a batch header at ``pos`` claims (v2: base + last offset delta; legacy: its offset)."""
    if end - pos < RECORD_BATCH_OVERHEAD:
        return None
    base, _size, magic = _PREFIX.unpack_from(buf, pos)
    if magic == 2:
        return base + struct.unpack_from(">i", buf, pos + 23)[0]
    return base if magic in (0, 1) else None


def _valid_at(buf: memoryview, pos: int, end: int):
    """The whole CRC-valid batch starting at ``pos``, or None."""
    reader = read_batches(buf, position=pos, end=end, validate=True)
    for batch in reader:
        return batch
    return None


def _resync(buf: memoryview, arr: np.ndarray, pos: int, end: int) -> int:
    """The first position after ``pos`` where a whole CRC-valid batch starts (``end`` when none). Candidates are
    filtered with numpy (a magic byte 0-2 and a length that fits) before a CRC is computed."""
    start = pos + 1
    while start + RECORD_BATCH_OVERHEAD <= end or start + LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD_V0 <= end:
        stop = min(end, start + _WINDOW)
        last_start = min(stop, end - (LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD_V0) + 1)
        if last_start <= start:
            break
        n = last_start - start
        magic = arr[start + 16 : start + 16 + n]
        cand = np.flatnonzero(magic <= 2)
        if len(cand):
            q = cand + start
            b = arr[(q[:, None] + np.arange(8, 12)[None, :])].astype(np.int64)
            length = (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]
            length = np.where(length >= 1 << 31, length - (1 << 32), length)
            minimum = np.choose(np.minimum(arr[q + 16], 2).astype(np.intp), [_MIN_SIZE[0], _MIN_SIZE[1], _MIN_SIZE[2]])
            ok = (length >= minimum) & (q + LOG_OVERHEAD + length <= end)
            for p in q[ok].tolist():
                if _valid_at(buf, p, end) is not None:
                    return p
        start = last_start
    return end


def next_batch_position(buf: memoryview, pos: int, end: int | None = None) -> int:
    """The first position after ``pos`` (a bad region's start) where a whole CRC-valid batch starts, ``end`` (the
    buffer's end by default) when none does: where salvage, and readers that skip bad batches, read on."""
    end = len(buf) if end is None else end
    return _resync(buf, np.frombuffer(buf, dtype=np.uint8), pos, end)


def scan_segment(buf: memoryview, base_offset: int) -> SegmentScan:
    """Every whole CRC-valid batch of a ``.log``'s bytes, reading past bad regions, and the bad regions."""
    end = len(buf)
    out = SegmentScan(base_offset, end)
    arr = np.frombuffer(buf, dtype=np.uint8)
    pos = 0
    while pos < end:
        reader = read_batches(buf, position=pos, end=end, validate=True)
        for batch in reader:
            try:
                out.batches.append(_kept(batch))
            except CorruptRecordError:
                out.bad.append(Removed(batch.position, batch.size_in_bytes, "unreadable"))
        if reader.error is None:
            break
        bad_at = reader.valid_bytes
        nxt = _resync(buf, arr, bad_at, end)
        message = str(reader.error)
        reason = "crc" if "CRC" in message else ("torn" if nxt == end and "truncated" in message else "garbage")
        out.bad.append(Removed(bad_at, nxt - bad_at, reason, _declared_last(buf, bad_at, end)))
        pos = nxt
    return out


def choose_batches(scans: list[SegmentScan]) -> list[list[Kept]]:
    """Per segment, the batches salvage keeps (see the module doc for the rules)."""
    flat: list[tuple[int, Kept]] = []
    for i, scan in enumerate(scans):
        upper = scans[i + 1].base_offset if i + 1 < len(scans) else None
        for k in scan.batches:
            if k.first < scan.base_offset or k.last < k.first or k.last - scan.base_offset > INT_MAX:
                continue
            if upper is not None and k.last >= upper:
                continue
            flat.append((i, k))
    flat = _drop_renumbered(flat)
    keep = _heaviest_increasing(flat)
    out: list[list[Kept]] = [[] for _ in scans]
    for i, k in keep:
        out[i].append(k)
    return out


def _drop_renumbered(flat: list[tuple[int, Kept]]) -> list[tuple[int, Kept]]:
    """Drop renumbered batches: ``first - offsets before`` differs from both neighbours while those agree; at
    either end of the log, differs from its one neighbour and overlaps it (the order alone tells it moved)."""
    n = len(flat)
    if n < 2:
        return flat
    shift = []
    spans = 0
    for _i, k in flat:
        shift.append(k.first - spans)
        spans += k.last - k.first + 1

    def renumbered(j: int) -> bool:
        if 0 < j < n - 1:
            return shift[j - 1] == shift[j + 1] != shift[j]
        if n < 3:
            return False  # two batches disagreeing: nothing tells which moved; the order filter decides
        near, far = (1, 2) if j == 0 else (n - 2, n - 3)
        a, b = (flat[j][1], flat[near][1]) if j == 0 else (flat[near][1], flat[j][1])
        return shift[near] == shift[far] != shift[j] and b.first <= a.last

    return [item for j, item in enumerate(flat) if not renumbered(j)]


def _heaviest_increasing(flat: list[tuple[int, Kept]]) -> list[tuple[int, Kept]]:
    """The subsequence with strictly increasing offsets (each first above the previous last) keeping the most
    records; the whole list when it already is one (the common case, checked first)."""
    if all(flat[j][1].first > flat[j - 1][1].last for j in range(1, len(flat))):
        return flat
    lasts = sorted({k.last for _i, k in flat})
    n = len(lasts)
    tree = [(0, -1)] * (n + 1)  # Fenwick tree of (best weight, index) over ranks of last offsets (prefix maxima)
    best_w = [0] * len(flat)
    parent = [-1] * len(flat)
    for j, (_i, k) in enumerate(flat):
        r = bisect.bisect_left(lasts, k.first)  # ranks of lasts < first: 1..r
        w, p = 0, -1
        while r > 0:
            if tree[r][0] > w:
                w, p = tree[r]
            r -= r & -r
        best_w[j] = w + k.records + 1  # +1: a batch of zero records (legacy oddities) still counts
        parent[j] = p
        r = bisect.bisect_left(lasts, k.last) + 1
        while r <= n:
            if best_w[j] > tree[r][0]:
                tree[r] = (best_w[j], j)
            r += r & -r
    j = max(range(len(flat)), key=lambda x: best_w[x])
    chain = []
    while j >= 0:
        chain.append(flat[j])
        j = parent[j]
    chain.reverse()
    return chain


def epoch_entries(kept: list[Kept], old: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The leader-epoch entries (epoch, start offset) matching the batches kept (log order).

    Each epoch's first kept batch starts an entry (Kafka's recovery rule: an epoch above the latest one). An entry
    of the old checkpoint survives when the batches do not contradict it: every kept batch before its start has
    a lower epoch and every one from it on a higher or equal one (an epoch can start where no batch was written,
    or in bytes salvage removed). Entries out of order in the old file (damage) go."""
    derived: dict[int, int] = {}
    latest = -1
    for k in kept:
        if k.epoch > latest:
            derived[k.epoch] = k.first
            latest = k.epoch
    epochs = [k.epoch for k in kept if k.epoch >= 0]
    firsts = [k.first for k in kept if k.epoch >= 0]
    merged = dict(derived)
    for epoch, start in old:
        i = bisect.bisect_left(firsts, start)
        if any(e >= epoch for e in epochs[:i]) or any(e < epoch for e in epochs[i:]):
            continue
        if epoch not in merged or start < merged[epoch]:
            merged[epoch] = start
    out: list[tuple[int, int]] = []
    for epoch in sorted(merged):
        if not out or merged[epoch] > out[-1][1]:
            out.append((epoch, merged[epoch]))
    return out
