"""The copying side of a KIP-113 move (Kafka's ReplicaAlterLogDirsThread): the future log is built from the
source's inactive segments (copied file by file with ``copy_file_range``) and caught up with the active segment's
batches, while appends go on at the source. ``replica_mover.py`` runs the move and swaps the logs.

A source changed under the copy (truncation, retention past it, a file replaced) raises :class:`RestartMove`; an
I/O error is attributed to one side (:class:`SideFailed`): the target dir goes offline and the move fails, or the
source dir goes offline and the future stays intact on the target.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
import time
import uuid as _uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.errors import KafkaStorageError, ResourceExhaustedError, io_cause
from kafkalog.io.oserrors import OSErrorClass, classify, is_resource_exhaustion, resource_error
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
    parse_segment_file_name,
)

__all__ = [
    "CHUNK_BYTES",
    "CopiedFile",
    "Move",
    "MoveCopier",
    "MoveProgress",
    "MoverHost",
    "RestartMove",
    "SideFailed",
    "StopMove",
    "copy_fd",
    "future_config",
]

CHUNK_BYTES = 4 << 20
_SEGMENT_FILES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_DIR_FILES = ("leader-epoch-checkpoint", "partition.metadata")


class StopMove(Exception):
    """The move ends without an error of its own (stopped, aborted, a dir went offline elsewhere)."""


class RestartMove(Exception):
    """The source changed under the copy (truncation, retention past the copy): start again from scratch."""


class SideFailed(Exception):
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
class CopiedFile:
    path: str
    ino: int
    size: int
    mtime_ns: int


@dataclass
class Move:
    key: TopicPartition
    target: LogDir
    progress: MoveProgress
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    copied: dict[int, CopiedFile] = field(default_factory=dict)  # inactive segment base -> source .log stat
    last_batch: tuple[int, int] | None = None  # (base offset, crc) of the last batch appended to the future
    done: threading.Event = field(default_factory=threading.Event)


def copy_fd(src_fd: int, dst_fd: int, size: int, on_bytes: Callable[[int], None]) -> None:
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


def future_config(cfg: LogConfig) -> LogConfig:
    """The future log rolls only where the source rolled (explicitly), never on its own size or age."""
    return dataclasses.replace(cfg, segment_bytes=INT_MAX, segment_ms=LONG_MAX, segment_jitter_ms=0)


class MoveCopier:
    """Phases 1 and 2 of a move over a registry (see the module docstring); ``on_step(move, step)`` is told each
    step reached (``future_created``, ``segments_copied``, ``future_opened``)."""

    def __init__(self, registry: LogRegistry, host: MoverHost, on_step: Callable[[Move, str], None]) -> None:
        self._reg = registry
        self._host = host
        self._on_step = on_step

    def source(self, mv: Move) -> LogEntry:
        """The source entry, or StopMove if it is gone (deleted, offline) or already in the target."""
        e = self._reg.get(mv.key)
        if e is None or e.closed or not e.dir.online:
            raise StopMove("the source log is gone (deleted or its dir is offline)")
        return e

    def future(self, mv: Move) -> LogEntry:
        fe = self._reg.get(mv.key, is_future=True)
        if fe is None or fe.closed or not mv.target.online:
            mv.progress.state = "failed"
            raise StopMove("the future log is gone (its dir went offline)")
        return fe

    def check_stop(self, mv: Move) -> None:
        if mv.stop.is_set() or self._host.stopped:
            raise StopMove("stopped")

    def fail(self, d: LogDir, cause: OSError, side: str, *, report: bool = True) -> None:
        """Take ``d`` offline (through the channel) and end the move as failed on that side. With partition locks
        held (``report=False``) the caller reports after releasing them: offline handling takes those locks."""
        if is_resource_exhaustion(cause):
            # a process limit belongs to neither side: no dir goes offline, the move fails retriably
            raise resource_error(cause, f"moving a replica ({side})") from cause
        if report:
            self._host.report(d.path, cause, f"I/O error while moving a replica ({side})")
            self._host.process_failures()
        err = SideFailed(side, cause)
        err.log_dir = d
        raise err

    # --- phase 1: the copy of the inactive segments --------------------------------------------------------------

    def create_future(self, mv: Move, e: LogEntry) -> None:
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
                raise StopMove("the source log is closed")
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
                        mv.copied[parsed.offset] = CopiedFile(os.path.join(src.dir, name), st.st_ino, st.st_size,
                                                               st.st_mtime_ns)
            except OSError as exc:
                failure = exc
        if failure is not None:
            self.fail(e.dir, failure, "source")
        try:
            os.mkdir(fpath)
            fsync_dir(mv.target.path)
        except OSError as exc:
            self.fail(mv.target, exc, "target")
        registered = False
        try:
            self._on_step(mv, "future_created")
            for name, ino, size in files:
                self.check_stop(mv)
                fd = self._open_source(e, os.path.join(src_dir, name), ino)
                try:
                    self._copy_file(mv, e, fd, os.path.join(fpath, name), size)
                finally:
                    os.close(fd)
            try:
                fsync_dir(fpath)
            except OSError as exc:
                self.fail(mv.target, exc, "target")
            self._on_step(mv, "segments_copied")
            registered = self._open_future(mv, fpath, active_base, log_start, bool(inactive))
        finally:
            if not registered:
                self._drop_partial(mv, fpath)
        self._host.checkpoint([mv.target.path])
        self._on_step(mv, "future_opened")

    def _drop_partial(self, mv: Move, fpath: str) -> None:
        """A copy that ends before its future is registered (restart, stop, failure) takes its half-made dir with
        it: renamed ``-delete`` (one atomic step, so a crash never leaves it looking like a future) and queued for
        removal. Left as it is, the next attempt would make a second future of the partition, and a half-copied
        file in it would load as data after a clean shutdown. An offline target keeps it: the dir is not ours to
        touch any more."""
        if not mv.target.online:
            return
        gone = os.path.join(mv.target.path, delete_dir_name(*mv.key))
        try:
            os.rename(fpath, gone)
            fsync_dir(mv.target.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            if not is_resource_exhaustion(exc):
                self._host.report(mv.target.path, exc, "I/O error dropping a partial move copy")
                self._host.process_failures()
            return
        self._reg.queue_delete(mv.target.path, gone)

    def _open_source(self, e: LogEntry, path: str, ino: int) -> int:
        """Open a source file listed under the lock; gone or replaced since (retention, truncation): restart."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise RestartMove(f"{path} went away during the copy") from None
        except OSError as exc:
            self.fail(e.dir, exc, "source")
        if os.fstat(fd).st_ino != ino:
            os.close(fd)
            raise RestartMove(f"{path} was replaced during the copy")
        return fd

    def _copy_file(self, mv: Move, e: LogEntry, src_fd: int, dest: str, size: int) -> None:
        def count(n: int) -> None:
            mv.progress.bytes_copied += n

        try:
            dst_fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            self.fail(mv.target, exc, "target")
        try:
            try:
                copy_fd(src_fd, dst_fd, size, count)
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
                self.fail(e.dir if side == "source" else mv.target, exc, side)
        finally:
            os.close(dst_fd)

    def _open_future(self, mv: Move, fpath: str, active_base: int, log_start: int, has_segments: bool) -> bool:
        """Open the copy as the partition's future log and register it (returns True once registered); from then
        on it is a future like any other (resumable, dropped by ``abort``)."""
        cfg = future_config(self._host.config_for(mv.key[0]))
        log = None
        try:
            log = self._host.open_log(fpath, cfg, log_start_offset=log_start if has_segments else active_base,
                                      recovery_point=active_base, clean_shutdown=True)
            if has_segments and log.log_end_offset <= active_base and log.active_segment.base_offset < active_base:
                log.roll(active_base)
            log.flush()
        except (OSError, KafkaStorageError) as exc:
            if log is not None:  # opened, then the roll or flush failed: nothing else holds its handles
                log.close_handlers()
            cause = io_cause(exc)
            if cause is not None:
                self.fail(mv.target, cause, "target")
            raise
        fe = LogEntry(mv.key, log, mv.target, is_future=True, last_flush_ms=self._host.now())
        if not self._reg.add_future(fe):
            fe.close_handles()
            raise StopMove("the target dir went offline")
        return True

    def resume(self, mv: Move, e: LogEntry, fe: LogEntry) -> None:
        """A future left by an earlier move (or a restart): cut it back to what the source still has."""
        with e.lock, fe.lock:
            src, fut = e.log, fe.log
            if fut.log_end_offset > src.log_end_offset:
                fut.truncate_to(src.log_end_offset)  # the source lost an unflushed tail in a crash
            if fut.log_end_offset < src.log_start_offset:
                raise RestartMove("the source's retention passed the future log")
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

    def _verify(self, mv: Move, e: LogEntry, fe: LogEntry) -> None:
        """The future is still a prefix of the source (caller may hold the locks; takes the source lock)."""
        with e.lock:
            if e.closed:
                raise StopMove("the source log is closed")
            src = e.log
            fut = fe.log
            if fut.log_end_offset > src.log_end_offset:
                raise RestartMove("the source was truncated below the copy")
            first = src.segments.first
            for base, cf in mv.copied.items():
                if base in src.segments:
                    try:
                        st = os.stat(cf.path)
                    except FileNotFoundError:
                        raise RestartMove(f"segment {base} changed under the copy") from None
                    if (st.st_ino, st.st_size, st.st_mtime_ns) != (cf.ino, cf.size, cf.mtime_ns):
                        raise RestartMove(f"segment {base} changed under the copy")
                elif first is None or base >= first.base_offset:
                    raise RestartMove(f"segment {base} was removed by a truncation")
            if mv.last_batch is not None:
                base, crc = mv.last_batch
                if base < src.log_start_offset:
                    if fut.log_end_offset < src.log_start_offset:
                        raise RestartMove("the source's retention passed the copy")
                else:
                    got = src.read(base, 1)
                    if not got or got[0].base_offset != base or got[0].crc != crc:
                        raise RestartMove("the source diverged from the copy (truncated and rewritten)")

    def copy_round(self, mv: Move, *, limit: int | None, locked: bool = False) -> int:
        """Append the source's batches past the future's end; returns the bytes copied. With ``locked`` the caller
        holds the source lock (the final round), so the source cannot move."""
        e = self.source(mv)
        fe = self.future(mv)
        self._verify(mv, e, fe)
        total = 0
        target_end = None
        while True:
            if not locked:
                self.check_stop(mv)
            failure: tuple[LogDir, OSError, str] | None = None
            with e.lock:
                if e.closed:
                    raise StopMove("the source log is closed")
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
                self.fail(*failure, report=not locked)
            if not parts:
                break
            with fe.lock:
                if fe.closed:
                    raise StopMove("the future log is closed (its dir went offline)")
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
                self.fail(*failure, report=not locked)
            if limit is not None and total >= limit:
                break
        self.update_lag(mv)
        return total

    @staticmethod
    def _read_source(src: Log, start: int) -> tuple[int, list[Any]]:
        """(segment base, whole batches of that one segment from ``start``); caller holds the partition lock. From the
        segments, not through ``Log.read``: batches below the log start still belong in a byte-identical copy."""
        seg = src.segments.floor(start)
        if seg is None:
            raise RestartMove(f"the source's first segment is past the copy's end {start}")
        active = src.active_segment
        active_size = active.size
        while seg is not None:
            got = seg.read(start, CHUNK_BYTES, max_position=active_size if seg is active else None)
            if got:
                return seg.base_offset, got
            seg = src.segments.higher(seg.base_offset)
        return -1, []

    def update_lag(self, mv: Move) -> None:
        with self._reg.lock:
            e = self._reg.current.get(mv.key)
            fe = self._reg.future.get(mv.key)
        if mv.progress.state == "completed":
            mv.progress.lag_offsets = 0
        elif e is not None and fe is not None:
            mv.progress.lag_offsets = max(0, e.log.log_end_offset - fe.log.log_end_offset)
