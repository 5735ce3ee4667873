"""KIP-263, taken further: sanity-check inactive segments lazily instead of on the startup path.

At load the manager registers each partition: with ``sanity.check.all.logs.enabled=true`` every segment is
checked there and then; otherwise only the active segment is, and the inactive ones stay *pending* (nothing of
theirs is opened). Pending segments are checked later, by whichever comes first:

* a background run started with :meth:`SanityChecker.start` for a set of partitions (the moment a broker becomes
  leader for them), or
* a read through the manager that lands on a pending segment.

A check (``kafkalog.log.index_check.check_segment``, the one a ``Log`` runs on first use too) is the segment's ``sanity_check(strict=True)`` (Kafka's index rules plus
kafkalog's stricter index-vs-log checks) and a shallow scan proving the ``.log`` ends on a whole batch. When a segment is corrupt, every earlier pending segment of the partition is checked before anything
else touches it, and the corrupt ones are handed to the manager's ``recover`` callback, which rebuilds them
(truncating only bytes that do not form valid batches). All work on a partition happens under that partition's
lock, so a read never sees a half-checked or half-recovered segment.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kafkalog.log.index_check import check_segment, is_corruption
from kafkalog.manager.partition_lock import PartitionLock
from kafkalog.names import TopicPartition

__all__ = ["CheckStatus", "PartitionCheckState", "SanityCheckRun", "SanityChecker", "is_corruption"]

_log = logging.getLogger(__name__)


class CheckStatus(str, enum.Enum):
    PENDING = "pending"  # inactive segments not checked yet
    CHECKED = "checked"  # every segment checked, nothing found
    RECOVERED = "recovered"  # corruption found and the corrupt segments rebuilt
    OFFLINE = "offline"  # its dir went offline before the check finished


@dataclass(frozen=True)
class PartitionCheckState:
    """A snapshot of one partition's check progress."""

    topic: str
    partition: int
    status: CheckStatus
    segments_checked: int
    segments_pending: int
    corrupt_segments: tuple[int, ...] = ()
    truncated_bytes: int = 0
    error: str | None = None


def release_segment(seg: object) -> None:
    """Give back what a check opened on an inactive segment (index maps, the .log descriptor); both reopen lazily.

    Without this an eager load of many partitions holds three descriptors per segment and runs into EMFILE.
    """
    try:
        seg.release_indexes()  # type: ignore[attr-defined]
        seg.close_handlers()  # type: ignore[attr-defined]
    except OSError:
        _log.debug("releasing %r failed", seg, exc_info=True)


@dataclass(eq=False)
class _Tracker:
    key: TopicPartition
    log: object
    lock: PartitionLock
    pending: set[int] = field(default_factory=set)
    checked: int = 0
    corrupt: list[int] = field(default_factory=list)
    truncated: int = 0
    error: str | None = None
    offline: bool = False

    def snapshot(self) -> PartitionCheckState:
        if self.offline:
            status = CheckStatus.OFFLINE
        elif self.pending:
            status = CheckStatus.PENDING
        elif self.corrupt:
            status = CheckStatus.RECOVERED
        else:
            status = CheckStatus.CHECKED
        return PartitionCheckState(
            self.key[0], self.key[1], status, self.checked, len(self.pending), tuple(self.corrupt), self.truncated,
            self.error,
        )


RecoverFn = Callable[[TopicPartition, object, list[int]], int]
IoErrorFn = Callable[[TopicPartition, OSError], None]


class SanityCheckRun:
    """The checker's one background pass; ``wait()`` for it, ``stop()`` to abandon it.

    A manager runs at most one: :meth:`SanityChecker.start` while it is running adds the partitions to its queue
    (a partition already queued is not queued twice) and returns the same run, so ``wait()`` covers every
    partition asked for so far. Once the queue is empty the thread ends; the next ``start`` makes a new run.
    """

    def __init__(self, checker: SanityChecker, keys: list[TopicPartition]) -> None:
        self._checker = checker
        self._queue: collections.deque[TopicPartition] = collections.deque()
        self._queued: set[TopicPartition] = set()
        self._closed = False  # guarded by the checker's lock: once set, nothing more is taken
        self._stop = threading.Event()
        self.errors: list[tuple[TopicPartition, BaseException]] = []
        self._thread = threading.Thread(target=self._run, name="kafkalog-sanity-checker", daemon=True)
        self._add(keys)

    def _add(self, keys: Iterable[TopicPartition]) -> None:
        """Queue ``keys`` (caller holds the checker's lock, the run is not closed)."""
        for key in keys:
            if key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)

    def _start(self) -> None:
        self._thread.start()

    def _next(self) -> TopicPartition | None:
        with self._checker._lock:
            if self._stop.is_set() or not self._queue:
                self._closed = True  # start() makes a new run from now on
                return None
            key = self._queue.popleft()
            self._queued.discard(key)
            return key

    def _run(self) -> None:
        while (key := self._next()) is not None:
            try:
                self._checker.check_partition(key, stop=self._stop)
            except Exception as e:  # one partition's trouble must not stop the pass
                self.errors.append((key, e))

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Join the run; True when it finished."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)


class SanityChecker:
    """Per-partition check bookkeeping and the check/recover routine used at load, by reads and in background."""

    def __init__(self, *, recover: RecoverFn, on_io_error: IoErrorFn) -> None:
        self._recover = recover
        self._on_io_error = on_io_error
        self._lock = threading.Lock()
        self._trackers: dict[TopicPartition, _Tracker] = {}
        self._run: SanityCheckRun | None = None

    # --- registration --------------------------------------------------------------------------------------------

    def register(
        self, key: TopicPartition, log: object, lock: PartitionLock, *, check_all: bool,
        rebuilt: Iterable[int] = (),
    ) -> None:
        """Called when a partition is loaded. Checks every segment (``check_all``) or just the active one now;
        the rest stay pending. ``rebuilt`` names segments the load just recovered (indexes rewritten from the
        batches, the log cut after its last valid one): they count as checked without being read again.
        OSError propagates to the caller (the loader marks the dir offline)."""
        bases = log.segments.base_offsets()  # type: ignore[attr-defined]  # a lazy load's segments stay unmade
        pending = set(bases)
        done = pending.intersection(rebuilt)
        tracker = _Tracker(key, log, lock, pending=pending - done, checked=len(done))
        with self._lock:
            self._trackers[key] = tracker
        with lock:
            if check_all:
                self._check_upto(tracker, None, raise_io=True)
            elif bases:
                self._check_bases(tracker, [bases[-1]], raise_io=True)

    def register_new(self, key: TopicPartition, log: object, lock: PartitionLock) -> None:
        """A log created by this process has nothing to check."""
        with self._lock:
            self._trackers[key] = _Tracker(key, log, lock)

    def replace_log(self, key: TopicPartition, log: object) -> None:
        with self._lock:
            t = self._trackers.get(key)
            if t is not None:
                t.log = log

    def mark_offline(self, keys: Iterable[TopicPartition]) -> None:
        with self._lock:
            for key in keys:
                t = self._trackers.get(key)
                if t is not None:
                    t.offline = True

    def forget(self, key: TopicPartition) -> None:
        with self._lock:
            self._trackers.pop(key, None)

    # --- state ---------------------------------------------------------------------------------------------------

    def state(self, key: TopicPartition) -> PartitionCheckState | None:
        with self._lock:
            t = self._trackers.get(key)
        return None if t is None else t.snapshot()

    def states(self) -> dict[TopicPartition, PartitionCheckState]:
        with self._lock:
            trackers = list(self._trackers.values())
        return {t.key: t.snapshot() for t in trackers}

    def pending_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [k for k, t in self._trackers.items() if t.pending and not t.offline]

    # --- checking ------------------------------------------------------------------------------------------------

    def ensure_checked(self, key: TopicPartition, offset: int, *, log: object | None = None) -> None:
        """Before a read at ``offset``: check the segment holding it (and the next one, which a read that runs
        off the end of its segment may reach) if still pending. Cheap when nothing is pending. With ``log``,
        only when that is the log registered for ``key`` (a future log being moved has no checks of its own)."""
        with self._lock:
            t = self._trackers.get(key)
        if t is None or not t.pending or t.offline or (log is not None and t.log is not log):
            return
        with t.lock:
            if not t.pending:
                return
            segs = t.log.segments  # type: ignore[attr-defined]
            # by base offset alone: nothing is built that the check does not need
            floor = segs.floor_base(offset)
            if floor is None:  # below the first segment: the read starts at the first one
                floor = segs.higher_base(offset)
            if floor is None:
                return
            bases = [floor]
            nxt = segs.higher_base(floor)
            if nxt is not None:
                bases.append(nxt)
            # the read uses the floor segment: it stays; the next one is only checked, in case the read reaches it
            self._check_bases(t, [b for b in bases if b in t.pending], raise_io=True, keep=floor)

    def check_partition(self, key: TopicPartition, *, stop: threading.Event | None = None) -> PartitionCheckState | None:
        """Check every pending segment of one partition (oldest first), one segment per lock hold so appends and
        reads interleave with a long check."""
        with self._lock:
            t = self._trackers.get(key)
        if t is None:
            return None
        while not t.offline and (stop is None or not stop.is_set()):
            with t.lock:
                if not t.pending or t.offline:
                    break
                self._check_bases(t, [min(t.pending)], raise_io=False)
        return t.snapshot()

    def start(self, partitions: Iterable[TopicPartition] | None = None) -> SanityCheckRun:
        """Check ``partitions`` (default: every partition with pending segments) in background. At most one run
        per checker: while one is running the partitions join its queue and that run is returned."""
        keys = self.pending_partitions() if partitions is None else [tuple(p) for p in partitions]  # type: ignore[misc]
        with self._lock:
            run = self._run
            if run is not None and not run._closed:
                run._add(keys)  # type: ignore[arg-type]
                return run
            run = self._run = SanityCheckRun(self, keys)  # type: ignore[arg-type]
            run._start()
        return run

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop and join the background run (manager shutdown)."""
        with self._lock:
            run, self._run = self._run, None
        if run is not None:
            run.stop(timeout)

    # --- internals (caller holds t.lock) -------------------------------------------------------------------------

    def _check_upto(self, t: _Tracker, limit: int | None, *, raise_io: bool) -> None:
        bases = sorted(b for b in t.pending if limit is None or b < limit)
        self._check_bases(t, bases, raise_io=raise_io)

    def _check_bases(self, t: _Tracker, bases: list[int], *, raise_io: bool, keep: int | None = None) -> None:
        """Check ``bases``; on the first corruption also check every earlier pending segment, then recover. A
        segment built only for its check is forgotten again afterwards, except ``keep`` (about to be used)."""
        segs = t.log.segments  # type: ignore[attr-defined]
        corrupt: list[int] = []
        to_check = sorted(bases)
        i = 0
        while i < len(to_check):
            base = to_check[i]
            i += 1
            if base not in t.pending:
                continue
            unused = base != keep and not segs.is_made(base)  # made only for this check: nobody holds it
            seg = segs.get(base)
            if seg is None:  # deleted by retention or truncation meanwhile: nothing left to check
                t.pending.discard(base)
                continue
            try:
                check_segment(seg)
            except Exception as e:
                if seg is not segs.last:
                    release_segment(seg)
                if not is_corruption(e):
                    if isinstance(e, OSError):
                        if raise_io:
                            raise
                        self._on_io_error(t.key, e)
                        return
                    raise
                _log.warning("partition %s-%s: segment %d failed its sanity check: %s", *t.key, base, e)
                corrupt.append(base)
                t.error = f"{type(e).__name__}: {e}"
                # Kafka's rule for a corrupt segment found lazily: everything before it is suspect too.
                earlier = sorted(b for b in t.pending if b < base and b not in to_check[i:] and b not in corrupt)
                to_check[i:i] = earlier
                to_check[i:] = sorted(set(to_check[i:]))
                continue
            t.pending.discard(base)
            t.log.mark_index_checked(base)  # type: ignore[attr-defined]
            # Checked and unused: nothing of it stays in memory (a lazy load's bare base offset again); one in use
            # keeps its object and gives back its handles only.
            if seg is not segs.last and not (unused and t.log.unload_segment(seg)):  # type: ignore[attr-defined]
                release_segment(seg)
            t.checked += 1
        if not corrupt:
            return
        corrupt.sort()
        try:
            truncated = self._recover(t.key, t.log, corrupt)
        except OSError as e:
            if raise_io:
                raise
            self._on_io_error(t.key, e)
            return
        for base in corrupt:
            t.pending.discard(base)
            t.log.mark_index_checked(base)  # type: ignore[attr-defined]
        t.checked += len(corrupt)
        t.corrupt.extend(corrupt)
        t.truncated += truncated
