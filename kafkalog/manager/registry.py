"""``LogRegistry``: the logs a LogManager holds, the one state the manager and the replica mover share.

Kafka's LogManager keeps ``currentLogs`` and ``futureLogs`` (KIP-113) beside its ``logsToBeDeleted`` queue; the
move thread changes them while the broker serves. Here both sides go through this registry instead of one reaching
into the other: the maps and the queue change only under ``lock`` (the manager's state lock); an entry's log is
used only under its own partition lock (``LogEntry.lock``), which is never taken while ``lock`` is held by the
same thread for longer than a map update.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkalog.errors import KafkaStorageError
from kafkalog.log.log import Log
from kafkalog.manager.log_dir import LogDir
from kafkalog.manager.partition_lock import PartitionLock
from kafkalog.names import TopicPartition
from kafkalog.owned_lock import OwnedRLock

__all__ = ["LogEntry", "LogRegistry", "PendingDelete"]

# The manager's one logger: operators configure it by that name.
_log = logging.getLogger("kafkalog.manager.log_manager")

#: A ``-delete`` partition dir waiting for ``file.delete.delay.ms``: (log dir, partition dir path, queued at ms).
PendingDelete = tuple[str, str, int]


@dataclass(eq=False)
class LogEntry:
    """A loaded log and what the manager tracks about it."""

    key: TopicPartition
    log: Log
    dir: LogDir
    is_future: bool = False
    lock: PartitionLock = field(default_factory=PartitionLock, repr=False)
    closed: bool = False
    last_flush_ms: int = 0

    def close_handles(self) -> None:
        """Close the log's file handles without flushing or trimming anything (its disk may be gone)."""
        try:
            self.log.close_handlers()
        except Exception:
            _log.debug("closing handles of %s failed", self.key, exc_info=True)


class LogRegistry:
    """Current and future logs by partition, the log dirs they live in, and the ``-delete`` dirs queued for
    removal (see the module docstring for the locking rules)."""

    def __init__(self, dirs: dict[str, LogDir], clock: Callable[[], int]) -> None:
        self.dirs = dirs
        self.lock = OwnedRLock()
        self.current: dict[TopicPartition, LogEntry] = {}
        self.future: dict[TopicPartition, LogEntry] = {}
        self.to_delete: list[PendingDelete] = []
        self._clock = clock

    # --- dirs ---------------------------------------------------------------------------------------------------

    def dir(self, log_dir: str | os.PathLike[str]) -> LogDir:
        """The dir of this registry at ``log_dir`` (same path or same real path); KeyError for any other."""
        path = os.path.abspath(os.path.normpath(os.fspath(log_dir)))
        d = self.dirs.get(path)
        if d is None:
            real = os.path.realpath(path)
            d = next((x for x in self.dirs.values() if os.path.realpath(x.path) == real), None)
        if d is None:
            raise KeyError(f"{log_dir} is not one of this manager's log dirs")
        return d

    def live_dirs(self) -> list[LogDir]:
        return [d for d in self.dirs.values() if d.online]

    # --- entries ------------------------------------------------------------------------------------------------

    def get(self, key: TopicPartition, *, is_future: bool = False) -> LogEntry | None:
        with self.lock:
            return (self.future if is_future else self.current).get(key)

    def lookup(self, topic: str, partition: int, *, is_future: bool = False) -> LogEntry:
        """The partition's entry; KafkaStorageError when it lives in an offline dir, KeyError when nowhere."""
        key = (topic, partition)
        e = self.get(key, is_future=is_future)
        if e is not None:
            return e
        for d in self.dirs.values():
            if not d.online and key in d.offline_partitions:
                raise KafkaStorageError(f"partition {topic}-{partition} is in offline log dir {d.path}")
        raise KeyError(f"no log for {topic}-{partition}")

    def entries(self) -> list[LogEntry]:
        """Every current and future entry (a snapshot)."""
        with self.lock:
            return [*self.current.values(), *self.future.values()]

    def futures(self) -> list[tuple[TopicPartition, LogEntry]]:
        with self.lock:
            return list(self.future.items())

    def add_future(self, fe: LogEntry) -> bool:
        """Register a new future log unless its dir went offline meanwhile (then False: the caller closes it)."""
        with self.lock:
            if not fe.dir.online:
                return False
            self.future[fe.key] = fe
            return True

    def drop_future(self, key: TopicPartition, fe: LogEntry) -> None:
        """Forget ``fe`` as the partition's future log (if it still is)."""
        with self.lock:
            if self.future.get(key) is fe:
                del self.future[key]

    def promote_future(self, key: TopicPartition, fe: LogEntry, log: Log) -> None:
        """``fe`` (now holding ``log``, opened as a current log) becomes the partition's current entry."""
        with self.lock:
            fe.log = log
            fe.is_future = False
            if self.future.get(key) is fe:
                del self.future[key]
            self.current[key] = fe

    # --- the deletion queue -------------------------------------------------------------------------------------

    def queue_delete(self, log_dir: str, path: str) -> None:
        """Remove the ``-delete`` dir ``path`` after ``file.delete.delay.ms`` (Kafka's ``logsToBeDeleted``)."""
        with self.lock:
            self.to_delete.append((log_dir, path, self._clock()))

    def take_due(self, now: int, delay_ms: int) -> list[PendingDelete]:
        """Take the queued deletions whose delay has passed."""
        with self.lock:
            due = [t for t in self.to_delete if now - t[2] >= delay_ms]
            self.to_delete[:] = [t for t in self.to_delete if t not in due]
        return due

    def pending_deletions(self) -> list[PendingDelete]:
        with self.lock:
            return list(self.to_delete)

    def forget_dir_deletions(self, log_dir: str) -> None:
        """A dir went offline: its queued deletions are no longer this process's to do."""
        with self.lock:
            self.to_delete[:] = [t for t in self.to_delete if t[0] != log_dir]

    def entries_by_dir(self, wanted: Iterable[str] | None) -> dict[str, list[LogEntry]]:
        """Entries per online dir (all online dirs, or those of ``wanted`` paths), empty dirs included."""
        want = None if wanted is None else set(wanted)
        with self.lock:
            out: dict[str, list[LogEntry]] = {d.path: [] for d in self.dirs.values()
                                              if d.online and (want is None or d.path in want)}
            for e in [*self.current.values(), *self.future.values()]:
                if e.dir.path in out:
                    out[e.dir.path].append(e)
        return out
