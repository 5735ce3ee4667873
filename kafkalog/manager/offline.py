"""Taking a log dir offline: the manager's side of the :class:`LogDirFailureChannel` (Kafka's
``handleLogDirFailure``, KIP-112).

Every I/O failure of the manager, the mover, the sanity checker and a Log's storage hooks is handed to the
channel's ``report`` (the one funnel that classifies an ``OSError``); :meth:`OfflineHandler.process_failures` then
drains the channel and takes each reported dir offline exactly once: its partitions leave the registry, their
handles are closed without flushing, its lock is released and listeners hear a :class:`LogDirOfflineEvent`.

Offline handling is serialised by ``lock`` and never runs while the caller holds a partition lock (an I/O error
is caught inside the partition lock and reported after leaving it), so two threads failing on the same dir cannot
deadlock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafkalog.errors import (
    InvalidPartitionDirError,
    KafkaStorageError,
    NoLiveLogDirsError,
    ResourceExhaustedError,
    io_cause,
)
from kafkalog.log.log import Log
from kafkalog.manager.failure_channel import LogDirFailureChannel
from kafkalog.manager.loading import DirLoad
from kafkalog.manager.log_dir import LogDir
from kafkalog.manager.partition_lock import holds_partition_lock
from kafkalog.manager.registry import LogRegistry
from kafkalog.manager.sanity_checker import SanityChecker
from kafkalog.names import TopicPartition, parse_partition_dir
from kafkalog.owned_lock import OwnedRLock

__all__ = ["LogDirOfflineEvent", "ManagedLogHooks", "OfflineHandler"]

# The manager's one logger: operators configure it by that name.
_log = logging.getLogger("kafkalog.manager.log_manager")


@dataclass(frozen=True)
class LogDirOfflineEvent:
    """What a listener hears when a dir goes offline (the content of KIP-589's AlterReplicaState)."""

    log_dir: str
    directory_id: str | None
    partitions: tuple[TopicPartition, ...]
    cause: BaseException | None


def best_effort_list(path: str) -> list[TopicPartition]:
    """Partitions in a dir that failed before loading, when it can still be listed (for the event)."""
    out = []
    try:
        for name in os.listdir(path):
            try:
                p = parse_partition_dir(name)
            except InvalidPartitionDirError:
                continue
            if p.kind == "":
                out.append((p.topic, p.partition))
    except OSError:
        pass
    return out


class OfflineHandler:
    """Reports I/O failures to the channel and takes the failed dirs offline (see the module docstring)."""

    def __init__(self, registry: LogRegistry, channel: LogDirFailureChannel, checker: SanityChecker,
                 load: Mapping[str, DirLoad], on_no_live_dirs: Callable[[], None]) -> None:
        self._reg = registry
        self.channel = channel
        self._checker = checker
        self._load = load
        self._on_no_live_dirs = on_no_live_dirs
        self.lock = OwnedRLock()
        self.listeners: list[Callable[[LogDirOfflineEvent], None]] = []
        self.events: list[LogDirOfflineEvent] = []
        self.fatal_error: NoLiveLogDirsError | None = None
        #: placement known from outside (``LogManager.expect_partitions``): partition -> dir path or directory.id
        self.expected: dict[TopicPartition, str] = {}

    # --- reporting ----------------------------------------------------------------------------------------------

    def report(self, log_dir: str, cause: BaseException, message: str = "") -> ResourceExhaustedError | None:
        """Hand an I/O failure to the channel's funnel (the only way a dir goes offline). A process limit comes
        back as the typed retriable error, for the caller to raise (or log, for periodic work)."""
        return self.channel.report(log_dir, cause, message)

    def report_or_raise(self, log_dir: str, cause: BaseException, message: str = "") -> None:
        """``report`` for a caller that cannot carry on after a process limit: raise it (the dir stays online)."""
        exhausted = self.report(log_dir, cause, message)
        if exhausted is not None:
            raise exhausted from io_cause(cause)

    def report_and_process(self, log_dir: str, cause: BaseException, message: str = "") -> None:
        """For background work: report, and take the dir offline unless it was a process limit (retried later)."""
        if self.report(log_dir, cause, message) is None:
            self.process_failures()

    def fail(self, d: LogDir, cause: OSError, message: str) -> KafkaStorageError:
        """Report, process, and build the error the caller raises (the typed retriable one for a process limit,
        which leaves the dir online)."""
        exhausted = self.report(d.path, cause, message)
        if exhausted is not None:
            return exhausted
        self.process_failures()
        if self.fatal_error is not None:
            return self.fatal_error
        return KafkaStorageError(f"{message}: log dir {d.path} is offline ({cause})")

    def log_io_error(self, log: Log, cause: OSError, what: str) -> BaseException:
        """An I/O error in a direct call on one of the manager's logs: take its dir offline and say so.

        When this thread is inside the manager's own machinery (it holds a partition lock or the state/offline
        locks), the raw ``cause`` goes back up: that code reports it after releasing its locks, because offline
        handling waits for partition locks and must never run under one.
        """
        d = self._reg.dirs.get(os.path.dirname(os.fspath(log.dir)))
        if d is None or self.holds_manager_locks():
            return cause
        return self.fail(d, cause, f"I/O error on {what} of {log.topic}-{log.partition}")

    def holds_manager_locks(self) -> bool:
        return (
            holds_partition_lock()
            or self._reg.lock.held_by_current_thread()
            or self.lock.held_by_current_thread()
        )

    def checker_io_error(self, key: TopicPartition, cause: OSError) -> None:
        with self._reg.lock:
            e = self._reg.current.get(key) or self._reg.future.get(key)
        if e is not None:
            self.report_and_process(e.dir.path, cause, f"I/O error while sanity-checking {key[0]}-{key[1]}")

    # --- placement known from outside ---------------------------------------------------------------------------

    def expect(self, placement: Mapping[TopicPartition, str]) -> None:
        """Record where replicas live; offline dirs add the expected partitions to those they report."""
        with self._reg.lock:
            for (t, p), where in placement.items():
                where = os.fspath(where)
                self.expected[(str(t), int(p))] = os.path.abspath(where) if os.sep in where else where
            for d in self._reg.dirs.values():
                if not d.online:
                    d.offline_partitions = tuple(sorted(set(d.offline_partitions) | self.expected_in(d)))

    def expected_in(self, d: LogDir) -> set[TopicPartition]:
        """The partitions ``expect`` placed in ``d`` that are not live elsewhere (registry lock held)."""
        out = set()
        for key, where in self.expected.items():
            if key in self._reg.current or where not in (d.path, d.directory_id):
                continue
            out.add(key)
        return out

    # --- taking dirs offline ------------------------------------------------------------------------------------

    def process_failures(self, *, raise_if_none_live: bool = False) -> None:
        """Drain the channel and take each failed dir offline. Serialised: when this returns, every dir reported
        before the call is fully offline, whichever thread did the work."""
        events: list[LogDirOfflineEvent] = []
        with self.lock:
            for path in self.channel.drain():
                ev = self._take_offline(path)
                if ev is not None:
                    events.append(ev)
            no_live = not any(d.online for d in self._reg.dirs.values())
            if no_live and self.fatal_error is None and (events or raise_if_none_live):
                self.fatal_error = NoLiveLogDirsError(
                    f"all log dirs are offline ({', '.join(self._reg.dirs)}): the manager stops (Kafka halts)"
                )
                _log.critical("%s", self.fatal_error)
        for ev in events:
            self._notify(ev)
        if self.fatal_error is not None and no_live:
            self._on_no_live_dirs()
            if raise_if_none_live:
                raise self.fatal_error

    def _take_offline(self, path: str) -> LogDirOfflineEvent | None:
        """Kafka's ``handleLogDirFailure`` for one dir."""
        reg = self._reg
        d = reg.dirs.get(path)
        if d is None or not d.online:
            return None
        ld = self._load.get(path)
        extra = [] if ld is not None and ld.listed else best_effort_list(path)
        with reg.lock:
            lost = [e for e in reg.current.values() if e.dir is d]
            lost_future = [e for e in reg.future.values() if e.dir is d]
            partitions = {e.key for e in lost} | set(extra)
            if ld is not None:
                partitions.update(ld.listed)
            partitions |= self.expected_in(d)
            # Offline partitions are known before they leave the registry: a concurrent caller sees one or the other.
            d.offline_partitions = tuple(sorted(partitions))
            d.offline_cause = self.channel.cause(path)
            d.online = False
            for e in lost:
                del reg.current[e.key]
            for e in lost_future:
                del reg.future[e.key]
            reg.forget_dir_deletions(path)
        for e in [*lost, *lost_future]:
            with e.lock:  # waits for an operation in flight on this partition, then nobody uses it again
                e.closed = True
                e.close_handles()
        self._checker.mark_offline([e.key for e in lost])
        d.release_lock()
        _log.warning("log dir %s (directory.id %s) is offline; partitions %s are offline", path,
                     d.directory_id, list(d.offline_partitions))
        ev = LogDirOfflineEvent(path, d.directory_id, d.offline_partitions, d.offline_cause)
        self.events.append(ev)
        return ev

    def _notify(self, ev: LogDirOfflineEvent) -> None:
        for cb in list(self.listeners):
            try:
                cb(ev)
            except Exception:
                _log.exception("log dir offline listener failed")


class ManagedLogHooks:
    """The ``StorageHooks`` every log of a manager carries: a direct call on a Log handed out by
    ``get_or_create_log``/``get_log`` follows the same rules as the manager's own operations (I/O error = dir
    offline + KafkaStorageError; a read checks KIP-263-pending segments first)."""

    def __init__(self, checker: SanityChecker, offline: OfflineHandler) -> None:
        self._checker = checker
        self._offline = offline

    def before_read(self, log: Log, offset: int) -> None:
        self._checker.ensure_checked((log.topic, log.partition), offset, log=log)

    def on_io_error(self, log: Log, cause: OSError, what: str) -> BaseException:
        return self._offline.log_io_error(log, cause, what)
