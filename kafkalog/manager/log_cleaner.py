"""The LogManager's cleaner (Kafka's ``LogCleaner`` threads + ``LogCleanerManager``): ``log.cleaner.threads``
threads pick the filthiest compacted log of the live dirs, clean it one pass (``kafkalog.cleaner``) and advance the
dir's ``cleaner-offset-checkpoint``; between passes they sleep ``log.cleaner.backoff.ms``.

A pass runs under the partition's lock (appends and reads of that partition wait for it; other partitions do not).
Moves, truncation and deletion abort a pass in progress and pause the partition around themselves. A dir that
goes offline aborts and pauses its partitions' cleaning and its checkpoint is no longer written. An I/O error in a
pass takes only its dir offline through the failure funnel (a process limit leaves it online and the pass is
retried later); any other error marks the partition uncleanable, as Kafka does, and the thread goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from kafkalog.cleaner.checkpoint import read_cleaner_checkpoint, update_cleaner_checkpoint
from kafkalog.cleaner.cleaner import Cleaner
from kafkalog.cleaner.config import CleanerConfig
from kafkalog.cleaner.dirty_range import log_to_clean
from kafkalog.cleaner.run import CleanReport, clean_partition
from kafkalog.cleaner.throttle import Throttler
from kafkalog.errors import LogCleaningAbortedError, io_cause
from kafkalog.manager.cleaning_state import CleaningStates
from kafkalog.manager.registry import LogEntry, LogRegistry
from kafkalog.names import TopicPartition

__all__ = ["LogCleanerService"]

_log = logging.getLogger(__name__)


class LogCleanerService:
    """Cleaner threads over a registry (see the module docstring)."""

    def __init__(self, registry: LogRegistry, config: CleanerConfig, *, clock: Callable[[], int],
                 report_and_process: Callable[[str, BaseException, str], None]) -> None:
        self._reg = registry
        self.config = config
        self._clock = clock
        self._report_and_process = report_and_process
        self.states = CleaningStates()
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self._checkpoint_lock = threading.Lock()
        self._failed_dirs: set[str] = set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._throttle = Throttler(config.max_io_bytes_per_second, sleep=self._stop.wait)
        self.dirtiest_ratio = 0.0
        self.last_run_ms = clock()
        self.passes: list[CleanReport] = []  # the reports of the last passes (newest last, a few kept)
        self.dead_threads = 0

    # --- threads ------------------------------------------------------------------------------------------------

    def startup(self) -> None:
        if not self.config.enable or self._threads:
            return
        for i in range(self.config.threads):
            cleaner = Cleaner(self.config, throttle=self._throttle)
            t = threading.Thread(target=self._run, args=(cleaner,), name=f"kafka-log-cleaner-thread-{i}",
                                 daemon=True)
            self._threads.append(t)
            t.start()

    def shutdown(self, timeout: float | None = 30.0) -> None:
        self._stop.set()  # a pass in progress stops at its next check
        self._wake.set()
        for t in self._threads:
            t.join(timeout)
        self._threads.clear()

    def wake(self) -> None:
        """Run the next pass now instead of after the backoff (tests, an operator's nudge)."""
        self._wake.set()

    def _run(self, cleaner: Cleaner) -> None:
        try:
            while not self._stop.is_set():
                cleaned = self.clean_filthiest(cleaner)
                self.delete_old_segments()
                if not cleaned:
                    self._wake.wait(self.config.backoff_ms / 1000.0)
                    self._wake.clear()
        except BaseException:  # pragma: no cover - a bug: Kafka counts it as a dead thread
            self.dead_threads += 1
            _log.exception("log cleaner thread died")

    # --- one pass -------------------------------------------------------------------------------------------------

    def clean_filthiest(self, cleaner: Cleaner | None = None) -> bool:
        """Pick the filthiest cleanable log and clean it once; False when none qualifies."""
        cleaner = cleaner or Cleaner(self.config, throttle=self._throttle)
        entry, checkpointed = self._grab()
        if entry is None:
            return False
        key = entry.key
        try:
            self._clean(cleaner, entry, checkpointed)
        finally:
            self.states.done(key)
        return True

    def delete_old_segments(self) -> int:
        """Kafka's cleaner loop ends each round with ``deleteOldSegments`` on the compacted logs it is not cleaning:
        segments below a log start offset moved by a deletion of records go (``compact,delete`` logs also get
        retention from the manager's housekeeping). Returns the segments deleted."""
        with self._reg.lock:
            entries = [e for e in self._reg.current.values() if e.dir.online and e.log.config.compact]
        deleted = 0
        for e in entries:
            if not self.states.start(e.key):
                continue
            failure: BaseException | None = None
            try:
                with e.lock:
                    if not e.closed and e.dir.online:
                        deleted += e.log.delete_old_segments()
            except BaseException as exc:  # reported after the partition lock is released
                failure = exc
            finally:
                self.states.done(e.key)
            if failure is not None:
                self._handle_failure(e, failure)
        return deleted

    def _grab(self) -> tuple[LogEntry | None, int | None]:
        """Kafka's ``grabFilthiestCompactedLog``: the compacted current log of a live dir with the highest dirty
        ratio among those past ``min.cleanable.dirty.ratio`` (or forced by ``max.compaction.lag.ms``)."""
        now = self._clock()
        self.last_run_ms = now
        with self._reg.lock:
            futures = set(self._reg.future)
            entries = [e for e in self._reg.current.values() if e.dir.online and not e.closed]
        busy = self.states.busy()
        checkpoints = self.all_checkpoints()
        best: tuple[float, LogEntry, int | None] | None = None
        ratios = []
        for e in entries:
            log = e.log
            if not log.config.compact or e.key in busy or e.key in futures or self._is_uncleanable(e):
                continue
            try:
                ltc = log_to_clean(log, checkpoints.get(e.key), now)
            except Exception as exc:  # noqa: BLE001 - a log the manager cannot even measure
                self._handle_failure(e, exc)
                continue
            if ltc.total_bytes <= 0:
                continue
            ratios.append(ltc.cleanable_ratio)
            if ltc.should_clean(log.config.min_cleanable_dirty_ratio) and (
                    best is None or ltc.cleanable_ratio > best[0]):
                best = (ltc.cleanable_ratio, e, checkpoints.get(e.key))
        self.dirtiest_ratio = max(ratios, default=0.0)
        if best is None or not self.states.start(best[1].key):
            return None, None
        return best[1], best[2]

    def _clean(self, cleaner: Cleaner, e: LogEntry, checkpointed: int | None) -> None:
        key = e.key

        def check_done() -> None:
            if self._stop.is_set() or self.states.should_stop(key) or not e.dir.online or e.closed:
                raise LogCleaningAbortedError(f"cleaning of {key[0]}-{key[1]} aborted")

        cleaner.set_check_done(check_done)
        failure: BaseException | None = None
        report = None
        with e.lock:
            if e.closed or not e.dir.online:
                return
            try:
                report = clean_partition(e.log, checkpointed=checkpointed, now_ms=self._clock(), cleaner=cleaner)
            except LogCleaningAbortedError:
                _log.info("cleaning of %s-%d aborted", *key)
                return
            except BaseException as exc:  # reported after the partition lock is released
                failure = exc
        if failure is not None:
            self._handle_failure(e, failure)
            return
        assert report is not None
        if report.checkpoint_offset is not None:
            self.update_checkpoint(e.dir.path, {key: report.checkpoint_offset})
        self.passes = [*self.passes[-9:], report]

    def _handle_failure(self, e: LogEntry, exc: BaseException) -> None:
        cause = io_cause(exc)
        if cause is not None:
            # the one funnel: the dir goes offline, unless a process limit (then the pass is retried later)
            self._report_and_process(e.dir.path, cause, f"I/O error while cleaning {e.key[0]}-{e.key[1]}")
            return
        _log.error("cleaning %s-%d failed; marking it uncleanable: %s", *e.key, exc)
        with self.states.lock:
            self._uncleanable.setdefault(e.dir.path, set()).add(e.key)

    def _is_uncleanable(self, e: LogEntry) -> bool:
        with self.states.lock:
            return e.key in self._uncleanable.get(e.dir.path, ())

    # --- checkpoints ------------------------------------------------------------------------------------------

    def all_checkpoints(self) -> dict[TopicPartition, int]:
        """Every live dir's ``cleaner-offset-checkpoint`` (an unreadable one counts as empty, as in Kafka)."""
        out: dict[TopicPartition, int] = {}
        for d in self._reg.dirs.values():
            if not d.online or d.path in self._failed_dirs:
                continue
            try:
                out.update(read_cleaner_checkpoint(d.path))
            except Exception:  # noqa: BLE001 - Kafka logs and skips a checkpoint it cannot read
                _log.warning("cannot read the cleaner checkpoint of %s", d.path, exc_info=True)
        return out

    def update_checkpoint(self, log_dir: str, updates: Mapping[TopicPartition, int], *,
                          remove: tuple[TopicPartition, ...] = ()) -> None:
        """Kafka's ``updateCheckpoints``: entries of the dir's current partitions, minus ``remove``, plus
        ``updates``, written atomically; an I/O error goes to the funnel."""
        if log_dir in self._failed_dirs:
            return
        with self._reg.lock:
            keep = {e.key for e in self._reg.current.values() if e.dir.path == log_dir}
        try:
            with self._checkpoint_lock:
                update_cleaner_checkpoint(log_dir, updates, keep=keep, remove=remove)
        except OSError as exc:
            self._report_and_process(log_dir, exc, "disk error while writing the cleaner checkpoint")

    def truncate_checkpoint(self, log_dir: str, key: TopicPartition, offset: int) -> None:
        """Kafka's ``maybeTruncateCheckpoint``: a log truncated below its checkpointed offset restarts there."""
        if log_dir in self._failed_dirs:
            return
        current = self.all_checkpoints().get(key)
        if current is not None and current > offset:
            self.update_checkpoint(log_dir, {key: offset})

    # --- pauses around other operations ------------------------------------------------------------------------

    def abort_and_pause(self, key: TopicPartition) -> None:
        self.states.abort_and_pause(key, wait=True)

    def resume(self, key: TopicPartition) -> None:
        self.states.resume(key)

    @contextmanager
    def paused(self, key: TopicPartition) -> Iterator[None]:
        """Cleaning of ``key`` aborted (waiting for a pass in progress to stop) and paused for the block."""
        self.abort_and_pause(key)
        try:
            yield
        finally:
            self.resume(key)

    def truncated(self, e: LogEntry) -> None:
        """After a truncation: a checkpoint past the new log end comes back to it."""
        self.truncate_checkpoint(e.dir.path, e.key, e.log.log_end_offset)

    def partition_deleted(self, log_dir: str, key: TopicPartition) -> None:
        """After a deletion: forget the partition and drop it from its dir's checkpoint."""
        self.states.forget(key)
        with self.states.lock:
            self._uncleanable.get(log_dir, set()).discard(key)
        self.update_checkpoint(log_dir, {}, remove=(key,))

    def dir_failed(self, log_dir: str, partitions: tuple[TopicPartition, ...]) -> None:
        """KIP-18/112: abort and pause cleaning of the failed dir's partitions; its checkpoint is no longer
        read or written (the dir is gone), so its partitions drop out of the cleaner's checkpoints."""
        self._failed_dirs.add(log_dir)
        for key in partitions:
            self.states.abort_and_pause(key, wait=False)
        with self.states.lock:
            self._uncleanable.pop(log_dir, None)

    # --- metrics ------------------------------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """Kafka's cleaner gauges (``max-dirty-percent``, ``time-since-last-run-ms``, ``cleaner-recopy-percent``,
        ``max-buffer-utilization-percent``, ``DeadThreadCount``, ``uncleanable-partitions-count`` per dir)."""
        last = self.passes[-1] if self.passes else None
        recopy = 0
        utilization = 0
        if last is not None and last.result is not None and last.result.stats.bytes_read:
            stats = last.result.stats
            recopy = int(100 * stats.bytes_written / stats.bytes_read)
            utilization = int(100 * stats.buffer_utilization)
        with self.states.lock:
            uncleanable = {d: len(s) for d, s in self._uncleanable.items()}
        return {
            "max-dirty-percent": int(100 * self.dirtiest_ratio),
            "time-since-last-run-ms": max(0, self._clock() - self.last_run_ms),
            "cleaner-recopy-percent": recopy,
            "max-buffer-utilization-percent": utilization,
            "DeadThreadCount": self.dead_threads + sum(1 for t in self._threads if not t.is_alive()),
            "uncleanable-partitions-count": uncleanable,
        }


