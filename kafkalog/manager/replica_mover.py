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

Steps 1-4 (the copy) are ``move_copy.py``'s; this module runs a move, swaps the logs (5-8) and promotes futures.
The mover sees the manager only through the :class:`LogRegistry` and the :class:`MoverHost` protocol.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from kafkalog.checkpoint.atomic import fsync_dir
from kafkalog.errors import ConfigError, KafkaStorageError, MoveRestartsExhaustedError
from kafkalog.log.log import Log
from kafkalog.manager.log_dir import LogDir
from kafkalog.manager.move_copy import (
    Move,
    MoveCopier,
    MoveProgress,
    MoverHost,
    RestartMove,
    SideFailed,
    StopMove,
    future_config,
)
from kafkalog.manager.registry import LogEntry, LogRegistry
from kafkalog.names import (
    TopicPartition,
    delete_dir_name,
    parse_partition_dir,
    partition_dir_name,
)

__all__ = ["MOVE_STEPS", "MoveProgress", "MoverHost", "ReplicaMover", "resolve_future_logs"]

_log = logging.getLogger(__name__)

MOVE_STEPS: tuple[str, ...] = (
    "future_created", "segments_copied", "future_opened", "caught_up", "appends_paused", "source_renamed",
    "future_renamed", "swapped",
)
#: A catch-up round that copies less than this goes on to the swap (the rest is copied with appends blocked).
SWAP_THRESHOLD_BYTES = 1 << 20
MAX_CATCH_UP_ROUNDS = 1000
MAX_RESTARTS = 5


class ReplicaMover:
    """Runs and tracks the KIP-113 moves of one LogManager (one daemon thread per move)."""

    def __init__(self, registry: LogRegistry, host: MoverHost) -> None:
        self._reg = registry
        self._host = host
        self._copy = MoveCopier(registry, host, self._hook)
        self._lock = threading.Lock()
        self._moves: dict[TopicPartition, Move] = {}
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
        move = Move(key, target, progress)
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
        self._copy.update_lag(mv)
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

    def _hook(self, mv: Move, step: str) -> None:
        mv.progress.step = step
        if self.step_hook is not None:
            self.step_hook(mv.key, step)

    def _run(self, mv: Move) -> None:
        p = mv.progress
        try:
            while True:
                try:
                    self._move_once(mv)
                    break
                except RestartMove as r:
                    p.restarts += 1
                    _log.warning("move of %s-%d restarts: %s", mv.key[0], mv.key[1], r)
                    fe = self._reg.get(mv.key, is_future=True)
                    if fe is not None:
                        self._discard_future(mv.key, fe)
                    if p.restarts > MAX_RESTARTS:
                        raise MoveRestartsExhaustedError(
                            f"the source kept changing under the copy: {p.restarts} restarts ({r})") from None
            p.state = "completed"
        except StopMove as s:
            if p.state not in ("failed",):
                p.state = "aborted"
            p.error = p.error or str(s) or None
        except SideFailed as f:
            p.state = "failed" if f.side == "target" else "aborted"
            p.error = f"{f.side} dir failed: {f.cause}"
        except BaseException as exc:  # noqa: BLE001 - recorded; a move must never kill the process
            p.state = "failed"
            p.error = f"{type(exc).__name__}: {exc}"
            _log.exception("move of %s-%d failed", mv.key[0], mv.key[1])
        finally:
            p.finished_at = time.monotonic()
            mv.done.set()

    def _move_once(self, mv: Move) -> None:
        p = mv.progress
        e = self._copy.source(mv)
        fe = self._reg.get(mv.key, is_future=True)
        if fe is None:
            p.state = "copying"
            self._copy.create_future(mv, e)
        else:
            self._copy.resume(mv, e, fe)
        p.state = "catching_up"
        rounds = 0
        while True:
            self._copy.check_stop(mv)
            copied = self._copy.copy_round(mv, limit=None)
            rounds += 1
            if copied < self.swap_threshold_bytes or rounds >= MAX_CATCH_UP_ROUNDS:
                break
        self._hook(mv, "caught_up")
        self._copy.check_stop(mv)
        p.state = "swapping"
        self._swap(mv)

    # --- phase 3: the swap ---------------------------------------------------------------------------------------

    def _swap(self, mv: Move) -> None:
        topic, partition = mv.key
        e = self._copy.source(mv)
        fe = self._copy.future(mv)
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
                raise StopMove("a log went offline before the swap")
            src, fut = e.log, fe.log
            try:
                self._swap_locked(mv, e, fe, src, fut, src_path, del_path, fpath, new_path, failures)
            except SideFailed as f:  # from the final copy round: reported below, after the locks
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
            raise SideFailed(side, exc)
        self._host.checkpoint([src_dir.path, tgt_dir.path])
        mv.progress.lag_offsets = 0
        self._hook(mv, "swapped")
        _log.info("moved %s-%d from %s to %s", topic, partition, src_dir.path, tgt_dir.path)

    def _swap_locked(self, mv: Move, e: LogEntry, fe: LogEntry, src: Log, fut: Log, src_path: str, del_path: str,
                     fpath: str, new_path: str, failures: list[tuple[LogDir, OSError, str]]) -> None:
        """Steps 5-8 with appends blocked (both partition locks held). I/O failures are collected, not raised, so
        they are reported after the locks are released."""
        src_dir, tgt_dir = e.dir, mv.target
        # 5. copy the rest, align the log start, flush and close both.
        self._copy.copy_round(mv, limit=None, locked=True)
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

    def _reopen_future(self, mv: Move, fe: LogEntry, fpath: str, end: int) -> None:
        """The source failed before its rename: keep the (complete) future as a future, still loaded."""
        try:
            fe.log = self._host.open_log(fpath, future_config(self._host.config_for(mv.key[0])), clean_shutdown=True,
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
                if not self._promote_or_report(key, fe):
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
            if self._promote_or_report(key, fe):
                promoted.append(key)
        return promoted

    def _promote_or_report(self, key: TopicPartition, fe: LogEntry) -> bool:
        """``promote``; an I/O error goes to the failure funnel (its dir goes offline) and False comes back."""
        try:
            self.promote(key, fe)
        except OSError as exc:
            self._host.report(fe.dir.path, exc, f"I/O error promoting the future log of {key[0]}-{key[1]}")
            self._host.process_failures()
            return False
        return True



def resolve_future_logs(mover: ReplicaMover) -> list[TopicPartition]:
    """At startup: promote each future log whose current log is gone and whose paired ``-delete`` (same uuid) is
    present, i.e. a move that crashed between its two renames. Returns the promoted partitions."""
    return mover.resolve_future_logs()
