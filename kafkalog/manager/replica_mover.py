"""KIP-113: moving a replica between log dirs of one LogManager, crash-safe at every step.

A move (``LogManager.alter_replica_log_dir``) runs on its own daemon thread, as Kafka's ReplicaAlterLogDirsThread:

1. ``future_created``: ``<t>-<p>.<uuid>-future`` is created in the target dir.
2. ``segments_copied``: the source's inactive segments (``.log`` and index files, producer snapshots at or below
   the active segment, ``leader-epoch-checkpoint``, ``partition.metadata``) are copied with ``copy_file_range``
   one file open at a time; the files are listed with their inodes under the partition lock, and a file gone or
   replaced by the time it is opened restarts the move.
3. ``future_opened``: the copy is opened as a future log (listed in the target dir's checkpoints, as Kafka
   checkpoints its futureLogs in their own dir).
4. ``caught_up``: the active segment's batches are appended with ``append_as_follower`` (offsets, epochs and
   timestamps kept; rolled exactly where the source rolled) while appends continue on the source, until a round
   copies little.
5. ``appends_paused``: under the partition lock the rest is copied, both logs are flushed and closed.
6. ``source_renamed``: the source dir becomes ``<t>-<p>.<uuid>-delete`` (the **same uuid** as the future).
7. ``future_renamed``: the future dir becomes ``<t>-<p>`` in the target dir.
8. ``swapped``: the new current log is opened, the manager's maps updated, both dirs checkpointed, the old copy
   queued for deletion after ``file.delete.delay.ms``.

Kafka renames the future first, so a crash between its two renames leaves two current logs and the broker refuses
to start until an operator deletes one. Here the source goes first: at every instant there is at most one current
log, and a crash between 6 and 7 leaves a complete, flushed ``-future`` beside a ``-delete`` carrying the same uuid.
:func:`resolve_future_logs` (run at startup) promotes exactly that future; any other future whose current log is
loaded stays a future (``alter_replica_log_dir`` to the same dir resumes it, ``abort_replica_move`` drops it), and a
future without a current log and without its paired ``-delete`` is left alone (the current may be on an offline
dir; promoting a partial copy would lose data). Kafka's metadata-driven rule (``recoverAbandonedFutureLogs``: the
future's dir is the one the metadata assigns) is :meth:`ReplicaMover.recover_abandoned_future_logs`.

Failures: an I/O error on the target aborts the move and takes the target dir offline (the source keeps serving);
one on the source takes the source offline and leaves the future intact on the target.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import threading
import time
import uuid as _uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.errors import ConfigError, KafkaStorageError, ResourceExhaustedError, io_cause
from kafkalog.limits import INT_MAX, LONG_MAX
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.manager.log_dir import LogDir
from kafkalog.manager.partition_lock import PartitionLock
from kafkalog.manager.registry import LogEntry, LogRegistry
from kafkalog.names import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    delete_dir_name,
    file_name,
    future_dir_name,
    parse_partition_dir,
    parse_segment_file_name,
    partition_dir_name,
)
from kafkalog.oserrors import OSErrorClass, classify, is_resource_exhaustion, resource_error

__all__ = ["MOVE_STEPS", "MoveProgress", "MoverHost", "ReplicaMover", "resolve_future_logs"]

_log = logging.getLogger(__name__)

MOVE_STEPS: tuple[str, ...] = (
    "future_created", "segments_copied", "future_opened", "caught_up", "appends_paused", "source_renamed",
    "future_renamed", "swapped",
)
#: A catch-up round that copies less than this goes on to the swap (the rest is copied with appends blocked).
SWAP_THRESHOLD_BYTES = 1 << 20
MAX_CATCH_UP_ROUNDS = 1000
CHUNK_BYTES = 4 << 20
MAX_RESTARTS = 5
_SEGMENT_FILES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_DIR_FILES = ("leader-epoch-checkpoint", "partition.metadata")


class _Stop(Exception):
    """The move ends without an error of its own (stopped, aborted, a dir went offline elsewhere)."""


class _Restart(Exception):
    """The source changed under the copy (truncation, retention past the copy): start again from scratch."""


class _SideFailed(Exception):
    """An I/O error attributed to one side of the move."""

    def __init__(self, side: str, cause: OSError) -> None:
        super().__init__(f"{side}: {cause}")
        self.side = side
        self.cause = cause
        self.log_dir: LogDir | None = None


class MoverHost(Protocol):
    """What a move needs from its manager besides the :class:`LogRegistry`: the manager's rules for opening a
    log, its failure funnel, its checkpoints and its sanity checker. The mover never sees the manager itself."""

    @property
    def stopped(self) -> bool: ...

    def ensure_running(self) -> None: ...

    def entry(self, topic: str, partition: int) -> LogEntry:
        """The partition's current entry (KafkaStorageError if offline, KeyError if unknown)."""
        ...

    def config_for(self, topic: str) -> LogConfig: ...

    def now(self) -> int: ...

    def open_log(self, path: str, config: LogConfig, **kwargs: Any) -> Log:
        """``Log.open`` with the manager's clock, handle cache and storage hooks."""
        ...

    def report(self, log_dir: str, cause: OSError, message: str) -> ResourceExhaustedError | None:
        """Hand an I/O failure to the failure channel (a process limit comes back, the dir stays online)."""
        ...

    def process_failures(self) -> None:
        """Take the reported dirs offline (never called with a partition lock held)."""
        ...

    def checkpoint(self, dirs: list[str] | None) -> None:
        """Rewrite the offset checkpoints of ``dirs`` (None: every live dir)."""
        ...

    def register_current(self, key: TopicPartition, log: Log, lock: PartitionLock) -> None:
        """``log`` is now the partition's current log: the sanity checker tracks it instead of the old one."""
        ...


@dataclass
class MoveProgress:
    """Observable state of one move (``LogManager.move_progress``)."""

    topic: str
    partition: int
    source_dir: str
    target_dir: str
    state: str = "starting"  # starting, copying, catching_up, swapping, completed, failed, aborted
    step: str | None = None
    bytes_copied: int = 0
    lag_offsets: int = 0
    restarts: int = 0
    pause_ms: float | None = None
    error: str | None = None
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _CopiedFile:
    path: str
    ino: int
    size: int
    mtime_ns: int


@dataclass
class _Move:
    key: TopicPartition
    target: LogDir
    progress: MoveProgress
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    copied: dict[int, _CopiedFile] = field(default_factory=dict)  # inactive segment base -> source .log stat
    last_batch: tuple[int, int] | None = None  # (base offset, crc) of the last batch appended to the future
    done: threading.Event = field(default_factory=threading.Event)


def _copy_fd(src_fd: int, dst_fd: int, size: int, on_bytes: Callable[[int], None]) -> None:
    """Copy ``size`` bytes from the start of ``src_fd`` (copy_file_range: in-kernel, reflink where the fs can)."""
    off_in = 0
    use_cfr = hasattr(os, "copy_file_range")
    while off_in < size:
        n = 0
        if use_cfr:
            try:
                n = os.copy_file_range(src_fd, dst_fd, min(size - off_in, 1 << 30), off_in, off_in)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                use_cfr = False
                continue
        else:
            buf = os.pread(src_fd, min(size - off_in, 8 << 20), off_in)
            n = os.pwrite(dst_fd, buf, off_in) if buf else 0
        if n == 0:
            break  # the source is shorter than recorded: the verification step notices
        off_in += n
        on_bytes(n)


def _future_config(cfg: LogConfig) -> LogConfig:
    """The future log rolls only where the source rolled (explicitly), never on its own size or age."""
    return dataclasses.replace(cfg, segment_bytes=INT_MAX, segment_ms=LONG_MAX, segment_jitter_ms=0)


class ReplicaMover:
    """Runs and tracks the KIP-113 moves of one LogManager (one daemon thread per move)."""

    def __init__(self, registry: LogRegistry, host: MoverHost) -> None:
        self._reg = registry
        self._host = host
        self._lock = threading.Lock()
        self._moves: dict[TopicPartition, _Move] = {}
        #: Test hook: ``step_hook(key, step)`` is called after each step of :data:`MOVE_STEPS`.
        self.step_hook: Callable[[TopicPartition, str], None] | None = None
        self.swap_threshold_bytes = SWAP_THRESHOLD_BYTES

    # --- public entry points -------------------------------------------------------------------------------------

    def start(self, topic: str, partition: int, target_dir: str) -> MoveProgress:
        self._host.ensure_running()
        key = (topic, partition)
        try:
            target = self._reg.dir(target_dir)
        except KeyError as e:
            raise ConfigError(f"{target_dir} is not one of this manager's log dirs") from e
        if not target.online:
            raise KafkaStorageError(f"log dir {target.path} is offline")
        e = self._host.entry(topic, partition)
        with self._lock:
            running = self._moves.get(key)
            if running is not None and running.thread is not None and running.thread.is_alive():
                if running.target is target:
                    return running.progress
                running.stop.set()
            else:
                running = None
        if running is not None:
            running.done.wait()
        fe = self._reg.get(key, is_future=True)
        if fe is not None and fe.dir is not target:
            self._discard_future(key, fe)  # Kafka: a new destination drops the old future
        progress = MoveProgress(topic, partition, e.dir.path, target.path)
        move = _Move(key, target, progress)
        if e.dir is target:  # moving to where it already is: nothing to copy (any future was dropped above)
            progress.state, progress.step, progress.finished_at = "completed", "swapped", time.monotonic()
            move.done.set()
            with self._lock:
                self._moves[key] = move
            return progress
        move.thread = threading.Thread(target=self._run, args=(move,), daemon=True,
                                       name=f"kafkalog-alter-log-dirs-{topic}-{partition}")
        with self._lock:
            self._moves[key] = move
        move.thread.start()
        return progress

    def progress(self, topic: str, partition: int) -> MoveProgress | None:
        with self._lock:
            mv = self._moves.get((topic, partition))
        if mv is None:
            return None
        self._update_lag(mv)
        return mv.progress

    def wait(self, topic: str, partition: int, timeout: float | None = None) -> MoveProgress:
        with self._lock:
            mv = self._moves[(topic, partition)]
        mv.done.wait(timeout)
        return mv.progress

    def abort(self, topic: str, partition: int) -> None:
        """Stop a running move and drop its future log (renamed ``-delete``, removed asynchronously)."""
        key = (topic, partition)
        with self._lock:
            mv = self._moves.get(key)
        if mv is not None:
            mv.stop.set()
            mv.done.wait()
            if mv.progress.state not in ("completed", "failed"):
                mv.progress.state = "aborted"
        fe = self._reg.get(key, is_future=True)
        if fe is not None:
            self._discard_future(key, fe)

    def stop_all(self, timeout: float | None = 30.0) -> None:
        """Stop every move (shutdown): a swap in progress finishes; futures stay on disk, resumable."""
        with self._lock:
            moves = list(self._moves.values())
        for mv in moves:
            mv.stop.set()
        for mv in moves:
            if mv.thread is not None:
                mv.thread.join(timeout)

    # --- the move ------------------------------------------------------------------------------------------------

    def _hook(self, mv: _Move, step: str) -> None:
        mv.progress.step = step
        if self.step_hook is not None:
            self.step_hook(mv.key, step)

    def _run(self, mv: _Move) -> None:
        p = mv.progress
        try:
            while True:
                try:
                    self._move_once(mv)
                    break
                except _Restart as r:
                    p.restarts += 1
                    _log.warning("move of %s-%d restarts: %s", mv.key[0], mv.key[1], r)
                    fe = self._reg.get(mv.key, is_future=True)
                    if fe is not None:
                        self._discard_future(mv.key, fe)
                    if p.restarts > MAX_RESTARTS:
                        raise KafkaStorageError(f"the source kept changing under the copy ({r})") from None
            p.state = "completed"
        except _Stop as s:
            if p.state not in ("failed",):
                p.state = "aborted"
            p.error = p.error or str(s) or None
        except _SideFailed as f:
            p.state = "failed" if f.side == "target" else "aborted"
            p.error = f"{f.side} dir failed: {f.cause}"
        except BaseException as exc:  # noqa: BLE001 - recorded; a move must never kill the process
            p.state = "failed"
            p.error = f"{type(exc).__name__}: {exc}"
            _log.exception("move of %s-%d failed", mv.key[0], mv.key[1])
        finally:
            p.finished_at = time.monotonic()
            mv.done.set()

    def _source(self, mv: _Move) -> LogEntry:
        """The source entry, or _Stop if it is gone (deleted, offline) or already in the target."""
        e = self._reg.get(mv.key)
        if e is None or e.closed or not e.dir.online:
            raise _Stop("the source log is gone (deleted or its dir is offline)")
        return e

    def _future(self, mv: _Move) -> LogEntry:
        fe = self._reg.get(mv.key, is_future=True)
        if fe is None or fe.closed or not mv.target.online:
            mv.progress.state = "failed"
            raise _Stop("the future log is gone (its dir went offline)")
        return fe

    def _check_stop(self, mv: _Move) -> None:
        if mv.stop.is_set() or self._host.stopped:
            raise _Stop("stopped")

    def _move_once(self, mv: _Move) -> None:
        p = mv.progress
        e = self._source(mv)
        fe = self._reg.get(mv.key, is_future=True)
        if fe is None:
            p.state = "copying"
            self._create_future(mv, e)
        else:
            self._resume(mv, e, fe)
        p.state = "catching_up"
        rounds = 0
        while True:
            self._check_stop(mv)
            copied = self._copy_round(mv, limit=None)
            rounds += 1
            if copied < self.swap_threshold_bytes or rounds >= MAX_CATCH_UP_ROUNDS:
                break
        self._hook(mv, "caught_up")
        self._check_stop(mv)
        p.state = "swapping"
        self._swap(mv)

    # --- phase 1: the copy of the inactive segments --------------------------------------------------------------

    def _create_future(self, mv: _Move, e: LogEntry) -> None:
        topic, partition = mv.key
        uid = _uuid.uuid4().hex
        fpath = os.path.join(mv.target.path, future_dir_name(topic, partition, unique_id=uid))
        # (name, inode, size) of each source file, taken under the lock; the copies reopen them one at a time (a
        # partition of many segments would otherwise hold a descriptor per file: the handle cache's whole point)
        files: list[tuple[str, int, int]] = []
        mv.copied.clear()
        failure: OSError | None = None
        with e.lock:
            if e.closed:
                raise _Stop("the source log is closed")
            src = e.log
            src_dir = str(src.dir)
            try:
                active_base = src.active_segment.base_offset
                log_start = src.log_start_offset
                inactive = [s for s in src.segments if s.base_offset < active_base]
                names = [file_name("", s.base_offset, sfx).name for s in inactive for sfx in _SEGMENT_FILES]
                for entry in os.scandir(src.dir):
                    parsed = parse_segment_file_name(entry.name)
                    if parsed is not None and parsed.suffix == SNAPSHOT_SUFFIX and not parsed.temp_suffix \
                            and parsed.offset <= active_base:
                        names.append(entry.name)
                names.extend(_DIR_FILES)
                for name in names:
                    try:
                        st = os.lstat(os.path.join(src.dir, name))
                    except FileNotFoundError:
                        continue  # e.g. no .txnindex, no partition.metadata
                    files.append((name, st.st_ino, st.st_size))
                    parsed = parse_segment_file_name(name)
                    if parsed is not None and parsed.suffix == LOG_SUFFIX:
                        mv.copied[parsed.offset] = _CopiedFile(os.path.join(src.dir, name), st.st_ino, st.st_size,
                                                               st.st_mtime_ns)
            except OSError as exc:
                failure = exc
        if failure is not None:
            self._fail(e.dir, failure, "source")
        try:
            os.mkdir(fpath)
            fsync_dir(mv.target.path)
        except OSError as exc:
            self._fail(mv.target, exc, "target")
        self._hook(mv, "future_created")
        for name, ino, size in files:
            self._check_stop(mv)
            fd = self._open_source(e, os.path.join(src_dir, name), ino)
            try:
                self._copy_file(mv, e, fd, os.path.join(fpath, name), size)
            finally:
                os.close(fd)
        try:
            fsync_dir(fpath)
        except OSError as exc:
            self._fail(mv.target, exc, "target")
        self._hook(mv, "segments_copied")
        self._open_future(mv, fpath, active_base, log_start, bool(inactive))

    def _open_source(self, e: LogEntry, path: str, ino: int) -> int:
        """Open a source file listed under the lock; gone or replaced since (retention, truncation): restart."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise _Restart(f"{path} went away during the copy") from None
        except OSError as exc:
            self._fail(e.dir, exc, "source")
        if os.fstat(fd).st_ino != ino:
            os.close(fd)
            raise _Restart(f"{path} was replaced during the copy")
        return fd

    def _copy_file(self, mv: _Move, e: LogEntry, src_fd: int, dest: str, size: int) -> None:
        def count(n: int) -> None:
            mv.progress.bytes_copied += n

        try:
            dst_fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            self._fail(mv.target, exc, "target")
        try:
            try:
                _copy_fd(src_fd, dst_fd, size, count)
                os.fsync(dst_fd)
            except OSError as exc:
                # copy_file_range cannot say which side failed: a full/read-only target is the target; otherwise
                # probe the source descriptor.
                side = "target"
                if classify(exc) is not OSErrorClass.RESOURCE and exc.errno not in (errno.ENOSPC, errno.EDQUOT,
                                                                                    errno.EROFS):
                    try:
                        os.pread(src_fd, 1, 0)
                    except OSError:
                        side = "source"
                self._fail(e.dir if side == "source" else mv.target, exc, side)
        finally:
            os.close(dst_fd)

    def _open_future(self, mv: _Move, fpath: str, active_base: int, log_start: int, has_segments: bool) -> None:
        cfg = _future_config(self._host.config_for(mv.key[0]))
        try:
            if has_segments:
                log = self._host.open_log(fpath, cfg, log_start_offset=log_start, recovery_point=active_base,
                               clean_shutdown=True)
                if log.log_end_offset <= active_base and log.active_segment.base_offset < active_base:
                    log.roll(active_base)
            else:
                log = self._host.open_log(fpath, cfg, log_start_offset=active_base, recovery_point=active_base,
                               clean_shutdown=True)
            log.flush()
        except (OSError, KafkaStorageError) as exc:
            cause = io_cause(exc)
            if cause is not None:
                self._fail(mv.target, cause, "target")
            raise
        fe = LogEntry(mv.key, log, mv.target, is_future=True, last_flush_ms=self._host.now())
        if not self._reg.add_future(fe):
            fe.close_handles()
            raise _Stop("the target dir went offline")
        self._host.checkpoint([mv.target.path])
        self._hook(mv, "future_opened")

    def _resume(self, mv: _Move, e: LogEntry, fe: LogEntry) -> None:
        """A future left by an earlier move (or a restart): cut it back to what the source still has."""
        with e.lock, fe.lock:
            src, fut = e.log, fe.log
            if fut.log_end_offset > src.log_end_offset:
                fut.truncate_to(src.log_end_offset)  # the source lost an unflushed tail in a crash
            if fut.log_end_offset < src.log_start_offset:
                raise _Restart("the source's retention passed the future log")
            mv.copied.clear()
            mv.last_batch = None
            if fut.log_end_offset > fut.log_start_offset:
                last = self._last_batch(fut)
                if last is not None:
                    mv.last_batch = (last.base_offset, last.crc)
        self._verify(mv, e, fe)

    @staticmethod
    def _last_batch(log: Log) -> Any:
        seg = log.segments.floor(log.log_end_offset - 1)
        while seg is not None:
            batches = list(seg.batches())
            if batches:
                return batches[-1]
            seg = log.segments.floor(seg.base_offset - 1) if seg.base_offset > 0 else None
        return None

    # --- phase 2: catching up ------------------------------------------------------------------------------------

    def _verify(self, mv: _Move, e: LogEntry, fe: LogEntry) -> None:
        """The future is still a prefix of the source (caller may hold the locks; takes the source lock)."""
        with e.lock:
            if e.closed:
                raise _Stop("the source log is closed")
            src = e.log
            fut = fe.log
            if fut.log_end_offset > src.log_end_offset:
                raise _Restart("the source was truncated below the copy")
            first = src.segments.first
            for base, cf in mv.copied.items():
                if base in src.segments:
                    try:
                        st = os.stat(cf.path)
                    except FileNotFoundError:
                        raise _Restart(f"segment {base} changed under the copy") from None
                    if (st.st_ino, st.st_size, st.st_mtime_ns) != (cf.ino, cf.size, cf.mtime_ns):
                        raise _Restart(f"segment {base} changed under the copy")
                elif first is None or base >= first.base_offset:
                    raise _Restart(f"segment {base} was removed by a truncation")
            if mv.last_batch is not None:
                base, crc = mv.last_batch
                if base < src.log_start_offset:
                    if fut.log_end_offset < src.log_start_offset:
                        raise _Restart("the source's retention passed the copy")
                else:
                    got = src.read(base, 1)
                    if not got or got[0].base_offset != base or got[0].crc != crc:
                        raise _Restart("the source diverged from the copy (truncated and rewritten)")

    def _copy_round(self, mv: _Move, *, limit: int | None, locked: bool = False) -> int:
        """Append the source's batches past the future's end; returns the bytes copied. With ``locked`` the caller
        holds the source lock (the final round), so the source cannot move."""
        e = self._source(mv)
        fe = self._future(mv)
        self._verify(mv, e, fe)
        total = 0
        target_end = None
        while True:
            if not locked:
                self._check_stop(mv)
            failure: tuple[LogDir, OSError, str] | None = None
            with e.lock:
                if e.closed:
                    raise _Stop("the source log is closed")
                src = e.log
                if target_end is None:
                    target_end = src.log_end_offset
                start = fe.log.log_end_offset
                if start >= min(target_end, src.log_end_offset):
                    break
                try:
                    seg_base, batches = self._read_source(src, start)
                    parts: list[tuple[int, bytes, int, int]] = []  # (segment base, bytes, last base, last crc)
                    if batches:
                        last = batches[-1]
                        parts.append((seg_base, b"".join([b.raw for b in batches]), last.base_offset, last.crc))
                except OSError as exc:
                    failure = (e.dir, exc, "source")
            if failure is not None:
                self._fail(*failure, report=not locked)
            if not parts:
                break
            with fe.lock:
                if fe.closed:
                    raise _Stop("the future log is closed (its dir went offline)")
                fut = fe.log
                try:
                    for seg_base, data, last_base, last_crc in parts:
                        if fut.active_segment.base_offset < seg_base:
                            fut.roll(seg_base)
                        fut.append_as_follower(data)
                        mv.last_batch = (last_base, last_crc)
                        total += len(data)
                        mv.progress.bytes_copied += len(data)
                except (OSError, KafkaStorageError) as exc:
                    cause = io_cause(exc)
                    if cause is None:
                        raise
                    failure = (mv.target, cause, "target")
            if failure is not None:
                self._fail(*failure, report=not locked)
            if limit is not None and total >= limit:
                break
        self._update_lag(mv)
        return total

    @staticmethod
    def _read_source(src: Log, start: int) -> tuple[int, list[Any]]:
        """(segment base, whole batches of that one segment from ``start``); caller holds the partition lock. From the
        segments, not through ``Log.read``: batches below the log start still belong in a byte-identical copy."""
        seg = src.segments.floor(start)
        if seg is None:
            raise _Restart(f"the source's first segment is past the copy's end {start}")
        active = src.active_segment
        active_size = active.size
        while seg is not None:
            got = seg.read(start, CHUNK_BYTES, max_position=active_size if seg is active else None)
            if got:
                return seg.base_offset, got
            seg = src.segments.higher(seg.base_offset)
        return -1, []

    def _update_lag(self, mv: _Move) -> None:
        with self._reg.lock:
            e = self._reg.current.get(mv.key)
            fe = self._reg.future.get(mv.key)
        if mv.progress.state == "completed":
            mv.progress.lag_offsets = 0
        elif e is not None and fe is not None:
            mv.progress.lag_offsets = max(0, e.log.log_end_offset - fe.log.log_end_offset)

    # --- phase 3: the swap ---------------------------------------------------------------------------------------

    def _swap(self, mv: _Move) -> None:
        topic, partition = mv.key
        e = self._source(mv)
        fe = self._future(mv)
        src_dir, tgt_dir = e.dir, mv.target
        fpath = str(fe.log.dir)
        uid = parse_partition_dir(os.path.basename(fpath)).uuid
        cur_name = partition_dir_name(topic, partition)
        src_path = os.path.join(src_dir.path, cur_name)
        del_path = os.path.join(src_dir.path, delete_dir_name(topic, partition, unique_id=uid))
        new_path = os.path.join(tgt_dir.path, cur_name)
        failures: list[tuple[LogDir, OSError, str]] = []
        t0 = time.perf_counter()
        with e.lock, fe.lock:
            if e.closed or fe.closed:
                raise _Stop("a log went offline before the swap")
            src, fut = e.log, fe.log
            try:
                self._swap_locked(mv, e, fe, src, fut, src_path, del_path, fpath, new_path, failures)
            except _SideFailed as f:  # from the final copy round: reported below, after the locks
                failures.append((f.log_dir, f.cause, f.side))
            finally:
                mv.progress.pause_ms = (time.perf_counter() - t0) * 1000
        if failures:
            exhausted = None
            for d, exc, side in failures:
                exhausted = self._host.report(d.path, exc, f"I/O error while moving {topic}-{partition} ({side})") \
                    or exhausted
            self._host.process_failures()
            _d, exc, side = failures[0]
            if exhausted is not None and len(failures) == 1:
                raise exhausted from exc
            raise _SideFailed(side, exc)
        self._host.checkpoint([src_dir.path, tgt_dir.path])
        mv.progress.lag_offsets = 0
        self._hook(mv, "swapped")
        _log.info("moved %s-%d from %s to %s", topic, partition, src_dir.path, tgt_dir.path)

    def _swap_locked(self, mv: _Move, e: LogEntry, fe: LogEntry, src: Log, fut: Log, src_path: str, del_path: str,
                     fpath: str, new_path: str, failures: list[tuple[LogDir, OSError, str]]) -> None:
        """Steps 5-8 with appends blocked (both partition locks held). I/O failures are collected, not raised, so
        they are reported after the locks are released."""
        src_dir, tgt_dir = e.dir, mv.target
        # 5. copy the rest, align the log start, flush and close both.
        self._copy_round(mv, limit=None, locked=True)
        try:
            if src.log_start_offset > fut.log_start_offset:
                fut.maybe_increment_log_start_offset(src.log_start_offset)
                fut.delete_old_segments()
            fut.flush()
            fut.close()
        except OSError as exc:
            failures.append((tgt_dir, exc, "target"))
            return
        hw = getattr(src, "_high_watermark", None)
        log_start, end = src.log_start_offset, src.log_end_offset
        try:
            src.flush()
            src.close()
        except OSError as exc:
            failures.append((src_dir, exc, "source"))
            self._reopen_future(mv, fe, fpath, end)
            return
        self._hook(mv, "appends_paused")
        # 6. the source leaves first: there is never a second current log on disk.
        try:
            os.rename(src_path, del_path)
            fsync_dir(src_dir.path)
        except OSError as exc:
            failures.append((src_dir, exc, "source"))
            self._reopen_future(mv, fe, fpath, end)
            return
        self._hook(mv, "source_renamed")
        # 7. the future becomes the current log.
        try:
            os.rename(fpath, new_path)
            fsync_dir(tgt_dir.path)
        except OSError as exc:
            failures.append((tgt_dir, exc, "target"))
            self._restore_source(e, del_path, src_path, log_start, end, failures)
            return
        self._hook(mv, "future_renamed")
        # 8. open it as the current log and switch the manager's maps.
        try:
            new_log = self._host.open_log(new_path, self._host.config_for(mv.key[0]), recovery_point=end, log_start_offset=log_start,
                               clean_shutdown=True)
            if hw is not None:
                new_log.update_high_watermark(hw)
        except OSError as exc:
            e.dir = tgt_dir  # the current log now lives in the target, which goes offline with it
            failures.append((tgt_dir, exc, "target"))
            return
        src.mark_moved(new_path)
        fut.mark_moved(new_path)  # the future handle too: its partition lives on as the current log
        with self._reg.lock:
            e.log = new_log
            e.dir = tgt_dir
            e.closed = False
            fe.closed = True
            self._reg.drop_future(mv.key, fe)
            self._reg.queue_delete(src_dir.path, del_path)
        self._host.register_current(mv.key, new_log, e.lock)

    def _reopen_future(self, mv: _Move, fe: LogEntry, fpath: str, end: int) -> None:
        """The source failed before its rename: keep the (complete) future as a future, still loaded."""
        try:
            fe.log = self._host.open_log(fpath, _future_config(self._host.config_for(mv.key[0])), clean_shutdown=True,
                                         recovery_point=end)
        except OSError as exc:
            self._host.report(mv.target.path, exc, "I/O error reopening a future log")

    def _restore_source(self, e: LogEntry, del_path: str, src_path: str, log_start: int, end: int,
                        failures: list[tuple[LogDir, OSError, str]]) -> None:
        """The target failed after the source was renamed: put the source back, it stays the current log."""
        try:
            os.rename(del_path, src_path)
            fsync_dir(os.path.dirname(src_path))
            e.log = self._host.open_log(src_path, self._host.config_for(e.key[0]), log_start_offset=log_start,
                                        recovery_point=end, clean_shutdown=True)
            e.closed = False
        except OSError as exc:
            failures.append((e.dir, exc, "source"))

    # --- helpers -------------------------------------------------------------------------------------------------

    def _fail(self, d: LogDir, cause: OSError, side: str, *, report: bool = True) -> None:
        """Take ``d`` offline (through the channel) and end the move as failed on that side. With partition locks
        held (``report=False``) the caller reports after releasing them: offline handling takes those locks."""
        if is_resource_exhaustion(cause):
            # a process limit belongs to neither side: no dir goes offline, the move fails retriably
            raise resource_error(cause, f"moving a replica ({side})") from cause
        if report:
            self._host.report(d.path, cause, f"I/O error while moving a replica ({side})")
            self._host.process_failures()
        err = _SideFailed(side, cause)
        err.log_dir = d
        raise err

    def _discard_future(self, key: TopicPartition, fe: LogEntry) -> None:
        """Close a future log, rename it ``-delete`` and queue it for removal (Kafka's abort of a move)."""
        failure: OSError | None = None
        with fe.lock:
            if fe.closed:
                return
            fe.closed = True
            fe.close_handles()
            path = str(fe.log.dir)
            parsed = parse_partition_dir(os.path.basename(path))
            target = os.path.join(fe.dir.path, delete_dir_name(key[0], key[1], unique_id=parsed.uuid))
            try:
                os.rename(path, target)
                fsync_dir(fe.dir.path)
            except OSError as exc:
                failure = exc
        with self._reg.lock:
            self._reg.drop_future(key, fe)
            if failure is None:
                self._reg.queue_delete(fe.dir.path, target)
        if failure is not None:
            self._host.report(fe.dir.path, failure, f"I/O error dropping the future log of {key[0]}-{key[1]}")
            self._host.process_failures()
            return
        self._host.checkpoint([fe.dir.path])

    def promote(self, key: TopicPartition, fe: LogEntry) -> Log:
        """Make a loaded future log the current log: the current one (if any) is renamed ``-delete`` first."""
        e = self._reg.get(key)
        if e is not None:
            with e.lock:
                e.log.close()
                parsed_uid = parse_partition_dir(os.path.basename(str(fe.log.dir))).uuid
                target = os.path.join(e.dir.path, delete_dir_name(key[0], key[1], unique_id=parsed_uid))
                os.rename(str(e.log.dir), target)
                fsync_dir(e.dir.path)
                e.closed = True
                with self._reg.lock:
                    del self._reg.current[key]
                    self._reg.queue_delete(e.dir.path, target)
        with fe.lock:
            log = fe.log
            log_start, recovery = log.log_start_offset, log.recovery_point
            log.close()
            new_path = os.path.join(fe.dir.path, partition_dir_name(*key))
            os.rename(str(log.dir), new_path)
            fsync_dir(fe.dir.path)
            new_log = self._host.open_log(new_path, self._host.config_for(key[0]), recovery_point=recovery,
                                          log_start_offset=log_start, clean_shutdown=True)
            self._reg.promote_future(key, fe, new_log)
        self._host.register_current(key, new_log, fe.lock)
        _log.warning("promoted the future log of %s-%d in %s to the current log", key[0], key[1], fe.dir.path)
        return new_log

    def recover_abandoned_future_logs(self, expected: Mapping[TopicPartition, str]) -> list[TopicPartition]:
        """Kafka's ``recoverAbandonedFutureLogs``: a future log whose dir is the one the metadata assigns the
        replica to is promoted (the move had been accepted by the controller); returns the promoted partitions."""
        futures = self._reg.futures()
        done = []
        for key, fe in futures:
            if fe.dir.directory_id is not None and expected.get(key) == fe.dir.directory_id:
                with self._lock:
                    mv = self._moves.get(key)
                if mv is not None and not mv.done.is_set():
                    continue  # a live move owns it
                try:
                    self.promote(key, fe)
                except OSError as exc:
                    self._host.report(fe.dir.path, exc, f"I/O error promoting the future log of {key[0]}-{key[1]}")
                    self._host.process_failures()
                    continue
                self._host.checkpoint(None)
                done.append(key)
        return done

    def resolve_future_logs(self) -> list[TopicPartition]:
        """See :func:`resolve_future_logs`."""
        reg = self._reg
        with reg.lock:
            futures = [(k, fe) for k, fe in reg.future.items() if k not in reg.current]
            deletes = list(reg.to_delete)
        promoted = []
        for key, fe in futures:
            uid = parse_partition_dir(os.path.basename(str(fe.log.dir))).uuid
            paired = False
            for log_dir, path, _ in deletes:
                try:
                    parsed = parse_partition_dir(os.path.basename(path))
                except ValueError:
                    continue
                if parsed.uuid == uid and (parsed.topic, parsed.partition) == key and reg.dir(log_dir).online:
                    paired = True
            if not paired:
                _log.warning("future log %s has no current log and no paired -delete dir: left as a future log",
                             fe.log.dir)
                continue
            try:
                self.promote(key, fe)
            except OSError as exc:
                self._host.report(fe.dir.path, exc, f"I/O error promoting the future log of {key[0]}-{key[1]}")
                self._host.process_failures()
                continue
            promoted.append(key)
        return promoted



def resolve_future_logs(mover: ReplicaMover) -> list[TopicPartition]:
    """At startup: promote each future log whose current log is gone and whose paired ``-delete`` (same uuid) is
    present, i.e. a move that crashed between its two renames. Returns the promoted partitions."""
    return mover.resolve_future_logs()
