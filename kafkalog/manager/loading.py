"""Opening the log dirs and loading every partition dir at startup (Kafka's ``LogManager.loadLogs``).

Before loading, every dir is created or validated, locked, and all dirs agree on one ``meta.properties``.
Per dir: read and delete the clean-shutdown marker (a crash while loading must count as unclean), read the offset
checkpoints tolerantly, list the partition dirs, then load them on a pool of ``num.recovery.threads.per.data.dir``
threads, all dirs at once. An ``OSError`` takes only its dir offline (through the failure funnel); any other
failure aborts startup, as in Kafka. A process limit (EMFILE ...) is no dir's failure: the load stops with one
warning, and the manager puts back the markers it deleted (:meth:`DirLoader.markers_to_restore`), so a retry is
not turned into a full unclean recovery by a limit that has nothing to do with the files.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.checkpoint.clean_shutdown import CleanShutdownFile
from kafkalog.checkpoint.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offset_checkpoint,
)
from kafkalog.errors import (
    CorruptCheckpointError,
    InconsistentMetadataError,
    InvalidPartitionDirError,
    ResourceExhaustedError,
    io_cause,
)
from kafkalog.io.cpu_gate import CpuGate
from kafkalog.io.oserrors import is_resource_exhaustion, resource_error
from kafkalog.log.log import Log
from kafkalog.manager.broker_config import BrokerConfig
from kafkalog.manager.log_dir import LogDir, reconcile_meta_properties, write_meta
from kafkalog.manager.registry import LogEntry, LogRegistry
from kafkalog.manager.sanity_checker import SanityChecker, release_segment
from kafkalog.names import TopicPartition, TopicPartitionDir, delete_dir_name, parse_partition_dir

__all__ = ["DirLoad", "DirLoader", "LoadProgress", "OpenLog"]

# The manager's one logger: operators configure it by that name.
_log = logging.getLogger("kafkalog.manager.log_manager")

#: ``open_log(path, key, dir, *, clean, recovery_point, log_start_offset)``: the manager's way to open a log.
OpenLog = Callable[..., Log]


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


@dataclass
class DirLoad:
    """Startup state of one dir (checkpoints read, counters for progress)."""

    recovery_points: dict[TopicPartition, int] = field(default_factory=dict)
    log_start_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    partitions_total: int = 0
    partitions_remaining: int = 0
    segments_total: int = 0
    segments_remaining: int = 0
    failed: bool = False
    listed: list[TopicPartition] = field(default_factory=list)
    #: broker epoch of the clean-shutdown marker deleted before loading (-1: unreadable; None: there was none)
    marker_epoch: int | None = None


def segment_count(path: str) -> int:
    try:
        with os.scandir(path) as it:
            return sum(1 for e in it if e.name.endswith(".log"))
    except OSError:
        return 0


def read_checkpoint_tolerantly(d: LogDir, name: str) -> dict[TopicPartition, int]:
    """Kafka reads checkpoints tolerantly: a malformed file is a warning and counts as empty (offset 0)."""
    path = os.path.join(d.path, name)
    try:
        return read_offset_checkpoint(path)
    except FileNotFoundError:
        return {}
    except CorruptCheckpointError as e:
        _log.warning("error reading %s, resetting its offsets to 0: %s", path, e)
        return {}


class DirLoader:
    """Loads the live dirs of a registry into it; ``load`` keeps each dir's :class:`DirLoad` for the metrics and
    for the offline handler (the partitions a dir listed before it failed)."""

    def __init__(
        self,
        registry: LogRegistry,
        config: BrokerConfig,
        load: dict[str, DirLoad],
        *,
        checker: SanityChecker,
        recovery_gate: CpuGate,
        open_log: OpenLog,
        adopt_log: Callable[[Log], Log],
        report_or_raise: Callable[[str, BaseException, str], None],
        process_failures: Callable[..., None],
        has_offline_dir: Callable[[str], bool],
        clock: Callable[[], int],
        progress: Callable[[LoadProgress], None] | None,
    ) -> None:
        self._reg = registry
        self._config = config
        self._checker = checker
        self._gate = recovery_gate
        self._open_log = open_log
        self._adopt_log = adopt_log
        self._report_or_raise = report_or_raise
        self._process_failures = process_failures
        self._has_offline_dir = has_offline_dir
        self._clock = clock
        self._progress = progress
        self.load = load
        #: set when the load stopped on a process limit (EMFILE, ENOMEM ...) and nothing else
        self.stopped_by_limit = False
        self._stop_loading = threading.Event()  # a job failed in a way that aborts startup: skip the rest

    def open_dirs(self, *, cluster_id: str | None, node_id: int | None) -> None:
        """Kafka's ``createAndValidateLogDirs`` and ``lockLogDirs``, then one ``meta.properties`` for all dirs. A dir
        failing with an OSError goes offline after each phase; no live dir left raises NoLiveLogDirsError."""
        dirs = self._reg.dirs
        for d in dirs.values():
            try:
                d.ensure_exists()
            except OSError as e:
                self._report_or_raise(d.path, e, "failed to create or validate data directory")
        self._process_failures(raise_if_none_live=True)

        for d in self._reg.live_dirs():
            try:
                d.take_lock()
            except OSError as e:  # LogDirLockedError is not an OSError: it propagates
                self._report_or_raise(d.path, e, "failed to lock the log dir")
        self._process_failures(raise_if_none_live=True)

        found = {}
        for d in self._reg.live_dirs():
            try:
                found[d.path] = d.read_meta()
            except OSError as e:
                self._report_or_raise(d.path, e, "failed to read meta.properties")
        self._process_failures(raise_if_none_live=True)
        wanted = reconcile_meta_properties(
            {p: m for p, m in found.items() if dirs[p].online}, cluster_id=cluster_id, node_id=node_id,
        )
        for p, meta in wanted.items():
            d = dirs[p]
            if found.get(p) != meta:
                try:
                    write_meta(d, meta)
                except OSError as e:
                    self._report_or_raise(p, e, "failed to write meta.properties")
            else:
                d.meta = meta
        self._process_failures(raise_if_none_live=True)

    def load_logs(self) -> None:
        """Kafka's ``loadLogs``: marker, checkpoints and a pool of recovery threads per dir, all dirs at once.
        Partitions with two or more ``-future`` dirs are set aside and resolved once the rest is loaded
        (:meth:`_resolve_duplicate_futures`)."""
        jobs: list[tuple[LogDir, Future[None]]] = []
        pools: list[ThreadPoolExecutor] = []
        errors: list[BaseException] = []
        listed: list[tuple[LogDir, list[str]]] = []
        for d in self._reg.live_dirs():
            try:
                listed.append((d, self._prepare_dir(d)))
            except OSError as e:
                if is_resource_exhaustion(e):
                    err = resource_error(e, f"reading {d.path} at startup")
                    self._stopped([err], 0)
                    raise err from e
                self._report_or_raise(d.path, e, "failed to read the log dir at startup")
                self.load.setdefault(d.path, DirLoad()).failed = True
        duplicates = self._set_aside_duplicate_futures(listed)
        try:
            for d, names in listed:
                pool = ThreadPoolExecutor(
                    max_workers=self._config.num_recovery_threads_per_data_dir,
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
            self._stopped(errors, len(jobs))
            raise errors[0]
        self._resolve_duplicate_futures(duplicates)
        for d in self._reg.live_dirs():
            ld = self.load.get(d.path)
            d.loaded_fully = d.online and ld is not None and not ld.failed

    def _stopped(self, errors: list[BaseException], jobs: int) -> None:
        """Startup aborts on ``errors``. When all are process limits: one warning for the whole load (not one per
        partition), and :attr:`stopped_by_limit` tells the manager to put the clean-shutdown markers back."""
        if not all(isinstance(e, ResourceExhaustedError) for e in errors):
            return
        self.stopped_by_limit = True
        first = errors[0]
        _log.warning(
            "startup stopped at a process limit: %d of %d partition loads failed (first: %s), the rest were not "
            "tried; no log dir goes offline and the clean-shutdown markers are kept, so a retry loads as cleanly "
            "as this one would have. Raise the limit (ulimit -n) or lower kafkalog.max.open.files, then start "
            "again", len(errors), jobs, first,
        )

    def markers_to_restore(self) -> dict[str, int]:
        """``{log dir: broker epoch}`` of the clean-shutdown markers an aborted load deleted and may put back: the
        load stopped on a process limit alone, and the dir is online and had one (nothing of it failed)."""
        if not self.stopped_by_limit:
            return {}
        out = {}
        for d in self._reg.dirs.values():
            ld = self.load.get(d.path)
            if ld is not None and ld.marker_epoch is not None and d.online and not self._has_offline_dir(d.path):
                out[d.path] = ld.marker_epoch
        return out

    def close_after_abort(self, entries: list[LogEntry]) -> None:
        """Close what an aborted startup loaded. In a dir whose marker may go back (:meth:`markers_to_restore`)
        the logs are flushed and closed as a clean shutdown closes them, then the marker is written again; if
        any of that fails the marker stays deleted and the next load recovers, as after a crash."""
        restore = self.markers_to_restore()
        for e in entries:
            if e.dir.path in restore:
                try:
                    e.log.flush()
                    e.log.close()
                    continue
                except Exception:  # noqa: BLE001 - any failure: the dir is not known to be clean any more
                    _log.debug("closing %s after an aborted startup failed", e.log.dir, exc_info=True)
                    restore.pop(e.dir.path, None)
            e.close_handles()
        for path, epoch in restore.items():
            try:
                CleanShutdownFile(path).write(epoch)
            except OSError as exc:
                _log.warning("could not put back the clean shutdown marker of %s: %s", path, exc)

    def _set_aside_duplicate_futures(self, listed: list[tuple[LogDir, list[str]]]
                                     ) -> dict[TopicPartition, list[tuple[LogDir, str]]]:
        """Take out of ``listed`` every ``-future`` dir of a partition that has more than one (in any dirs);
        they count as handled for the progress counters."""
        futures: dict[TopicPartition, list[tuple[LogDir, str]]] = {}
        for d, names in listed:
            for name in names:
                parsed = parse_partition_dir(name)
                if parsed.kind == "future":
                    futures.setdefault((parsed.topic, parsed.partition), []).append((d, name))
        duplicates = {k: v for k, v in futures.items() if len(v) > 1}
        aside = {(d.path, name) for found in duplicates.values() for d, name in found}
        for d, names in listed:
            kept = [n for n in names if (d.path, n) not in aside]
            ld = self.load[d.path]
            for name in names:
                if (d.path, name) in aside:
                    ld.partitions_remaining -= 1
                    ld.segments_remaining -= segment_count(os.path.join(d.path, name)) if self._progress else 0
            names[:] = kept
        return duplicates

    def _resolve_duplicate_futures(self, duplicates: dict[TopicPartition, list[tuple[LogDir, str]]]) -> None:
        """Two futures of one partition: Kafka's loader refuses the whole broker ("Duplicate log directories
        found") because its mover never makes a second one. kafkalog's never does either, but an older kafkalog
        left one per restarted copy; resolved per partition so that every other partition starts:

        * the current log is loaded: it holds everything, and no copy can be told complete, so every future is
          dropped (renamed ``-delete`` and queued, as Kafka drops a future); a new move copies afresh;
        * no current log, and exactly one future paired with a ``-delete`` of the same uuid (a crash between the
          two renames of a swap): that one is loaded (``resolve_future_logs`` promotes it), the others dropped;
        * otherwise the current may be on a disk that is offline now: nothing is loaded or touched, one error
          names every copy for the operator to choose.
        """
        reg = self._reg
        for key, found in sorted(duplicates.items()):
            found = [(d, n) for d, n in found if d.online]
            if not found:
                continue
            paths = ", ".join(os.path.join(d.path, n) for d, n in found)
            keep: tuple[LogDir, str] | None = None
            if reg.get(key) is None:
                paired = [(d, n) for d, n in found if self._paired_with_delete(key, parse_partition_dir(n).uuid)]
                if len(paired) != 1:
                    _log.error("ambiguous future logs of %s-%d and no current log: %s left on disk, not loaded; "
                               "keep the complete copy and delete the others", key[0], key[1], paths)
                    continue
                keep = paired[0]
            _log.warning("%d future logs of %s-%d (%s): %s", len(found), key[0], key[1], paths,
                         f"keeping {os.path.join(keep[0].path, keep[1])}, dropping the others" if keep
                         else "the current log is loaded, dropping them all")
            for d, name in found:
                if (d, name) == keep:
                    parsed = parse_partition_dir(name)
                    ld = self.load[d.path]
                    with self._gate.held():
                        self._load_partition(d, ld, os.path.join(d.path, name), parsed, key)
                else:
                    self._drop_future_dir(d, key, name)

    def _paired_with_delete(self, key: TopicPartition, uid: str | None) -> bool:
        for log_dir, path, _ in self._reg.pending_deletions():
            parsed = parse_partition_dir(os.path.basename(path))
            if parsed.uuid == uid and (parsed.topic, parsed.partition) == key and self._reg.dir(log_dir).online:
                return True
        return False

    def _drop_future_dir(self, d: LogDir, key: TopicPartition, name: str) -> None:
        """Rename a future dir that was never loaded ``-delete`` and queue it (an I/O error: the dir goes offline)."""
        gone = os.path.join(d.path, delete_dir_name(*key))
        try:
            os.rename(os.path.join(d.path, name), gone)
            fsync_dir(d.path)
        except OSError as e:
            self._report_or_raise(d.path, e, f"error dropping the future log {name}")
            return
        self._reg.queue_delete(d.path, gone)

    def _prepare_dir(self, d: LogDir) -> list[str]:
        """Read + delete the marker, read checkpoints, list the partition dirs (OSError: the dir goes offline)."""
        ld = self.load.setdefault(d.path, DirLoad())
        marker = CleanShutdownFile(d.path)
        d.had_clean_shutdown = marker.exists()
        if d.had_clean_shutdown:
            epoch = marker.read_state().broker_epoch  # a warning for an unreadable marker; existence alone decides
            marker.delete()  # before loading: a crash while loading must count as unclean
            ld.marker_epoch = -1 if epoch is None else epoch
        ld.recovery_points = read_checkpoint_tolerantly(d, RECOVERY_POINT_CHECKPOINT)
        ld.log_start_offsets = read_checkpoint_tolerantly(d, LOG_START_OFFSET_CHECKPOINT)
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
            ld.segments_total = ld.segments_remaining = sum(segment_count(os.path.join(d.path, n)) for n in names)
            self._notify_progress(d, ld, None)
        return names

    def _notify_progress(self, d: LogDir, ld: DirLoad, key: TopicPartition | None) -> None:
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
        ld = self.load[d.path]
        path = os.path.join(d.path, name)
        parsed = parse_partition_dir(name)
        key = (parsed.topic, parsed.partition)
        segments = segment_count(path) if self._progress is not None else 0
        try:
            if self._stop_loading.is_set():
                return  # startup is aborting: loading more would only fail the same way
            with self._gate.held():
                self._load_partition(d, ld, path, parsed, key)
        except BaseException:
            self._stop_loading.set()
            raise
        finally:
            with self._reg.lock:
                ld.partitions_remaining -= 1
                ld.segments_remaining = max(0, ld.segments_remaining - segments)
            self._notify_progress(d, ld, key)

    def _load_partition(self, d: LogDir, ld: DirLoad, path: str, parsed: TopicPartitionDir,
                        key: TopicPartition) -> None:
        reg = self._reg
        try:
            if not d.online or self._has_offline_dir(d.path):
                return
            if parsed.kind == "delete":
                reg.queue_delete(d.path, path)
                return
            if parsed.kind == "stray":
                _log.warning("stray partition dir %s left in place (not assigned to this node)", path)
                with reg.lock:
                    d.stray_dirs.append(path)
                return
            log = self._open_log(path, key, d, clean=d.had_clean_shutdown,
                                 recovery_point=ld.recovery_points.get(key, 0),
                                 log_start_offset=ld.log_start_offsets.get(key))
            entry = LogEntry(key, log, d, is_future=parsed.kind == "future", last_flush_ms=self._clock())
            self._adopt_log(log)
            try:
                # Lazy checking (KIP-263) is only for a clean shutdown: after a crash everything is checked.
                # A future log (a move in progress) shares its key with the current log; the mover registers it
                # when it is promoted, so only current logs are registered here.
                if not entry.is_future:
                    self._checker.register(key, log, entry.lock,
                                           check_all=self._config.sanity_check_all_logs or not d.had_clean_shutdown,
                                           rebuilt=log.recovered_at_load)
            except BaseException:
                entry.close_handles()
                raise
            # Recovery may have opened every segment; closed segments reopen lazily, so hand the descriptors
            # back now (thousands of partitions x segments x 3 files would otherwise exhaust the fd limit), and
            # forget the objects of those on disk as they are (built again on first use). The active segment
            # only suspends, untrimmed: it reopens with its entries and room on the first append or read.
            active = log.segments.last
            for seg in log.segments.made():  # segments a lazy load added by offset alone hold nothing
                if seg is not active and not log.unload_segment(seg):
                    release_segment(seg)
            if active is not None:
                active.suspend()
            with reg.lock:
                target = reg.future if entry.is_future else reg.current
                previous = target.get(key)
                if previous is not None:
                    entry.close_handles()
                    raise InconsistentMetadataError(
                        f"duplicate log directories for {key[0]}-{key[1]}: {path} and {previous.log.dir}; a dir "
                        "probably failed while a replica was being moved. Delete the copy in the dir known to "
                        "have failed recently."
                    )
                target[key] = entry
        except BaseException as e:
            cause = io_cause(e)
            ld.failed = True
            if cause is None:
                raise
            if is_resource_exhaustion(cause):
                # not the dir's fault, and not reported one by one: the load stops with one summary warning
                raise resource_error(cause, f"loading {path}") from cause
            self._report_or_raise(d.path, cause, f"error loading {path}")
