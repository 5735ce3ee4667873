"""``LogManager``: several ``log.dirs`` owned the way a Kafka broker's LogManager owns them.

Startup locks each dir, agrees on ``meta.properties``, reads and deletes the clean-shutdown marker, reads the
checkpoints tolerantly and loads every partition dir with a worker pool per dir. At run time it places new
partitions, runs housekeeping (checkpoints, flush, retention, async deletion) and survives the loss of a disk:
any ``OSError`` on a dir goes through the :class:`LogDirFailureChannel`, the dir goes offline exactly once (its
partitions leave the pool, its handles are closed without flushing, its lock released, listeners told) and the
other dirs keep serving (KIP-112). Each dir has its KIP-858 ``directory.id``.

Threading: ``_state_lock`` guards the maps; each partition has its own lock for operations going through the
manager; offline handling is serialised by ``_offline_lock`` and never runs while the caller holds a partition
lock (an I/O error is caught inside the partition lock, reported after leaving it), so two threads failing on
the same dir cannot deadlock.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kafkalog.checkpoint.clean_shutdown import CleanShutdownFile
from kafkalog.checkpoint.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kafkalog.cpu_gate import CpuGate
from kafkalog.errors import (
    CorruptCheckpointError,
    InconsistentMetadataError,
    InvalidPartitionDirError,
    KafkaStorageError,
    NoLiveLogDirsError,
    ResourceExhaustedError,
    io_cause,
)
from kafkalog.handle_cache import HandleCache
from kafkalog.limits import LONG_MAX
from kafkalog.log.config import LogConfig
from kafkalog.manager.broker_config import BrokerConfig
from kafkalog.manager.failure_channel import LogDirFailureChannel
from kafkalog.manager.log_dir import LogDir, normalize_dirs, reconcile_meta_properties, write_meta
from kafkalog.manager.partition_lock import PartitionLock, holds_partition_lock
from kafkalog.manager.placement import next_log_dirs
from kafkalog.manager.sanity_checker import PartitionCheckState, SanityChecker, SanityCheckRun, release_segment
from kafkalog.manager.scheduler import Scheduler
from kafkalog.names import TopicPartition, delete_dir_name, parse_partition_dir, partition_dir_name, validate_topic
from kafkalog.owned_lock import OwnedRLock

__all__ = ["BrokerConfig", "LoadProgress", "LogDirOfflineEvent", "LogManager"]

_log = logging.getLogger(__name__)


# --- public value types ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogDirOfflineEvent:
    """What a listener hears when a dir goes offline (the content of KIP-589's AlterReplicaState)."""

    log_dir: str
    directory_id: str | None
    partitions: tuple[TopicPartition, ...]
    cause: BaseException | None


@dataclass(frozen=True)
class LoadProgress:
    """Startup progress of one dir, sent after each partition it loads (Kafka's remainingLogsToRecover /
    remainingSegmentsToRecover). ``segments_*`` count ``.log`` files; they are 0 unless a progress callback was
    given (counting lists every partition dir once more)."""

    log_dir: str
    partitions_total: int
    partitions_remaining: int
    segments_total: int
    segments_remaining: int
    partition: TopicPartition | None = None


# --- internal bookkeeping ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Entry:
    """A loaded log and what the manager tracks about it."""

    key: TopicPartition
    log: Any
    dir: LogDir
    is_future: bool = False
    lock: PartitionLock = field(default_factory=PartitionLock, repr=False)
    closed: bool = False
    last_flush_ms: int = 0


@dataclass
class _DirLoad:
    """Startup state of one dir (checkpoints read, counters for progress)."""

    recovery_points: dict[TopicPartition, int] = field(default_factory=dict)
    log_start_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    partitions_total: int = 0
    partitions_remaining: int = 0
    segments_total: int = 0
    segments_remaining: int = 0
    failed: bool = False
    listed: list[TopicPartition] = field(default_factory=list)


def _segment_count(path: str) -> int:
    try:
        with os.scandir(path) as it:
            return sum(1 for e in it if e.name.endswith(".log"))
    except OSError:
        return 0


class _ManagedLogHooks:
    """The ``StorageHooks`` every log of a manager carries: a direct call on a Log handed out by
    ``get_or_create_log``/``get_log`` follows the same rules as the manager's own operations (I/O error = dir
    offline + KafkaStorageError; a read checks KIP-263-pending segments first)."""

    def __init__(self, manager: LogManager) -> None:
        self._m = manager

    def before_read(self, log: Any, offset: int) -> None:
        self._m._checker.ensure_checked((log.topic, log.partition), offset, log=log)

    def on_io_error(self, log: Any, cause: OSError, what: str) -> BaseException:
        return self._m._log_io_error(log, cause, what)


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
        self._progress = progress

        self._dirs: dict[str, LogDir] = {p: LogDir(p) for p in self._dir_paths}
        self._logs: dict[TopicPartition, _Entry] = {}
        self._future_logs: dict[TopicPartition, _Entry] = {}
        self._to_delete: list[tuple[str, str, int]] = []  # (log dir, partition dir path, due ms)
        self._load: dict[str, _DirLoad] = {}

        self._state_lock = OwnedRLock()
        self._create_lock = threading.Lock()
        self._offline_lock = OwnedRLock()
        self._listeners: list[Callable[[LogDirOfflineEvent], None]] = []
        self.failure_channel = LogDirFailureChannel()
        self.events: list[LogDirOfflineEvent] = []
        self.fatal_error: NoLiveLogDirsError | None = None

        self._checker = SanityChecker(recover=self._recover_segments, on_io_error=self._checker_io_error)
        self._recovery_gate = CpuGate(self.config.recovery_concurrency)
        self._scheduler = Scheduler(threads=self.config.background_threads, name="kafkalog-log-manager")
        self._started = False
        self._stopped = False
        self._mover: Any = None  # ReplicaMover, created on first use (KIP-113)
        self._log_hooks = _ManagedLogHooks(self)
        self._expected: dict[TopicPartition, str] = {}  # placement known from outside (expect_partitions)
        #: every segment descriptor and index mapping of every log of this manager (kafkalog.max.open.files)
        self.handle_cache = HandleCache(self.config.max_open_files)

    # --- context manager ---------------------------------------------------------------------------------------

    def __enter__(self) -> LogManager:
        self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # --- listeners, queries ------------------------------------------------------------------------------------

    def add_listener(self, callback: Callable[[LogDirOfflineEvent], None]) -> None:
        """``callback(event)`` is called once per dir going offline (also for dirs failing during startup)."""
        self._listeners.append(callback)

    @property
    def log_dirs(self) -> list[str]:
        return list(self._dir_paths)

    @property
    def live_log_dirs(self) -> list[str]:
        return [p for p, d in self._dirs.items() if d.online]

    @property
    def offline_log_dirs(self) -> list[str]:
        return [p for p, d in self._dirs.items() if not d.online]

    @property
    def is_running(self) -> bool:
        return self._started and not self._stopped

    def _dir(self, log_dir: str | os.PathLike[str]) -> LogDir:
        path = os.path.abspath(os.path.normpath(os.fspath(log_dir)))
        d = self._dirs.get(path)
        if d is None:
            real = os.path.realpath(path)
            d = next((x for x in self._dirs.values() if os.path.realpath(x.path) == real), None)
        if d is None:
            raise KeyError(f"{log_dir} is not one of this manager's log dirs")
        return d

    def directory_id(self, log_dir: str | os.PathLike[str]) -> str | None:
        """The dir's KIP-858 ``directory.id`` (None for a dir that failed before its meta.properties was read)."""
        return self._dir(log_dir).directory_id

    def expect_partitions(self, placement: Mapping[TopicPartition, str]) -> None:
        """Tell the manager where replicas live, ``{(topic, partition): log dir path or directory.id}``, as the
        cluster metadata tells Kafka's broker. A dir that fails before it can be listed (at startup, say) then
        still reports the partitions it held: in its offline event, ``offline_partitions()`` and
        ``OfflineReplicaCount``. Partitions live in another dir are not counted offline."""
        with self._state_lock:
            for (t, p), where in placement.items():
                where = os.fspath(where)
                self._expected[(str(t), int(p))] = os.path.abspath(where) if os.sep in where else where
            for d in self._dirs.values():
                if not d.online:
                    d.offline_partitions = tuple(sorted(set(d.offline_partitions) | self._expected_in(d)))

    def _expected_in(self, d: LogDir) -> set[TopicPartition]:
        """The partitions ``expect_partitions`` placed in ``d`` that are not live elsewhere (state lock held)."""
        out = set()
        for key, where in self._expected.items():
            if key in self._logs or where not in (d.path, d.directory_id):
                continue
            out.add(key)
        return out

    def offline_partitions(self) -> dict[str, tuple[TopicPartition, ...]]:
        """Per offline dir, the partitions it held."""
        return {p: d.offline_partitions for p, d in self._dirs.items() if not d.online}

    def stray_logs(self) -> list[str]:
        """``-stray`` partition dirs found at startup (left untouched)."""
        return [s for d in self._dirs.values() for s in d.stray_dirs]

    def get_log(self, topic: str, partition: int, *, is_future: bool = False) -> Any | None:
        with self._state_lock:
            e = (self._future_logs if is_future else self._logs).get((topic, partition))
        return None if e is None else e.log

    def all_logs(self) -> list[Any]:
        """Every live current and future log."""
        with self._state_lock:
            return [e.log for e in [*self._logs.values(), *self._future_logs.values()]]

    def logs_in_dir(self, log_dir: str | os.PathLike[str]) -> dict[TopicPartition, Any]:
        d = self._dir(log_dir)
        with self._state_lock:
            return {e.key: e.log for e in self._logs.values() if e.dir is d}

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        with self._state_lock:
            e = self._logs.get((topic, partition))
        return None if e is None else e.dir.path

    def assignments(self) -> dict[TopicPartition, str | None]:
        """KIP-858: ``{(topic, partition): directory_id}`` for every live current log."""
        with self._state_lock:
            return {k: e.dir.directory_id for k, e in self._logs.items()}

    def metrics(self) -> dict[str, Any]:
        """Kafka's LogManager/ReplicaManager gauges. ``LogDirectoryOffline`` is a dict ``{dir: 0 | 1}`` (Kafka's
        per-dir gauge tagged ``logDirectory``); ``RemainingLogsToRecover`` / ``RemainingSegmentsToRecover`` are
        per dir too."""
        offline = [d for d in self._dirs.values() if not d.online]
        with self._state_lock:
            online_count = len(self._logs)
        return {
            "OfflineLogDirectoryCount": len(offline),
            "OfflineReplicaCount": sum(len(d.offline_partitions) for d in offline),
            "LogDirectoryOffline": {p: 0 if d.online else 1 for p, d in self._dirs.items()},
            "LiveLogDirectoryCount": len(self._dirs) - len(offline),
            "PartitionCount": online_count,
            "FutureLogCount": len(self._future_logs),
            "RemainingLogsToRecover": {p: ld.partitions_remaining for p, ld in self._load.items()},
            "RemainingSegmentsToRecover": {p: ld.segments_remaining for p, ld in self._load.items()},
        }

    # --- KIP-263 -------------------------------------------------------------------------------------------------

    def start_sanity_checker(self, partitions: Iterable[TopicPartition] | None = None) -> SanityCheckRun:
        """Check the pending (not yet sanity-checked) segments of ``partitions`` (default: all) in background."""
        self._ensure_running()
        return self._checker.start(partitions)

    def sanity_check_state(self, topic: str, partition: int) -> PartitionCheckState | None:
        return self._checker.state((topic, partition))

    def sanity_check_states(self) -> dict[TopicPartition, PartitionCheckState]:
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
        self._schedule_tasks()

    def _startup(self) -> None:
        for d in self._dirs.values():
            try:
                d.ensure_exists()
            except OSError as e:
                self._report_or_raise(d.path, e, "failed to create or validate data directory")
        self._process_failures(raise_if_none_live=True)

        for d in self._live_dirs():
            try:
                d.take_lock()
            except OSError as e:  # LogDirLockedError is not an OSError: it propagates
                self._report_or_raise(d.path, e, "failed to lock the log dir")
        self._process_failures(raise_if_none_live=True)

        found = {}
        for d in self._live_dirs():
            try:
                found[d.path] = d.read_meta()
            except OSError as e:
                self._report_or_raise(d.path, e, "failed to read meta.properties")
        self._process_failures(raise_if_none_live=True)
        wanted = reconcile_meta_properties(
            {p: m for p, m in found.items() if self._dirs[p].online},
            cluster_id=self.config.cluster_id, node_id=self.config.node_id,
        )
        for p, meta in wanted.items():
            d = self._dirs[p]
            if found.get(p) != meta:
                try:
                    write_meta(d, meta)
                except OSError as e:
                    self._report_or_raise(p, e, "failed to write meta.properties")
            else:
                d.meta = meta
        self._process_failures(raise_if_none_live=True)

        self._load_logs()
        self._process_failures(raise_if_none_live=True)
        from kafkalog.manager.replica_mover import resolve_future_logs

        resolve_future_logs(self)  # a move that crashed between its two renames (KIP-113)
        self._process_failures(raise_if_none_live=True)

    def _abort_startup(self) -> None:
        with self._state_lock:
            entries = [*self._logs.values(), *self._future_logs.values()]
            self._logs.clear()
            self._future_logs.clear()
        for e in entries:
            self._close_handles(e)
        for d in self._dirs.values():
            d.release_lock()
        self._stopped = True

    def _live_dirs(self) -> list[LogDir]:
        return [d for d in self._dirs.values() if d.online]

    def _load_logs(self) -> None:
        """Kafka's ``loadLogs``: marker, checkpoints and a pool of recovery threads per dir, all dirs at once."""
        jobs: list[tuple[LogDir, Any]] = []
        pools: list[ThreadPoolExecutor] = []
        errors: list[BaseException] = []
        try:
            for d in self._live_dirs():
                try:
                    names = self._prepare_dir(d)
                except OSError as e:
                    self._report_or_raise(d.path, e, "failed to read the log dir at startup")
                    self._load.setdefault(d.path, _DirLoad()).failed = True
                    continue
                pool = ThreadPoolExecutor(
                    max_workers=self.config.num_recovery_threads_per_data_dir,
                    thread_name_prefix=f"kafkalog-recovery-{os.path.basename(d.path)}",
                )
                pools.append(pool)
                for name in names:
                    jobs.append((d, pool.submit(self._load_one, d, name)))
            for _d, fut in jobs:
                try:
                    fut.result()
                except BaseException as e:  # non-I/O failures abort startup, as in Kafka
                    errors.append(e)
        finally:
            for pool in pools:
                pool.shutdown(wait=True)
        if errors:
            raise errors[0]
        for d in self._live_dirs():
            ld = self._load.get(d.path)
            d.loaded_fully = d.online and ld is not None and not ld.failed

    def _prepare_dir(self, d: LogDir) -> list[str]:
        """Read + delete the marker, read checkpoints, list the partition dirs (OSError: the dir goes offline)."""
        ld = self._load.setdefault(d.path, _DirLoad())
        marker = CleanShutdownFile(d.path)
        d.had_clean_shutdown = marker.exists()
        if d.had_clean_shutdown:
            marker.read_state()  # logs a warning for an unreadable marker; existence alone decides
            marker.delete()  # before loading: a crash while loading must count as unclean
        ld.recovery_points = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
        ld.log_start_offsets = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
        names = []
        with os.scandir(d.path) as it:
            for entry in it:
                if not entry.is_dir(follow_symlinks=False):
                    if entry.is_symlink() and entry.is_dir():
                        # never followed: it may point outside the log dir (path safety), but say so
                        _log.error("refusing %s: a partition directory must not be a symlink (points to %s)",
                                   entry.path, os.path.realpath(entry.path))
                    continue
                try:
                    parsed = parse_partition_dir(entry.name)
                except InvalidPartitionDirError:
                    _log.warning("skipping %s: not a partition directory", entry.path)
                    continue
                names.append(entry.name)
                if parsed.kind == "":
                    ld.listed.append((parsed.topic, parsed.partition))
        names.sort()
        ld.partitions_total = ld.partitions_remaining = len(names)
        if self._progress is not None:
            ld.segments_total = ld.segments_remaining = sum(_segment_count(os.path.join(d.path, n)) for n in names)
            self._notify_progress(d, ld, None)
        return names

    def _read_checkpoint(self, d: LogDir, name: str) -> dict[TopicPartition, int]:
        """Kafka reads checkpoints tolerantly: a malformed file is a warning and counts as empty (offset 0)."""
        path = os.path.join(d.path, name)
        try:
            return read_offset_checkpoint(path)
        except FileNotFoundError:
            return {}
        except CorruptCheckpointError as e:
            _log.warning("error reading %s, resetting its offsets to 0: %s", path, e)
            return {}

    def _notify_progress(self, d: LogDir, ld: _DirLoad, key: TopicPartition | None) -> None:
        if self._progress is None:
            return
        try:
            self._progress(
                LoadProgress(d.path, ld.partitions_total, ld.partitions_remaining, ld.segments_total,
                             ld.segments_remaining, key)
            )
        except Exception:
            _log.exception("progress callback failed")

    def _load_one(self, d: LogDir, name: str) -> None:
        """One partition dir (runs on the dir's recovery pool)."""
        ld = self._load[d.path]
        path = os.path.join(d.path, name)
        parsed = parse_partition_dir(name)
        key = (parsed.topic, parsed.partition)
        segments = _segment_count(path) if self._progress is not None else 0
        try:
            with self._recovery_gate.held():
                self._load_partition(d, ld, path, parsed, key)
        finally:
            with self._state_lock:
                ld.partitions_remaining -= 1
                ld.segments_remaining = max(0, ld.segments_remaining - segments)
            self._notify_progress(d, ld, key)

    def _load_partition(self, d: LogDir, ld: _DirLoad, path: str, parsed: Any, key: TopicPartition) -> None:
        try:
            if not d.online or self.failure_channel.has_offline_dir(d.path):
                return
            if parsed.kind == "delete":
                with self._state_lock:
                    self._to_delete.append((d.path, path, self._clock()))
                return
            if parsed.kind == "stray":
                _log.warning("stray partition dir %s left in place (not assigned to this node)", path)
                with self._state_lock:
                    d.stray_dirs.append(path)
                return
            log = self._open_log(path, key, d, clean=d.had_clean_shutdown,
                                 recovery_point=ld.recovery_points.get(key, 0),
                                 log_start_offset=ld.log_start_offsets.get(key))
            entry = _Entry(key, log, d, is_future=parsed.kind == "future", last_flush_ms=self._clock())
            self.adopt_log(log)
            try:
                # Lazy checking (KIP-263) is only for a clean shutdown: after a crash everything is checked.
                # A future log (a move in progress) shares its key with the current log; the mover registers it
                # when it is promoted, so only current logs are registered here.
                if not entry.is_future:
                    self._checker.register(key, log, entry.lock,
                                           check_all=self.config.sanity_check_all_logs or not d.had_clean_shutdown,
                                           rebuilt=log.recovered_at_load)
            except BaseException:
                self._close_handles(entry)
                raise
            # Recovery may have opened every segment; closed segments reopen lazily, so hand the descriptors
            # back now (thousands of partitions x segments x 3 files would otherwise exhaust the fd limit). The
            # active segment too, untrimmed: it reopens with its entries and room on the first append or read.
            for seg in log.segments.inactive():
                release_segment(seg)
            active = log.segments.last
            if active is not None:
                active.suspend()
            with self._state_lock:
                target = self._future_logs if entry.is_future else self._logs
                previous = target.get(key)
                if previous is not None:
                    self._close_handles(entry)
                    raise InconsistentMetadataError(
                        f"duplicate log directories for {key[0]}-{key[1]}: {path} and {previous.log.dir}; a dir "
                        "probably failed while a replica was being moved. Delete the copy in the dir known to "
                        "have failed recently."
                    )
                target[key] = entry
        except BaseException as e:
            cause = io_cause(e)
            if cause is None:
                ld.failed = True
                raise
            ld.failed = True
            self._report_or_raise(d.path, cause, f"error loading {path}")

    def _open_log(self, path: str, key: TopicPartition, d: LogDir, *, clean: bool, recovery_point: int | None,
                  log_start_offset: int | None, topic_id: str | None = None) -> Any:
        from kafkalog.log.log import Log  # the log layer lands separately; import at use keeps this module light

        kwargs: dict[str, Any] = dict(recovery_point=recovery_point, log_start_offset=log_start_offset,
                                      clean_shutdown=clean, clock=self._clock, handle_cache=self.handle_cache)
        if topic_id is not None:
            kwargs["topic_id"] = topic_id
        return Log.open(path, self.config_for(key[0]), **kwargs)

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.log_config)

    # --- failure handling ----------------------------------------------------------------------------------------

    def _report(self, log_dir: str, cause: BaseException, message: str = "") -> ResourceExhaustedError | None:
        """Hand an I/O failure to the channel's funnel (the only way a dir goes offline). A process limit comes
        back as the typed retriable error, for the caller to raise (or log, for periodic work)."""
        return self.failure_channel.report(log_dir, cause, message)

    def _report_or_raise(self, log_dir: str, cause: BaseException, message: str = "") -> None:
        """``_report`` for a caller that cannot carry on after a process limit: raise it (the dir stays online)."""
        exhausted = self._report(log_dir, cause, message)
        if exhausted is not None:
            raise exhausted from io_cause(cause)

    def _process_failures(self, *, raise_if_none_live: bool = False) -> None:
        """Drain the channel and take each failed dir offline. Serialised: when this returns, every dir reported
        before the call is fully offline, whichever thread did the work."""
        events: list[LogDirOfflineEvent] = []
        with self._offline_lock:
            for path in self.failure_channel.drain():
                ev = self._take_offline(path)
                if ev is not None:
                    events.append(ev)
            no_live = not any(d.online for d in self._dirs.values())
            if no_live and self.fatal_error is None and (events or raise_if_none_live):
                self.fatal_error = NoLiveLogDirsError(
                    f"all log dirs are offline ({', '.join(self._dir_paths)}): the manager stops (Kafka halts)"
                )
                _log.critical("%s", self.fatal_error)
        for ev in events:
            self._notify(ev)
        if self.fatal_error is not None and no_live:
            self._halt()
            if raise_if_none_live:
                raise self.fatal_error

    def _take_offline(self, path: str) -> LogDirOfflineEvent | None:
        """Kafka's ``handleLogDirFailure`` for one dir."""
        d = self._dirs.get(path)
        if d is None or not d.online:
            return None
        ld = self._load.get(path)
        extra = [] if ld is not None and ld.listed else self._best_effort_list(path)
        with self._state_lock:
            lost = [e for e in self._logs.values() if e.dir is d]
            lost_future = [e for e in self._future_logs.values() if e.dir is d]
            partitions = {e.key for e in lost} | set(extra)
            if ld is not None:
                partitions.update(ld.listed)
            partitions |= self._expected_in(d)
            # Offline partitions are known before they leave the pool: a concurrent caller sees one or the other.
            d.offline_partitions = tuple(sorted(partitions))
            d.offline_cause = self.failure_channel.cause(path)
            d.online = False
            for e in lost:
                del self._logs[e.key]
            for e in lost_future:
                del self._future_logs[e.key]
            self._to_delete = [t for t in self._to_delete if t[0] != path]
        for e in [*lost, *lost_future]:
            with e.lock:  # waits for an operation in flight on this partition, then nobody uses it again
                e.closed = True
                self._close_handles(e)
        self._checker.mark_offline([e.key for e in lost])
        d.release_lock()
        _log.warning("log dir %s (directory.id %s) is offline; partitions %s are offline", path,
                     d.directory_id, list(d.offline_partitions))
        ev = LogDirOfflineEvent(path, d.directory_id, d.offline_partitions, d.offline_cause)
        self.events.append(ev)
        return ev

    @staticmethod
    def _best_effort_list(path: str) -> list[TopicPartition]:
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

    def _close_handles(self, e: _Entry) -> None:
        """Close a log's file handles without flushing or trimming anything (its disk may be gone)."""
        log = e.log
        try:
            log.close_handlers()
        except Exception:
            _log.debug("closing handles of %s failed", e.key, exc_info=True)

    def _notify(self, ev: LogDirOfflineEvent) -> None:
        for cb in list(self._listeners):
            try:
                cb(ev)
            except Exception:
                _log.exception("log dir offline listener failed")

    def _halt(self) -> None:
        """No live dir left: stop background work; every later operation raises the fatal error."""
        self._checker.stop(timeout=5)
        if self._mover is not None:
            self._mover.stop_all(timeout=5)
        self._scheduler.shutdown(timeout=5)
        for d in self._dirs.values():
            d.release_lock()
        self._stopped = True

    def _fail(self, d: LogDir, cause: OSError, message: str) -> KafkaStorageError:
        """Report, process, and build the error the caller raises (the typed retriable one for a process limit,
        which leaves the dir online)."""
        exhausted = self._report(d.path, cause, message)
        if exhausted is not None:
            return exhausted
        self._process_failures()
        if self.fatal_error is not None:
            return self.fatal_error
        return KafkaStorageError(f"{message}: log dir {d.path} is offline ({cause})")

    def adopt_log(self, log: Any) -> Any:
        """Give a Log this manager owns the manager's storage hooks (every Log the manager hands out has them)."""
        log.attach_storage_hooks(self._log_hooks)
        return log

    def _log_io_error(self, log: Any, cause: OSError, what: str) -> BaseException:
        """An I/O error in a direct call on one of our logs: take its dir offline and say so.

        When this thread is inside the manager's own machinery (it holds a partition lock or the state/offline
        locks), the raw ``cause`` goes back up: that code reports it after releasing its locks, because offline
        handling waits for partition locks and must never run under one.
        """
        d = self._dirs.get(os.path.dirname(os.fspath(log.dir)))
        if d is None or self._holds_manager_locks():
            return cause
        return self._fail(d, cause, f"I/O error on {what} of {log.topic}-{log.partition}")

    def _holds_manager_locks(self) -> bool:
        return (
            holds_partition_lock()
            or self._state_lock.held_by_current_thread()
            or self._offline_lock.held_by_current_thread()
        )

    def _checker_io_error(self, key: TopicPartition, cause: OSError) -> None:
        with self._state_lock:
            e = self._logs.get(key) or self._future_logs.get(key)
        if e is not None:
            if self._report(e.dir.path, cause, f"I/O error while sanity-checking {key[0]}-{key[1]}") is None:
                self._process_failures()

    def _ensure_running(self) -> None:
        if self.fatal_error is not None:
            raise self.fatal_error
        if not self._started or self._stopped:
            raise KafkaStorageError("the log manager is not running (call startup() or use it as a context manager)")

    # --- operations through the manager ---------------------------------------------------------------------------

    def _entry(self, topic: str, partition: int, *, is_future: bool = False) -> _Entry:
        self._ensure_running()
        key = (topic, partition)
        with self._state_lock:
            e = (self._future_logs if is_future else self._logs).get(key)
        if e is not None:
            return e
        for d in self._dirs.values():
            if not d.online and key in d.offline_partitions:
                raise KafkaStorageError(f"partition {topic}-{partition} is in offline log dir {d.path}")
        raise KeyError(f"no log for {topic}-{partition}")

    def _call(self, topic: str, partition: int, what: str, fn: Callable[[Any], Any], *, is_future: bool = False,
              before: Callable[[_Entry], None] | None = None) -> Any:
        """Run ``fn(log)`` under the partition lock; an I/O failure takes the partition's dir offline and raises
        KafkaStorageError after the lock is released."""
        e = self._entry(topic, partition, is_future=is_future)
        failure: OSError | None = None
        with e.lock:
            if e.closed:
                raise KafkaStorageError(f"partition {topic}-{partition} is offline (log dir {e.dir.path})")
            try:
                if before is not None:
                    before(e)
                return fn(e.log)
            except BaseException as exc:
                failure = io_cause(exc)
                if failure is None:
                    raise
        raise self._fail(e.dir, failure, f"I/O error on {what} of {topic}-{partition}") from failure

    def append(self, topic: str, partition: int, records: Any, **kwargs: Any) -> Any:
        """``Log.append_as_leader`` through the manager (I/O errors take the dir offline)."""
        return self._call(topic, partition, "append", lambda log: log.append_as_leader(records, **kwargs))

    def append_as_follower(self, topic: str, partition: int, batch_bytes: bytes) -> Any:
        return self._call(topic, partition, "append", lambda log: log.append_as_follower(batch_bytes))

    def read(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20, **kwargs: Any) -> Any:
        """``Log.read``; a segment not yet sanity-checked (KIP-263 lazy mode) is checked first."""

        def check(e: _Entry) -> None:
            self._checker.ensure_checked(e.key, offset)

        return self._call(topic, partition, "read", lambda log: log.read(offset, max_bytes, **kwargs), before=check)

    def roll(self, topic: str, partition: int) -> Any:
        return self._call(topic, partition, "roll", lambda log: log.roll())

    def flush(self, topic: str, partition: int) -> None:
        def do(log: Any) -> None:
            log.flush()

        self._call(topic, partition, "flush", do)
        e = self._entry(topic, partition)
        e.last_flush_ms = self._clock()

    def truncate_to(self, topic: str, partition: int, offset: int) -> Any:
        return self._call(topic, partition, "truncate", lambda log: log.truncate_to(offset))

    def delete_old_segments(self, topic: str, partition: int) -> Any:
        return self._call(topic, partition, "retention", lambda log: log.delete_old_segments())

    # --- creation and deletion -----------------------------------------------------------------------------------

    def get_or_create_log(self, topic: str, partition: int, *, topic_id: str | None = None,
                          config: LogConfig | None = None, is_new: bool = True) -> Any:
        """The partition's log, created in Kafka's next log dir if it exists nowhere.

        KIP-112: a partition found on no live dir is created only when ``is_new`` or when no dir is offline;
        otherwise the replica may live on the failed disk and KafkaStorageError is raised instead of silently
        starting it empty.
        """
        validate_topic(topic)
        partition_dir_name(topic, partition)  # validates the partition number
        self._ensure_running()
        key = (topic, partition)
        with self._create_lock:
            with self._state_lock:
                e = self._logs.get(key)
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
                with self._state_lock:
                    self._topic_configs.setdefault(topic, config)
            tried = []
            with self._state_lock:
                parents = [x.dir.path for x in [*self._logs.values(), *self._future_logs.values()]]
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
                    self._report_or_raise(path, cause, f"error creating log for {topic}-{partition}")
                    self._process_failures()
                    if self.fatal_error is not None:
                        raise self.fatal_error from cause
                    continue
                self.adopt_log(log)
                entry = _Entry(key, log, d, last_flush_ms=self._clock())
                self._checker.register_new(key, log, entry.lock)
                with self._state_lock:
                    self._logs[key] = entry
                _log.info("created log for %s-%d in %s", topic, partition, path)
                return log
            raise KafkaStorageError(f"no log directories available for {topic}-{partition}; tried {tried}")

    def _open_new_log(self, path: str, key: TopicPartition, config: LogConfig | None, topic_id: str | None) -> Any:
        from kafkalog.log.log import Log

        kwargs: dict[str, Any] = dict(clock=self._clock, handle_cache=self.handle_cache)
        if topic_id is not None:
            kwargs["topic_id"] = topic_id
        return Log.open(path, config if config is not None else self.config_for(key[0]), **kwargs)

    def delete_log(self, topic: str, partition: int) -> None:
        """Kafka's ``asyncDelete``: close the log, rename its dir ``-delete`` and remove it after
        ``file.delete.delay.ms``; the dir's checkpoints are rewritten without it."""
        e = self._entry(topic, partition)
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
                with self._state_lock:
                    self._logs.pop(e.key, None)
                    self._to_delete.append((e.dir.path, target, self._clock()))
                self._checker.forget(e.key)
        if failure is not None:
            raise self._fail(e.dir, failure, f"I/O error deleting {topic}-{partition}") from failure
        self.checkpoint_recovery_offsets([e.dir.path])
        self.checkpoint_log_start_offsets([e.dir.path])

    # --- JBOD: KIP-113 moves and KIP-858 assignments (kafkalog/manager/replica_mover.py, assignments.py) --------

    def _replica_mover(self) -> Any:
        if self._mover is None:
            from kafkalog.manager.replica_mover import ReplicaMover

            with self._state_lock:
                if self._mover is None:
                    self._mover = ReplicaMover(self)
        return self._mover

    def alter_replica_log_dir(self, topic: str, partition: int, target_dir: str, *, wait: bool = False) -> Any:
        """KIP-113: move the replica to ``target_dir`` through a ``-future`` log, in background (``wait=True``
        blocks until it ends). Returns the move's ``MoveProgress``; a future already in ``target_dir`` resumes."""
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

    def check_assignments(self, expected: Mapping[TopicPartition, str]) -> list[Any]:
        """KIP-858: every difference between the replicas here and ``expected`` ({(topic, partition): dir id}) as
        ``AssignmentMismatch`` (kind, topic, partition, expected_dir_id, actual_dir_id, detail); empty = agrees."""
        from kafkalog.manager.assignments import compare_assignments, dir_states_of

        return compare_assignments(dir_states_of(self), expected)

    # --- housekeeping (run by the scheduler; public so callers and tests can run them on demand) -----------------

    def _entries_by_dir(self, dirs: Iterable[str] | None) -> dict[str, list[_Entry]]:
        wanted = None if dirs is None else {self._dir(p).path for p in dirs}
        with self._state_lock:
            out: dict[str, list[_Entry]] = {d.path: [] for d in self._dirs.values()
                                            if d.online and (wanted is None or d.path in wanted)}
            for e in [*self._logs.values(), *self._future_logs.values()]:
                if e.dir.path in out:
                    out[e.dir.path].append(e)
        return out

    def _write_checkpoint(self, path: str, name: str, offsets: dict[TopicPartition, int]) -> bool:
        d = self._dirs[path]
        if not d.online:
            return False
        try:
            with d.mutex:
                write_offset_checkpoint(os.path.join(path, name), offsets)
        except OSError as e:
            if self._report(path, e, f"disk error while writing {name}") is None:
                self._process_failures()
            return False
        return True

    def checkpoint_recovery_offsets(self, dirs: Iterable[str] | None = None) -> None:
        """Write ``recovery-point-offset-checkpoint`` for each live dir (current and future logs)."""
        for path, entries in self._entries_by_dir(dirs).items():
            self._write_checkpoint(path, RECOVERY_POINT_CHECKPOINT, {e.key: e.log.recovery_point for e in entries})

    def checkpoint_log_start_offsets(self, dirs: Iterable[str] | None = None) -> None:
        """Write ``log-start-offset-checkpoint``: only logs whose start offset is past their first segment's base
        offset (Kafka's filter: the others would restart at the segment base anyway)."""
        for path, entries in self._entries_by_dir(dirs).items():
            offsets = {}
            for e in entries:
                first = e.log.segments.first
                if first is not None and e.log.log_start_offset > first.base_offset:
                    offsets[e.key] = e.log.log_start_offset
            self._write_checkpoint(path, LOG_START_OFFSET_CHECKPOINT, offsets)

    def flush_dirty_logs(self) -> None:
        """Flush logs whose ``flush.ms`` elapsed since their last flush (Kafka's ``flushDirtyLogs``)."""
        now = self._clock()
        with self._state_lock:
            entries = [*self._logs.values(), *self._future_logs.values()]
        for e in entries:
            flush_ms = self.config_for(e.key[0]).flush_ms
            if now - e.last_flush_ms < flush_ms:
                continue
            try:
                self._call(e.key[0], e.key[1], "flush", lambda log: log.flush(), is_future=e.is_future)
                e.last_flush_ms = now
            except (KafkaStorageError, KeyError):
                continue

    def cleanup_logs(self) -> None:
        """Retention for every non-compacted current log (Kafka's ``cleanupLogs``)."""
        with self._state_lock:
            entries = list(self._logs.values())
        for e in entries:
            if not self.config_for(e.key[0]).delete:
                continue
            try:
                self._call(e.key[0], e.key[1], "retention", lambda log: log.delete_old_segments())
            except (KafkaStorageError, KeyError):
                continue

    def delete_logs(self) -> int:
        """Remove ``-delete`` partition dirs whose ``file.delete.delay.ms`` has passed; returns how many."""
        now = self._clock()
        with self._state_lock:
            due = [t for t in self._to_delete if now - t[2] >= self.config.file_delete_delay_ms]
            self._to_delete = [t for t in self._to_delete if t not in due]
        done = 0
        with self._state_lock:
            entries = list(self._logs.values())
        for e in entries:  # segments renamed .deleted by retention, removed after file.delete.delay.ms
            try:
                self._call(e.key[0], e.key[1], "delete", lambda log: log.delete_expired_files())
            except (KafkaStorageError, KeyError):
                pass
        for log_dir, path, _ in due:
            d = self._dirs[log_dir]
            if not d.online:
                continue
            try:
                shutil.rmtree(path)
                done += 1
            except FileNotFoundError:
                continue
            except OSError as exc:
                if self._report(log_dir, exc, f"error deleting {path}") is None:
                    self._process_failures()
        return done

    @property
    def pending_deletions(self) -> list[str]:
        with self._state_lock:
            return [t[1] for t in self._to_delete]

    def _schedule_tasks(self) -> None:
        c = self.config
        s = self._scheduler
        s.startup()
        s.schedule("kafka-recovery-point-checkpoint", self._guard(self.checkpoint_recovery_offsets),
                   delay_ms=c.flush_checkpoint_ms, period_ms=c.flush_checkpoint_ms)
        s.schedule("kafka-log-start-offset-checkpoint", self._guard(self.checkpoint_log_start_offsets),
                   delay_ms=c.flush_start_offset_checkpoint_ms, period_ms=c.flush_start_offset_checkpoint_ms)
        if c.flush_scheduler_ms < LONG_MAX:
            s.schedule("kafka-log-flusher", self._guard(self.flush_dirty_logs),
                       delay_ms=c.flush_scheduler_ms, period_ms=c.flush_scheduler_ms)
        s.schedule("kafka-log-retention", self._guard(self.cleanup_logs),
                   delay_ms=c.retention_check_ms, period_ms=c.retention_check_ms)
        # Kafka re-schedules its delete task for the next due time; polling at a fraction of the delay is simpler.
        s.schedule("kafka-delete-logs", self._guard(self.delete_logs),
                   delay_ms=0, period_ms=max(10, min(c.file_delete_delay_ms, 30_000) // 2 or 10))

    def _guard(self, fn: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            if self._stopped:
                return
            fn()

        return run

    # --- KIP-263 recovery ----------------------------------------------------------------------------------------

    def _recover_segments(self, key: TopicPartition, log: Any, bases: list[int]) -> int:
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
        if self._mover is not None:
            self._mover.stop_all()
        self._scheduler.shutdown()
        by_dir = self._entries_by_dir(None)
        with ThreadPoolExecutor(max_workers=max(1, len(by_dir))) as pool:
            list(pool.map(lambda item: self._shutdown_dir(item[0], item[1], broker_epoch), by_dir.items()))
        self._process_failures()
        with self._state_lock:
            self._logs.clear()
            self._future_logs.clear()
        for d in self._dirs.values():
            d.release_lock()

    def _shutdown_dir(self, path: str, entries: list[_Entry], broker_epoch: int) -> None:
        d = self._dirs[path]

        def close(e: _Entry) -> None:
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
                if self._report(path, cause, "error closing logs at shutdown") is None:
                    self._process_failures()
                return
        self.checkpoint_recovery_offsets([path])
        self.checkpoint_log_start_offsets([path])
        if d.online and d.loaded_fully:
            try:
                CleanShutdownFile(path).write(broker_epoch)
            except OSError as exc:
                if self._report(path, exc, "error writing the clean shutdown marker") is None:
                    self._process_failures()
