"""The leader-epoch cache of one partition, backed by its ``leader-epoch-checkpoint`` file.

Kafka's ``LeaderEpochFileCache``: an ordered map epoch -> first offset written in that epoch. Followers use it to
find where their log diverges from the leader's (``end_offset_for``), so its rules for accepting, truncating and
flushing entries are kept exactly: ``assign`` writes the checkpoint synchronously (so the file never misses an
entry), truncations flush too (Kafka flushes those asynchronously; a synchronous write is never less safe).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint, write_leader_epoch_checkpoint
from kafkalog.errors import InvalidArgumentError
from kafkalog.io.oserrors import MISSING_PATH_ERRNOS

#: Kafka's ``UNDEFINED_EPOCH`` / ``UNDEFINED_EPOCH_OFFSET`` (OffsetsForLeaderEpochResponse).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

CHECKPOINT_FILE = "leader-epoch-checkpoint"


class EpochEntry(NamedTuple):
    """One line of the checkpoint: ``epoch startOffset``."""

    epoch: int
    start_offset: int


def _entry(obj: object) -> EpochEntry:
    """Accept the checkpoint module's entry type, a tuple, or our own ``EpochEntry``."""
    if isinstance(obj, EpochEntry):
        return obj
    epoch = getattr(obj, "epoch", None)
    if epoch is not None:
        return EpochEntry(int(epoch), int(obj.start_offset))  # type: ignore[attr-defined]
    epoch, start = obj  # type: ignore[misc]
    return EpochEntry(int(epoch), int(start))


def _default_reader(path: Path) -> list[EpochEntry]:
    try:
        entries = read_leader_epoch_checkpoint(path)
    except OSError as exc:  # no stat first: a missing file costs one failed open
        if exc.errno in MISSING_PATH_ERRNOS:
            return []
        raise
    return [_entry(e) for e in entries]


def _default_writer(path: Path, entries: list[EpochEntry]) -> None:
    write_leader_epoch_checkpoint(path, entries)


class LeaderEpochFileCache:
    """epoch -> start offset, with Kafka's monotonicity rules; every change is written to the checkpoint file.

    ``path`` may be None for a memory-only cache (used by Kafka-style intermediate recoveries and tests).
    Reading a malformed checkpoint raises whatever the checkpoint reader raises (``CorruptCheckpointError``);
    the loader decides what to do about it (kafkalog rebuilds from the batches, see ``loader.py``).
    """

    def __init__(
        self,
        path: str | Path | None,
        *,
        entries: Iterable[object] | None = None,
        reader: Callable[[Path], list[EpochEntry]] | None = None,
        writer: Callable[[Path, list[EpochEntry]], None] | None = None,
    ) -> None:
        self._path = None if path is None else path if isinstance(path, Path) else Path(path)
        self._writer = writer or _default_writer
        self._lock = threading.RLock()
        self._epochs: list[int] = []  # sorted epochs
        self._offsets: dict[int, int] = {}  # epoch -> start offset
        if entries is None:
            entries = (reader or _default_reader)(self._path) if self._path is not None else []
        # Kafka replays the file through assign(), which drops non-monotonic lines rather than trusting them.
        for e in entries:
            self._assign(_entry(e))

    # ------------------------------------------------------------------ reading

    @property
    def path(self) -> Path | None:
        return self._path

    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return [EpochEntry(e, self._offsets[e]) for e in self._epochs]

    def non_empty(self) -> bool:
        return bool(self._epochs)

    def __len__(self) -> int:
        return len(self._epochs)

    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            if not self._epochs:
                return None
            e = self._epochs[-1]
            return EpochEntry(e, self._offsets[e])

    @property
    def latest_epoch(self) -> int | None:
        entry = self.latest_entry()
        return None if entry is None else entry.epoch

    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            if not self._epochs:
                return None
            e = self._epochs[0]
            return EpochEntry(e, self._offsets[e])

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below ``epoch`` (default: below the latest epoch)."""
        with self._lock:
            if epoch is None:
                if not self._epochs:
                    return None
                epoch = self._epochs[-1]
            i = bisect.bisect_left(self._epochs, epoch)
            return self._epochs[i - 1] if i > 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        with self._lock:
            i = bisect.bisect_right(self._epochs, epoch)
            return self._epochs[i] if i < len(self._epochs) else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        with self._lock:
            off = self._offsets.get(epoch)
            return None if off is None else EpochEntry(epoch, off)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at ``offset`` was written in, as far as the cache knows."""
        with self._lock:
            prev: int | None = None
            for e in self._epochs:
                start = self._offsets[e]
                if start == offset:
                    return e
                if start > offset:
                    return prev
                prev = e
            return prev

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (largest epoch <= requested, start offset of the next epoch or the LEO)."""
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._epochs and self._epochs[-1] == requested_epoch:
                return requested_epoch, log_end_offset
            hi = bisect.bisect_right(self._epochs, requested_epoch)
            if hi >= len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            higher_start = self._offsets[self._epochs[hi]]
            if hi == 0:
                # Below every known epoch: the data is gone; point the follower at the first known start.
                return requested_epoch, higher_start
            return self._epochs[hi - 1], higher_start

    def epoch_entries_in_range(self, start_offset: int, end_offset: int) -> list[EpochEntry]:
        with self._lock:
            entries = self.entries()
        if start_offset >= 0:
            entries = _truncate_from_start(entries, start_offset)[0]
        return _truncate_from_end(entries, end_offset)[0]

    # ------------------------------------------------------------------ writing

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True (and the file rewritten) if the cache changed.

        Kafka's rule: only a new epoch, or the same latest epoch at a lower offset, changes anything; entries
        with an epoch >= the new one or a start offset >= the new one are dropped first (monotonicity).
        """
        with self._lock:
            changed = self._assign(EpochEntry(epoch, start_offset))
            if changed:
                self.flush()
            return changed

    def assign_all(self, entries: Iterable[object]) -> None:
        with self._lock:
            entries = list(entries)
            for e in entries:
                self._assign(_entry(e))
            if entries:
                self.flush()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise InvalidArgumentError(f"invalid partition leader epoch entry {entry}")
        latest = self.latest_entry()
        if latest is not None and not (entry.epoch != latest.epoch or entry.start_offset < latest.start_offset):
            return False
        # drop conflicting entries from the end
        while self._epochs:
            e = self._epochs[-1]
            if e >= entry.epoch or self._offsets[e] >= entry.start_offset:
                self._epochs.pop()
                del self._offsets[e]
            else:
                break
        bisect.insort(self._epochs, entry.epoch)
        self._offsets[entry.epoch] = entry.start_offset
        return True

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Drop every entry whose start offset >= ``end_offset`` (log truncated to ``end_offset``)."""
        with self._lock:
            kept, removed = _truncate_from_end(self.entries(), end_offset)
            if removed:
                self._replace(kept)
                self.flush()
            return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """Log start moved to ``start_offset``: entries starting at or below it collapse into one at it."""
        with self._lock:
            current = self.entries()
            kept, removed = _truncate_from_start(current, start_offset)
            if removed and kept != current:  # an entry already at the start offset changes nothing: no rewrite
                self._replace(kept)
                self.flush()
            return removed

    def clear_and_flush(self) -> None:
        with self._lock:
            self._replace([])
            self.flush()

    def clear(self) -> None:
        with self._lock:
            self._replace([])

    def flush(self) -> None:
        """Write the checkpoint (atomically, via the checkpoint module); no-op for a memory-only cache."""
        if self._path is None:
            return
        with self._lock:
            self._writer(self._path, self.entries())

    def with_path(self, path: str | Path | None) -> LeaderEpochFileCache:
        """A copy with the same entries backed by another file (Kafka's ``withCheckpoint``, used on dir moves)."""
        return LeaderEpochFileCache(path, entries=self.entries(), writer=self._writer)

    def _replace(self, entries: list[EpochEntry]) -> None:
        self._epochs = [e.epoch for e in entries]
        self._offsets = {e.epoch: e.start_offset for e in entries}

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self._path}, {self.entries()})"


def _truncate_from_end(entries: list[EpochEntry], end_offset: int) -> tuple[list[EpochEntry], list[EpochEntry]]:
    if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
        return entries, []
    kept = list(entries)
    removed: list[EpochEntry] = []
    while kept and kept[-1].start_offset >= end_offset:
        removed.append(kept.pop())
    return kept, removed


def _truncate_from_start(entries: list[EpochEntry], start_offset: int) -> tuple[list[EpochEntry], list[EpochEntry]]:
    removed: list[EpochEntry] = []
    i = 0
    while i < len(entries) and entries[i].start_offset <= start_offset:
        removed.append(entries[i])
        i += 1
    if not removed:
        return entries, []
    kept = [EpochEntry(removed[-1].epoch, start_offset), *entries[i:]]
    return kept, removed
