"""``LogManager``: several ``log.dirs`` owned the way a Kafka broker's LogManager owns them.

Startup locks each dir, agrees on ``meta.properties`` and loads every partition dir (``loading.py``, Kafka's
``loadLogs``). At run time it places new partitions, runs housekeeping (``housekeeping.py``: checkpoints, flush,
retention, async deletion) and survives the loss of a disk: any ``OSError`` on a dir goes through the
:class:`LogDirFailureChannel`, and ``offline.py`` takes the dir offline exactly once (its partitions leave the
registry, its handles are closed without flushing, its lock released, listeners told) while the other dirs keep
serving (KIP-112). Each dir has its KIP-858 ``directory.id``. Replica moves between dirs (KIP-113) are
``replica_mover.py``'s, over the same :class:`LogRegistry`.

Threading: the registry's lock guards the maps; each partition has its own lock for operations going through the
manager (``partition_calls.py``); offline handling is serialised by its own lock and never runs while the caller
holds a partition lock.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kafkalog.checkpoint.clean_shutdown import CleanShutdownFile
from kafkalog.checkpoint.offset_checkpoint import write_offset_checkpoint
from kafkalog.cleaner.config import CleanerConfig
from kafkalog.errors import InconsistentMetadataError, KafkaStorageError, NoLiveLogDirsError, io_cause
from kafkalog.io.cpu_gate import CpuGate
from kafkalog.io.handle_cache import HandleCache, default_cache
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log, LogAppendInfo
from kafkalog.manager.assignments import AssignmentMismatch, compare_assignments, dir_states_of
from kafkalog.manager.broker_config import BrokerConfig
from kafkalog.manager.failure_channel import LogDirFailureChannel
from kafkalog.manager.housekeeping import Housekeeping
from kafkalog.manager.loading import DirLoad, DirLoader, LoadProgress
from kafkalog.manager.log_cleaner import LogCleanerService
from kafkalog.manager.log_dir import LogDir, normalize_dirs
from kafkalog.manager.mover_host import ManagerMoverHost
from kafkalog.manager.offline import LogDirOfflineEvent, ManagedLogHooks, OfflineHandler
from kafkalog.manager.partition_calls import PartitionCalls
from kafkalog.manager.placement import next_log_dirs
from kafkalog.manager.registry import LogEntry, LogRegistry
from kafkalog.manager.replica_mover import MoveProgress, ReplicaMover, resolve_future_logs
from kafkalog.manager.sanity_checker import PartitionCheckState, SanityChecker, SanityCheckRun
from kafkalog.manager.scheduler import Scheduler
from kafkalog.names import TopicPartition, delete_dir_name, partition_dir_name, validate_topic
from kafkalog.records import RecordBatch

__all__ = ["BrokerConfig", "LoadProgress", "LogDirOfflineEvent", "LogManager"]

_log = logging.getLogger(__name__)


class LogManager:
    """Owns several log dirs: loading, placement, housekeeping and offline handling (see module docstring)."""

    def __init__(
        self,
        log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        *,
        log_config: LogConfig | None = None,
        properties: Mapping[str, Any] | None = None,
        clock: Callable[[], int] | None = None,
        topic_configs: Mapping[str, LogConfig | Mapping[str, Any]] | None = None,
        progress: Callable[[LoadProgress], None] | None = None,
    ) -> None:
        self._dir_paths = normalize_dirs(log_dirs)
        self.config = BrokerConfig.from_properties(properties)
        self.log_config = log_config if log_config is not None else LogConfig()
        self._topic_configs: dict[str, LogConfig] = {}
        for topic, cfg in (topic_configs or {}).items():
            self._topic_configs[topic] = (
                cfg if isinstance(cfg, LogConfig) else LogConfig.from_properties(cfg, defaults=self.log_config)
            )
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)

        self._registry = LogRegistry({p: LogDir(p) for p in self._dir_paths}, self._clock)
        self._dirs = self._registry.dirs
        self._create_lock = threading.Lock()
        self.failure_channel = LogDirFailureChannel()

        self._checker = SanityChecker(recover=self._recover_segments, on_io_error=self._checker_io_error)
        self._recovery_gate = CpuGate(self.config.recovery_concurrency)
        self._scheduler = Scheduler(threads=self.config.background_threads, name="kafkalog-log-manager")
        self._started = False
        self._stopped = False
        self._mover: ReplicaMover | None = None  # created on first use (KIP-113)
        #: every segment descriptor and index mapping of every log of this manager (kafkalog.max.open.files)
        # Without the property the process-wide cache serves: its default is a share of the process's one
        # RLIMIT_NOFILE, so every manager (and every Log opened alone) drawing on it keeps that one bound.
        n = self.config.max_open_files
        self.handle_cache = default_cache() if n is None else HandleCache(n)
        load: dict[str, DirLoad] = {}  # what each dir's startup found: the loader fills it, offline dirs report it
        self._offline = OfflineHandler(self._registry, self.failure_channel, self._checker, load,
                                       on_no_live_dirs=self._halt)
        self._loader = DirLoader(
            self._registry, self.config, load, checker=self._checker, recovery_gate=self._recovery_gate,
            open_log=self._open_log, adopt_log=self.adopt_log, report_or_raise=self._offline.report_or_raise,
            process_failures=self._offline.process_failures, has_offline_dir=self.failure_channel.has_offline_dir,
            clock=self._clock, progress=progress,
        )
        self.events: list[LogDirOfflineEvent] = self._offline.events
        self._calls = PartitionCalls(self._registry, ensure_running=self._ensure_running, fail=self._offline.fail)
        self._housekeeping = Housekeeping(
            self._registry, self.config, self._scheduler, self._calls, config_for=self.config_for,
            write_checkpoint=self._write_checkpoint, report_and_process=self._offline.report_and_process,
            clock=self._clock, stopped=lambda: self._stopped,
        )
        self._log_hooks = ManagedLogHooks(self._checker, self._offline)
        self._cleaner = LogCleanerService(self._registry, CleanerConfig.from_properties(properties), clock=self._clock,
                                          report_and_process=self._offline.report_and_process)
        self._offline.listeners.append(lambda ev: self._cleaner.dir_failed(ev.log_dir, ev.partitions))

    @property
    def fatal_error(self) -> NoLiveLogDirsError | None:
        """Set when no dir is left: every later operation raises it (Kafka halts)."""
        return self._offline.fatal_error

    # --- context manager ---------------------------------------------------------------------------------------

    def __enter__(self) -> LogManager:
        self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- listeners, queries ------------------------------------------------------------------------------------

    def add_listener(self, callback: Callable[[LogDirOfflineEvent], None]) -> None:
        """``callback(event)`` is called once per dir going offline (also for dirs failing during startup)."""
        self._offline.listeners.append(callback)

    @property
    def log_dirs(self) -> list[str]:
        """Every configured log dir, online or not, in the order given."""
        return list(self._dir_paths)

    @property
    def live_log_dirs(self) -> list[str]:
        """The log dirs still online (KIP-112: an I/O error takes one dir offline, not the manager)."""
        return [p for p, d in self._dirs.items() if d.online]

    @property
    def offline_log_dirs(self) -> list[str]:
        """The log dirs taken offline by an I/O error since startup."""
        return [p for p, d in self._dirs.items() if not d.online]

    @property
    def is_running(self) -> bool:
        """True between ``startup()`` and ``shutdown()``."""
        return self._started and not self._stopped

    def directory_id(self, log_dir: str | os.PathLike[str]) -> str | None:
        """The dir's KIP-858 ``directory.id`` (None for a dir that failed before its meta.properties was read)."""
        return self._registry.dir(log_dir).directory_id

    def expect_partitions(self, placement: Mapping[TopicPartition, str]) -> None:
        """Tell the manager where replicas live, ``{(topic, partition): log dir path or directory.id}``, as the
        cluster metadata tells Kafka's broker. A dir that fails before it can be listed (at startup, say) then
        still reports the partitions it held: in its offline event, ``offline_partitions()`` and
        ``OfflineReplicaCount``. Partitions live in another dir are not counted offline."""
        self._offline.expect(placement)

    def offline_partitions(self) -> dict[str, tuple[TopicPartition, ...]]:
        """Per offline dir, the partitions it held."""
        return {p: d.offline_partitions for p, d in self._dirs.items() if not d.online}

    def stray_logs(self) -> list[str]:
        """``-stray`` partition dirs found at startup (left untouched)."""
        return [s for d in self._dirs.values() for s in d.stray_dirs]

    def get_log(self, topic: str, partition: int, *, is_future: bool = False) -> Log | None:
        """The open log of a partition (its ``-future`` replica with ``is_future``), None when absent."""
        e = self._registry.get((topic, partition), is_future=is_future)
        return None if e is None else e.log

    def all_logs(self) -> list[Log]:
        """Every live current and future log."""
        return [e.log for e in self._registry.entries()]

    def logs_in_dir(self, log_dir: str | os.PathLike[str]) -> dict[TopicPartition, Log]:
        """The current logs placed in ``log_dir``, by (topic, partition)."""
        d = self._registry.dir(log_dir)
        with self._registry.lock:
            return {e.key: e.log for e in self._registry.current.values() if e.dir is d}

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The log dir holding the partition's current log, None when absent."""
        e = self._registry.get((topic, partition))
        return None if e is None else e.dir.path

    def assignments(self) -> dict[TopicPartition, str | None]:
        """KIP-858: ``{(topic, partition): directory_id}`` for every live current log."""
        with self._registry.lock:
            return {k: e.dir.directory_id for k, e in self._registry.current.items()}

    def metrics(self) -> dict[str, Any]:
        """Kafka's LogManager/ReplicaManager gauges. ``LogDirectoryOffline`` is a dict ``{dir: 0 | 1}`` (Kafka's
        per-dir gauge tagged ``logDirectory``); ``RemainingLogsToRecover`` / ``RemainingSegmentsToRecover`` are
        per dir too."""
        offline = [d for d in self._dirs.values() if not d.online]
        with self._registry.lock:
            online_count = len(self._registry.current)
        load = self._loader.load
        return {
            "OfflineLogDirectoryCount": len(offline),
            "OfflineReplicaCount": sum(len(d.offline_partitions) for d in offline),
            "LogDirectoryOffline": {p: 0 if d.online else 1 for p, d in self._dirs.items()},
            "LiveLogDirectoryCount": len(self._dirs) - len(offline),
            "PartitionCount": online_count,
            "FutureLogCount": len(self._registry.future),
            "RemainingLogsToRecover": {p: ld.partitions_remaining for p, ld in load.items()},
            "RemainingSegmentsToRecover": {p: ld.segments_remaining for p, ld in load.items()},
            "LogCleaner": self._cleaner.metrics(),
        }

    # --- KIP-263 -------------------------------------------------------------------------------------------------
    def start_sanity_checker(self, partitions: Iterable[TopicPartition] | None = None) -> SanityCheckRun:
        """Check the pending (not yet sanity-checked) segments of ``partitions`` (default: all) in background."""
        self._ensure_running()
        return self._checker.start(partitions)

    def sanity_check_state(self, topic: str, partition: int) -> PartitionCheckState | None:
        """Where the partition's lazy KIP-263 index sanity check stands, None when not tracked."""
        return self._checker.state((topic, partition))

    def sanity_check_states(self) -> dict[TopicPartition, PartitionCheckState]:
        """The lazy index sanity check's state of every tracked partition."""
        return self._checker.states()

    # --- startup -------------------------------------------------------------------------------------------------

    def startup(self) -> None:
        """Create/validate, lock and load every dir; a dir failing with an OSError goes offline, others load.

        Raises LogDirLockedError (a dir is in use), InconsistentMetadataError (dirs of different clusters or
        nodes, or a partition in two dirs), NoLiveLogDirsError (nothing could be loaded); on any of these every
        lock taken so far is released.
        """
        if self._started:
            return
        self._started = True
        try:
            self._startup()
        except BaseException:
            self._abort_startup()
            raise
        self._housekeeping.schedule()
        self._cleaner.startup()

    def _startup(self) -> None:
        self._loader.open_dirs(cluster_id=self.config.cluster_id, node_id=self.config.node_id)
        self._loader.load_logs()
        self._offline.process_failures(raise_if_none_live=True)
        resolve_future_logs(self._replica_mover())  # a move that crashed between its two renames (KIP-113)
        self._offline.process_failures(raise_if_none_live=True)

    def _abort_startup(self) -> None:
        reg = self._registry
        with reg.lock:
            entries = [*reg.current.values(), *reg.future.values()]
            reg.current.clear()
            reg.future.clear()
        self._loader.close_after_abort(entries)
        for d in self._dirs.values():
            d.release_lock()
        self._stopped = True

    def _open_log(self, path: str, key: TopicPartition, d: LogDir, *, clean: bool, recovery_point: int | None,
                  log_start_offset: int | None, topic_id: str | None = None) -> Log:
        """Open a partition dir found at startup (``d`` is its log dir)."""
        kwargs: dict[str, Any] = dict(recovery_point=recovery_point, log_start_offset=log_start_offset,
                                      clean_shutdown=clean, clock=self._clock, handle_cache=self.handle_cache)
        if topic_id is not None:
            kwargs["topic_id"] = topic_id
        return Log.open(path, self.config_for(key[0]), **kwargs)

    def config_for(self, topic: str) -> LogConfig:
        """The topic's config override, else the manager's default ``log_config``."""
        return self._topic_configs.get(topic, self.log_config)

    # --- failure handling (offline.py) ---------------------------------------------------------------------------

    def _checker_io_error(self, key: TopicPartition, cause: OSError) -> None:
        self._offline.checker_io_error(key, cause)

    def _halt(self) -> None:
        """No live dir left: stop background work; every later operation raises the fatal error."""
        self._checker.stop(timeout=5)
        self._cleaner.shutdown(timeout=5)
        if self._mover is not None:
            self._mover.stop_all(timeout=5)
        self._scheduler.shutdown(timeout=5)
        for d in self._dirs.values():
            d.release_lock()
        self._stopped = True

    def adopt_log(self, log: Log) -> Log:
        """Give a Log this manager owns the manager's storage hooks (every Log the manager hands out has them)."""
        log.attach_storage_hooks(self._log_hooks)
        return log

    def _ensure_running(self) -> None:
        if self.fatal_error is not None:
            raise self.fatal_error
        if not self._started or self._stopped:
            raise KafkaStorageError("the log manager is not running (call startup() or use it as a context manager)")

    # --- operations through the manager (partition_calls.py) ------------------------------------------------------

    def append(self, topic: str, partition: int, records: Any, **kwargs: Any) -> LogAppendInfo:
        """``Log.append_as_leader`` through the manager (I/O errors take the dir offline)."""
        return self._calls.call(topic, partition, "append", lambda log: log.append_as_leader(records, **kwargs))

    def append_as_follower(self, topic: str, partition: int, batch_bytes: bytes) -> LogAppendInfo:
        """Append batches a leader wrote (offsets kept); an I/O error takes that log dir offline."""
        return self._calls.call(topic, partition, "append", lambda log: log.append_as_follower(batch_bytes))

    def read(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20,
             **kwargs: Any) -> list[RecordBatch]:
        """``Log.read``; a segment not yet sanity-checked (KIP-263 lazy mode) is checked first."""

        def check(e: LogEntry) -> None:
            self._checker.ensure_checked(e.key, offset)

        return self._calls.call(topic, partition, "read", lambda log: log.read(offset, max_bytes, **kwargs),
                                before=check)

    def roll(self, topic: str, partition: int) -> Any:
        """Start a new active segment for the partition; an I/O error takes that log dir offline."""
        return self._calls.call(topic, partition, "roll", lambda log: log.roll())

    def flush(self, topic: str, partition: int) -> None:
        """fsync the partition's unflushed data; an I/O error takes that log dir offline."""
        def do(log: Log) -> None:
            log.flush()

        self._calls.call(topic, partition, "flush", do)
        e = self._calls.entry(topic, partition)
        e.last_flush_ms = self._clock()

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """``Log.truncate_to``, cleaning paused around it (Kafka's ``truncateTo``)."""
        with self._cleaner.paused((topic, partition)):
            truncated = self._calls.call(topic, partition, "truncate", lambda log: log.truncate_to(offset))
            if truncated:
                self._cleaner.truncated(self._calls.entry(topic, partition))
            return truncated

    def delete_old_segments(self, topic: str, partition: int) -> int:
        """Apply retention to the partition now; returns the number of segments deleted."""
        return self._calls.call(topic, partition, "retention", lambda log: log.delete_old_segments())

    # --- creation and deletion -----------------------------------------------------------------------------------

    def get_or_create_log(self, topic: str, partition: int, *, topic_id: str | None = None,
                          config: LogConfig | None = None, is_new: bool = True) -> Log:
        """The partition's log, created in Kafka's next log dir if it exists nowhere.

        KIP-112: a partition found on no live dir is created only when ``is_new`` or when no dir is offline;
        otherwise the replica may live on the failed disk and KafkaStorageError is raised instead of silently
        starting it empty.
        """
        validate_topic(topic)
        partition_dir_name(topic, partition)  # validates the partition number
        self._ensure_running()
        key = (topic, partition)
        reg = self._registry
        with self._create_lock:
            e = reg.get(key)
            if e is not None:
                existing = getattr(e.log, "topic_id", None)
                if topic_id is not None and existing is not None and existing != topic_id:
                    raise InconsistentMetadataError(
                        f"{topic}-{partition} has topic id {existing}, not {topic_id}"
                    )
                return e.log
            offline = self.offline_log_dirs
            if not is_new and offline:
                raise KafkaStorageError(
                    f"can not create log for {topic}-{partition} because log directories {', '.join(offline)} "
                    "are offline (it is not new and may live there)"
                )
            if config is not None:
                with reg.lock:
                    self._topic_configs.setdefault(topic, config)
            tried = []
            parents = [x.dir.path for x in reg.entries()]
            for path in next_log_dirs(self.live_log_dirs, parents):
                d = self._dirs[path]
                if not d.online:
                    continue
                tried.append(path)
                log_path = os.path.join(path, partition_dir_name(topic, partition))
                try:
                    os.makedirs(log_path, exist_ok=True)
                    log = self._open_new_log(log_path, key, config, topic_id)
                except BaseException as exc:
                    cause = io_cause(exc)
                    if cause is None:
                        raise
                    self._offline.report_or_raise(path, cause, f"error creating log for {topic}-{partition}")
                    self._offline.process_failures()
                    if self.fatal_error is not None:
                        raise self.fatal_error from cause
                    continue
                self.adopt_log(log)
                entry = LogEntry(key, log, d, last_flush_ms=self._clock())
                self._checker.register_new(key, log, entry.lock)
                with reg.lock:
                    reg.current[key] = entry
                _log.info("created log for %s-%d in %s", topic, partition, path)
                return log
            raise KafkaStorageError(f"no log directories available for {topic}-{partition}; tried {tried}")

    def _open_new_log(self, path: str, key: TopicPartition, config: LogConfig | None, topic_id: str | None) -> Log:
        kwargs: dict[str, Any] = dict(clock=self._clock, handle_cache=self.handle_cache)
        if topic_id is not None:
            kwargs["topic_id"] = topic_id
        return Log.open(path, config if config is not None else self.config_for(key[0]), **kwargs)

    def delete_log(self, topic: str, partition: int) -> None:
        """Kafka's ``asyncDelete``: close the log, rename its dir ``-delete`` and remove it after
        ``file.delete.delay.ms``; the dir's checkpoints are rewritten without it."""
        e = self._calls.entry(topic, partition)
        self._cleaner.abort_and_pause(e.key)
        failure: OSError | None = None
        with e.lock:
            try:
                e.log.close()
                target = os.path.join(e.dir.path, delete_dir_name(topic, partition))
                os.rename(os.path.join(e.dir.path, partition_dir_name(topic, partition)), target)
            except OSError as exc:
                failure = exc
            else:
                e.closed = True
                with self._registry.lock:
                    self._registry.current.pop(e.key, None)
                    self._registry.queue_delete(e.dir.path, target)
                self._checker.forget(e.key)
        if failure is not None:
            self._cleaner.resume(e.key)
            raise self._offline.fail(e.dir, failure, f"I/O error deleting {topic}-{partition}") from failure
        self._cleaner.partition_deleted(e.dir.path, e.key)
        self.checkpoint_recovery_offsets([e.dir.path])
        self.checkpoint_log_start_offsets([e.dir.path])

    # --- JBOD: KIP-113 moves and KIP-858 assignments (replica_mover.py, assignments.py) ---------------------------

    def _mover_host(self) -> ManagerMoverHost:
        """The parts of this manager a replica move uses, handed over so the mover's host never imports it."""
        return ManagerMoverHost(
            is_stopped=lambda: self._stopped, ensure_running=self._ensure_running, calls=self._calls,
            config_for=self.config_for, now=self._clock, adopt_log=self.adopt_log, handle_cache=self.handle_cache,
            offline=self._offline, checkpoint_recovery_offsets=self.checkpoint_recovery_offsets,
            checkpoint_log_start_offsets=self.checkpoint_log_start_offsets, checker=self._checker)

    def _replica_mover(self) -> ReplicaMover:
        if self._mover is None:
            with self._registry.lock:
                if self._mover is None:
                    self._mover = ReplicaMover(self._registry, self._mover_host())
        return self._mover

    def alter_replica_log_dir(self, topic: str, partition: int, target_dir: str, *,
                              wait: bool = False) -> MoveProgress:
        """KIP-113: move the replica to ``target_dir`` through a ``-future`` log, in background (``wait=True``
        blocks until it ends). Returns the move's ``MoveProgress``; a future already in ``target_dir`` resumes."""
        with self._cleaner.paused((topic, partition)):  # then left alone while it has a future log
            progress = self._replica_mover().start(topic, partition, target_dir)
        return self._replica_mover().wait(topic, partition) if wait else progress

    def move_progress(self, topic: str, partition: int) -> dict[str, Any] | None:
        """``{bytes_copied, lag_offsets, state, step, pause_ms, ...}`` of the partition's last move, or None."""
        p = self._replica_mover().progress(topic, partition)
        return None if p is None else p.as_dict()

    def abort_replica_move(self, topic: str, partition: int) -> None:
        """Stop the partition's move and drop its future log (renamed ``-delete``, removed asynchronously)."""
        self._replica_mover().abort(topic, partition)

    def recover_abandoned_future_logs(self, expected: Mapping[TopicPartition, str]) -> list[TopicPartition]:
        """Kafka's rule: promote each future log whose dir is the one ``expected`` (metadata) assigns."""
        self._ensure_running()
        return self._replica_mover().recover_abandoned_future_logs(expected)

    def check_assignments(self, expected: Mapping[TopicPartition, str]) -> list[AssignmentMismatch]:
        """KIP-858: every difference between the replicas here and ``expected`` ({(topic, partition): dir id}) as
        ``AssignmentMismatch`` (kind, topic, partition, expected_dir_id, actual_dir_id, detail); empty = agrees."""
        return compare_assignments(dir_states_of(self._registry, self.offline_partitions()), expected)

    # --- housekeeping (housekeeping.py; run by the scheduler, public so callers can run them on demand) ----------

    def _write_checkpoint(self, path: str, name: str, offsets: dict[TopicPartition, int]) -> bool:
        """Write one offset checkpoint of a dir; an I/O error goes to the funnel (the dir's ``mutex`` orders the
        writers of its checkpoint files)."""
        d = self._dirs[path]
        if not d.online:
            return False
        try:
            with d.mutex:
                write_offset_checkpoint(os.path.join(path, name), offsets)
        except OSError as e:
            self._offline.report_and_process(path, e, f"disk error while writing {name}")
            return False
        return True

    def checkpoint_recovery_offsets(self, dirs: Iterable[str] | None = None) -> None:
        """Write ``recovery-point-offset-checkpoint`` for each live dir (current and future logs)."""
        self._housekeeping.checkpoint_recovery_offsets(dirs)

    def checkpoint_log_start_offsets(self, dirs: Iterable[str] | None = None) -> None:
        """Write ``log-start-offset-checkpoint``: only logs whose start offset is past their first segment's base
        offset (Kafka's filter: the others would restart at the segment base anyway)."""
        self._housekeeping.checkpoint_log_start_offsets(dirs)

    def flush_dirty_logs(self) -> None:
        """Flush logs whose ``flush.ms`` elapsed since their last flush (Kafka's ``flushDirtyLogs``)."""
        self._housekeeping.flush_dirty_logs()

    def cleanup_logs(self) -> None:
        """Retention for every non-compacted current log (Kafka's ``cleanupLogs``)."""
        self._housekeeping.cleanup_logs()

    def delete_logs(self) -> int:
        """Remove ``-delete`` partition dirs whose ``file.delete.delay.ms`` has passed; returns how many."""
        return self._housekeeping.delete_logs()

    @property
    def pending_deletions(self) -> list[str]:
        """Partition dirs renamed ``-delete`` that wait for ``file.delete.delay.ms``."""
        return [t[1] for t in self._registry.pending_deletions()]

    @property
    def cleaner(self) -> LogCleanerService:
        """The log cleaner (``log_cleaner.py``): states, checkpoints, metrics, ``clean_filthiest()``."""
        return self._cleaner

    # --- KIP-263 recovery ----------------------------------------------------------------------------------------

    def _recover_segments(self, key: TopicPartition, log: Log, bases: list[int]) -> int:
        """Rebuild the corrupt segments ``bases`` of one partition (caller holds the partition lock), with the
        log's own per-segment recovery (producer state replayed, so ``.txnindex`` is rebuilt right)."""
        return int(log.recover_segments(bases))

    # --- shutdown ------------------------------------------------------------------------------------------------

    def shutdown(self, *, broker_epoch: int = -1) -> None:
        """Flush and close every log, write checkpoints and (for dirs that loaded fully and are online) the
        clean-shutdown marker, release every lock. Idempotent."""
        if not self._started or (self._stopped and self.fatal_error is None):
            self._stopped = True
            return
        self._stopped = True
        self._checker.stop()
        self._cleaner.shutdown()
        if self._mover is not None:
            self._mover.stop_all()
        self._scheduler.shutdown()
        by_dir = self._housekeeping.entries_by_dir(None)
        with ThreadPoolExecutor(max_workers=max(1, len(by_dir))) as pool:
            list(pool.map(lambda item: self._shutdown_dir(item[0], item[1], broker_epoch), by_dir.items()))
        self._offline.process_failures()
        with self._registry.lock:
            self._registry.current.clear()
            self._registry.future.clear()
        for d in self._dirs.values():
            d.release_lock()

    def _shutdown_dir(self, path: str, entries: list[LogEntry], broker_epoch: int) -> None:
        d = self._dirs[path]

        def close(e: LogEntry) -> None:
            with self._recovery_gate.held(), e.lock:
                if e.closed:
                    return
                e.log.flush()
                e.log.close()
                e.closed = True

        try:
            with ThreadPoolExecutor(max_workers=self.config.num_recovery_threads_per_data_dir) as pool:
                for fut in [pool.submit(close, e) for e in entries]:
                    fut.result()
        except BaseException as exc:
            cause = io_cause(exc)
            if cause is None:
                _log.exception("error closing logs in %s", path)
                d.loaded_fully = False
            else:
                self._offline.report_and_process(path, cause, "error closing logs at shutdown")
                return
        self.checkpoint_recovery_offsets([path])
        self.checkpoint_log_start_offsets([path])
        if d.online and d.loaded_fully:
            try:
                CleanShutdownFile(path).write(broker_epoch)
            except OSError as exc:
                self._offline.report_and_process(path, exc, "error writing the clean shutdown marker")
