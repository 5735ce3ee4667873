"""Log: one partition directory as Kafka's ``UnifiedLog`` + ``LocalLog`` run it.

Appends (leader: offsets assigned here; follower: offsets kept), reads, rolls, flushes, truncation and retention,
with the same files appearing and disappearing as in Kafka. This module holds the Log's state, reads, index
checks and flushes; appends and rolls are the ``log_append.LogAppend`` mixin, truncation and retention the
``log_retention.LogRetention`` mixin, I/O-error routing ``storage_hooks``. Loading is ``loader.LogLoader``; producer state is
``producer_state.ProducerStateManager``; leader epochs are ``epoch_cache.LeaderEpochFileCache``.

Threading: one re-entrant lock per Log serialises appends, rolls, truncations, retention and reads of the active
segment (reads of inactive segments only touch immutable bytes).

I/O errors: a standalone Log lets ``OSError`` propagate. A Log owned by a ``LogManager`` carries the manager's
``StorageHooks`` (Kafka's ``UnifiedLog`` holds the ``LogDirFailureChannel`` for the same reason): an I/O error in
any public operation, whoever calls it, takes the dir offline and surfaces as ``KafkaStorageError``, and a read
first has the segments it lands on sanity-checked when KIP-263 left them pending.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.partition_metadata import read_partition_metadata, write_partition_metadata
from kafkalog.errors import (
    CorruptCheckpointError,
    InconsistentMetadataError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    KafkaStorageError,
    LogMovedError,
    OffsetOutOfRangeError,
)
from kafkalog.io.handle_cache import HandleCache, default_cache
from kafkalog.io.oserrors import MISSING_PATH_ERRNOS
from kafkalog.limits import DEFAULT_PRODUCER_ID_EXPIRATION_MS, wall_clock_ms
from kafkalog.log.config import LogConfig
from kafkalog.log.epoch_cache import CHECKPOINT_FILE, EpochEntry, LeaderEpochFileCache
from kafkalog.log.index_check import check_segment, is_corruption
from kafkalog.log.loader import LogLoader, list_dir, rebuild_producer_state
from kafkalog.log.log_append import LogAppend, LogAppendInfo
from kafkalog.log.log_retention import LogRetention
from kafkalog.log.producer_state import ProducerStateManager
from kafkalog.log.segments import LogSegments
from kafkalog.log.storage_hooks import StorageHooks, storage_op
from kafkalog.names import parse_partition_dir
from kafkalog.owned_lock import OwnedRLock
from kafkalog.records import RecordBatch, TimestampType
from kafkalog.segment.log_segment import LogSegment, TimestampAndOffset

__all__ = ["Log", "LogAppendInfo", "TimestampAndOffset", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP"]

#: Special ``offset_for_timestamp`` targets (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

PARTITION_METADATA_FILE = "partition.metadata"


def _as_config(config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
    if config is None:
        return LogConfig()
    if isinstance(config, LogConfig):
        return config
    return LogConfig.from_properties(config)


def _epoch_reader(config: LogConfig) -> Callable[[Path], list]:
    """Read the ``leader-epoch-checkpoint``, creating it empty when missing: Kafka's ``CheckpointFile`` creates
    its file on construction, so every partition of a v2 log has one after a load. A log whose
    ``message.format.version`` predates v2 (0.11) has no epoch cache in Kafka, so no file is created for it."""

    def read(path: Path) -> list:
        try:
            return read_leader_epoch_checkpoint(path)
        except FileNotFoundError:
            if not _predates_v2(config.message_format_version):
                with contextlib.suppress(FileExistsError):
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            return []

    return read


def _predates_v2(version: str | None) -> bool:
    """``message.format.version`` below 0.11 (magic 0/1 only); None means the current format."""
    if not version:
        return False
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return False
    return (major, minor) < (0, 11)


def _topic_partition(path: Path) -> tuple[str | None, int | None]:
    try:
        tp = parse_partition_dir(path.name)
        return tp.topic, tp.partition
    except Exception:  # noqa: BLE001 - any dir name is allowed for a standalone Log
        head, _, tail = path.name.rpartition("-")
        return (head or None), (int(tail) if tail.isascii() and tail.isdigit() else None)


class Log(LogAppend, LogRetention):
    """A partition log. Use ``Log.open(path, ...)``; close it (or use ``with``) to write the final snapshot."""

    def __init__(self) -> None:  # use Log.open
        raise InvalidArgumentTypeError("use Log.open(path, ...)")

    # ------------------------------------------------------------------ open / close

    @classmethod
    def open(
        cls,
        path: str | Path,
        config: LogConfig | Mapping[str, Any] | None = None,
        *,
        topic_id: str | None = None,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        clean_shutdown: bool = True,
        clock: Callable[[], int] | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        rebuild_bad_epoch_checkpoint: bool = True,
        max_open_files: int | None = None,
        handle_cache: HandleCache | None = None,
    ) -> Log:
        """Load (or create) the partition dir at ``path``.

        ``recovery_point`` / ``log_start_offset`` come from the log dir's checkpoints (default 0);
        ``clean_shutdown`` says whether the dir had its clean-shutdown marker. A malformed
        ``leader-epoch-checkpoint`` is rebuilt from the batches' partition leader epochs (Kafka refuses to load
        the partition); pass ``rebuild_bad_epoch_checkpoint=False`` for Kafka's behaviour (KafkaStorageError).

        ``max_open_files`` bounds the segment descriptors and index mappings this Log keeps open (its own
        :class:`~kafkalog.io.handle_cache.HandleCache`; closed ones reopen on use); ``handle_cache`` shares one
        cache between logs (a LogManager passes its own). Neither: the process-wide cache, a quarter of the soft
        ``RLIMIT_NOFILE``.
        """
        self = object.__new__(cls)
        if handle_cache is not None and max_open_files is not None:
            raise InvalidArgumentError("give max_open_files or handle_cache, not both")
        self._handles = handle_cache if max_open_files is None else HandleCache(max_open_files)
        self._init(
            Path(path), _as_config(config), topic_id, recovery_point, log_start_offset, clean_shutdown,
            clock or wall_clock_ms, producer_id_expiration_ms, rebuild_bad_epoch_checkpoint,
        )
        return self

    def _init(
        self, path: Path, config: LogConfig, topic_id: str | None, recovery_point: int | None,
        log_start_offset: int | None, clean_shutdown: bool, clock: Callable[[], int],
        producer_id_expiration_ms: int, rebuild_bad_epoch: bool,
    ) -> None:
        self._dir = path
        self._config = config
        self._clock = clock
        self._lock = OwnedRLock()
        self._closed = False
        self._moved_to: str | None = None  # set by mark_moved
        self._pending_deletes: list[tuple[int, list[Path]]] = []
        self._high_watermark: int | None = None  # None: follows the log end offset
        self._hooks: StorageHooks | None = None  # set by a LogManager (attach_storage_hooks)
        self._topic, self._partition = _topic_partition(path)
        # One listing of the dir serves the metadata files below and the loader (an existing dir needs no mkdir).
        listing: tuple[list[str], set[str], set[str]] | None
        try:
            listing = list_dir(str(path))
        except (FileNotFoundError, NotADirectoryError):
            listing = None
            try:
                os.mkdir(path)  # Path.mkdir(parents=True, exist_ok=True) without pathlib's overhead
            except FileExistsError:
                if not os.path.isdir(path):
                    raise
            except FileNotFoundError:
                path.mkdir(parents=True, exist_ok=True)

        def listed(name: str) -> bool:
            return listing is None or name in listing[1] or name in listing[2]

        self._topic_id = self._init_topic_id(topic_id, listed(PARTITION_METADATA_FILE))
        if self._topic_id is not None and not listed(PARTITION_METADATA_FILE):
            listing = None  # written just now

        epoch_path = path / CHECKPOINT_FILE
        self.epoch_cache_rebuilt = False
        if not listed(CHECKPOINT_FILE):
            listing = None  # the reader creates it
        try:
            self._epoch_cache = LeaderEpochFileCache(epoch_path, reader=_epoch_reader(config))
        except CorruptCheckpointError as exc:
            if not rebuild_bad_epoch:
                raise KafkaStorageError(f"error while reading checkpoint file {epoch_path}: {exc}") from exc
            self._epoch_cache = LeaderEpochFileCache(epoch_path, entries=[])
            self.epoch_cache_rebuilt = True

        def new_psm(
            sync: bool = False, snapshots: dict | None = None, retired: dict | None = None
        ) -> ProducerStateManager:
            return ProducerStateManager(
                path, producer_id_expiration_ms=producer_id_expiration_ms, clock=clock, sync_snapshots=sync,
                snapshots=snapshots, retired=retired,
            )

        self._new_psm = new_psm
        self._psm = new_psm(True, {})  # the loader hands it the snapshot files from its own listing
        self._segments = LogSegments()
        loader = LogLoader(
            path, config, segments=self._segments, clean_shutdown=clean_shutdown,
            log_start_offset_checkpoint=log_start_offset or 0,
            recovery_point_checkpoint=recovery_point or 0,
            epoch_cache=self._epoch_cache, producer_state=self._psm, clock=clock, new_psm=new_psm,
            handles=self._handles, listing=listing,
        )
        loaded = loader.load()
        self.load_actions = loader.actions
        # Still-present segments this load rebuilt: the manager's sanity check counts them as checked.
        self.recovered_at_load: frozenset[int] = frozenset(loader.recovered_bases)
        # Inactive segments whose indexes no check has passed yet (KIP-263): checked on first use by a read or a
        # lookup (``_index_checked``), or marked by the manager's background checker (``mark_index_checked``).
        self._index_pending: set[int] = set(self._segments.base_offsets()[:-1])  # base offsets: builds no segment
        self._index_pending.difference_update(self.recovered_at_load)
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = max(loaded.recovery_point, loaded.log_start_offset)
        self._log_end_offset = loaded.next_offset
        if self.epoch_cache_rebuilt:
            self._rebuild_epoch_cache()

    def _init_topic_id(self, topic_id: str | None, listed: bool = True) -> str | None:
        """The stored topic id, checked against (or written from) ``topic_id``. ``listed`` False: the dir's
        listing, taken a moment ago, has no such file, so there is nothing to open."""
        meta = self._dir / PARTITION_METADATA_FILE
        stored = None
        try:
            if listed:
                stored = read_partition_metadata(meta)
        except OSError as exc:  # no stat first: one failed open is the whole cost of a missing file
            if exc.errno not in MISSING_PATH_ERRNOS:
                raise
        if topic_id is not None:
            if stored is not None and stored != topic_id:
                raise InconsistentMetadataError(
                    f"topic id {topic_id} does not match the id {stored} stored in {meta}"
                )
            if stored is None:
                write_partition_metadata(meta, topic_id)
            return topic_id
        return stored

    def _rebuild_epoch_cache(self) -> None:
        """Rebuild the epoch cache from every batch's partitionLeaderEpoch (shallow header scan, no record lost)."""
        cache = self._epoch_cache
        cache.clear()
        for seg in self._segments.values():
            for batch in seg.batches():
                epoch = batch.partition_leader_epoch
                if batch.magic >= 2 and epoch >= 0 and (cache.latest_epoch is None or epoch > cache.latest_epoch):
                    cache._assign(_epoch_entry(epoch, batch.base_offset))
        cache.truncate_from_start(self._log_start_offset)
        cache.flush()

    def close(self) -> None:
        """Kafka's ``UnifiedLog.close``: snapshot the producer state at the log end, close every segment (the
        active one writes its final time-index entry and trims its indexes). Does not fsync the data: call
        ``flush()`` first for durability, as Kafka's LogManager does at shutdown."""
        with self._lock:
            if self._closed:
                return
            self._psm.take_snapshot()
            self._segments.close()
            self._closed = True

    @property
    def handle_cache(self) -> HandleCache:
        """The cache counting this log's open segment files and index mappings."""
        return self._handles or default_cache()

    def attach_storage_hooks(self, hooks: StorageHooks | None) -> None:
        """Called by the LogManager that owns this log (None detaches)."""
        self._hooks = hooks

    def close_handlers(self) -> None:
        """Release file handles without writing anything (the manager's path for an offline dir)."""
        with self._lock:
            self._segments.close_handlers()
            self._closed = True

    def __enter__(self) -> Log:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Log({str(self._dir)!r}, start={self._log_start_offset}, end={self._log_end_offset})"

    # ------------------------------------------------------------------ properties

    @property
    def dir(self) -> Path:
        """The partition dir (``<topic>-<partition>``, or a ``-future``/``-delete`` form while moving or deleting)."""
        return self._dir

    @property
    def config(self) -> LogConfig:
        """The topic config the log was opened with (segment size, index interval, retention, cleanup policy)."""
        return self._config

    @property
    def topic(self) -> str | None:
        """The topic parsed from the dir name, None for a dir not named as Kafka names partitions."""
        return self._topic

    @property
    def partition(self) -> int | None:
        """The partition number parsed from the dir name, None for a dir not named as Kafka names partitions."""
        return self._partition

    @property
    def topic_id(self) -> str | None:
        """The topic id from ``partition.metadata`` (base64 as Kafka prints it), None when the file is absent."""
        return self._topic_id

    @property
    def log_start_offset(self) -> int:
        """The first offset consumers may read; below it data is logically deleted even if still on disk."""
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Offsets below this are flushed; an unclean restart re-checks only the segments from here on."""
        return self._recovery_point

    @property
    def segments(self) -> LogSegments:
        """The segments by base offset (Kafka's ``LogSegments``), oldest first."""
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        """The last segment, the only one appended to."""
        seg = self._segments.last
        assert seg is not None
        return seg

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        """The ``leader-epoch-checkpoint`` in memory: which leader epoch started at which offset."""
        return self._epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent and transactional producers' state (sequences, open transactions) as Kafka keeps it."""
        return self._psm

    @property
    def size(self) -> int:
        """Bytes in all ``.log`` files of the partition (what ``retention.bytes`` is compared with)."""
        return self._segments.size_in_bytes()

    @property
    def high_watermark(self) -> int:
        """The offset replicated to all in-sync replicas; the log end offset unless set (offline, none is known)."""
        return self._log_end_offset if self._high_watermark is None else self._high_watermark

    def update_high_watermark(self, offset: int | None) -> None:
        """Pin the high watermark (None: follow the log end offset, the default for a standalone log)."""
        with self._lock:
            if offset is not None:
                offset = max(self._log_start_offset, min(offset, self._log_end_offset))
            self._high_watermark = offset
            self._psm.on_high_watermark_updated(self.high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): what READ_COMMITTED consumers may read up to."""
        first = self._psm.first_unstable_offset
        hw = self.high_watermark
        return hw if first is None else min(first, hw)

    # ------------------------------------------------------------------ read

    @storage_op("read", reads_at=True)
    def read(self, offset: int, max_bytes: int = 1 << 20, *, max_offset: int | None = None) -> list[RecordBatch]:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one batch).

        ``offset`` must be in [log start, log end]; at the log end the answer is empty. ``max_offset`` (e.g. the
        high watermark or LSO) stops before batches starting at or past it.
        """
        with self._lock:
            self._check_open()
            start, end = self._log_start_offset, self._log_end_offset
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(f"offset {offset} is outside [{start}, {end}] of {self._dir}")
            if offset == end:
                return []
            active = self.active_segment
            active_size = active.size
            seg = self._segments.floor(offset)
        out: list[RecordBatch] = []
        while seg is not None:
            self._index_checked(seg)
            max_pos = active_size if seg is active else None
            nxt = self._segments.higher_base(seg.base_offset)  # an offset: the next segment is built only if read
            got = seg.read_valid(offset, max_bytes, max_position=max_pos,
                                 limit=end if nxt is None else min(end, nxt))
            if got:
                out = got
                break
            seg = None if nxt is None else self._segments.get(nxt)
        if max_offset is not None:
            out = [b for b in out if b.base_offset < max_offset]
        return out

    @storage_op("offset lookup")
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """Kafka's ListOffsets: the first offset whose timestamp >= ``timestamp``; -2 earliest, -1 latest, -3 the
        record with the largest timestamp. None when no record is that late."""
        with self._lock:
            self._check_open()
            if timestamp == EARLIEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._log_start_offset, self._epoch_cache.epoch_for_offset(self._log_start_offset))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._log_end_offset, self._epoch_cache.latest_epoch)
            segs = self._segments.values()
        if timestamp == MAX_TIMESTAMP:
            for seg in segs:  # every time index is read to find the largest timestamp
                self._index_checked(seg)
            best = max(segs, key=lambda s: s.max_timestamp_so_far)
            target = best.max_timestamp_so_far
            if target < 0:
                return None
            for batch in best.batches(best.offset_index.lookup(best.offset_of_max_timestamp_so_far)[1]):
                if batch.max_timestamp == target:
                    epoch = batch.partition_leader_epoch if batch.magic >= 2 and batch.partition_leader_epoch >= 0 else None
                    off = batch.base_offset
                    if batch.timestamp_type != TimestampType.LOG_APPEND_TIME:
                        off = next((r.offset for r in batch.records() if r.timestamp == target), batch.last_offset)
                    return TimestampAndOffset(target, off, epoch)
            return None
        for seg in segs:
            self._index_checked(seg)
            if seg.largest_timestamp >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
        return None

    @storage_op("offset lookup")
    def translate_offset(self, offset: int) -> tuple[int, int] | None:
        """Where the batch holding ``offset`` starts: (segment base offset, file position), found through the
        segment's offset index (checked first, KIP-263); None when no segment holds it."""
        with self._lock:
            self._check_open()
            seg = self._segments.floor(offset)
        if seg is None:
            return None
        self._index_checked(seg)
        found = seg.translate_offset(offset)
        return None if found is None else (seg.base_offset, found.position)

    # ------------------------------------------------------------------ index checks (KIP-263)

    def _index_checked(self, seg: LogSegment) -> None:
        """Before an inactive segment's indexes answer for the first time: ``check_segment`` (Kafka's index rules,
        the strict index-vs-log checks, a whole last batch); a segment failing it is rebuilt from its ``.log``
        first. A disk error propagates as any I/O error of the operation does."""
        base = seg.base_offset
        if base not in self._index_pending:
            return
        with self._lock:
            if base not in self._index_pending or self._segments.get(base) is not seg:
                self._index_pending.discard(base)
                return
            try:
                check_segment(seg)
            except Exception as exc:
                if not is_corruption(exc):
                    raise
                self._recover_segments_locked([base])
            self._index_pending.discard(base)

    def mark_index_checked(self, base_offset: int) -> None:
        """The manager's checker checked (or rebuilt) this segment: no check on first use."""
        self._index_pending.discard(base_offset)

    def unload_segment(self, seg: LogSegment) -> bool:
        """Forget the object of an inactive segment nobody uses any more (the caller's to know, e.g. the manager's
        checker for one it built only to check): its map entry goes back to the base offset a lazy load leaves,
        and the next use builds it again. Only when every byte of it is below the recovery point, i.e. on disk
        as it is (the object carries no unflushed state); its handles are released here. True when forgotten."""
        with self._lock:
            nxt = self._segments.higher_base(seg.base_offset)
            if nxt is None or nxt > self._recovery_point or not self._segments.is_made(seg.base_offset):
                return False
            try:
                seg.release_indexes()
                seg.close_handlers()
            except OSError:
                return False  # kept, as any segment whose handles could not be given back
            return self._segments.unmake(seg)

    def recover_segments(self, bases: Iterable[int]) -> int:
        """Rebuild segments ``bases`` from their batches, as Kafka's ``recoverSegment``: producer state replayed up
        to each (aborted transactions land in the rebuilt ``.txnindex``), every index rewritten, the ``.log`` cut
        after its last valid batch. Returns the bytes truncated. An OSError reaches the caller as it is (the
        manager calls this under a partition lock and reports the dir itself)."""
        with self._lock:
            self._check_open()
            return self._recover_segments_locked(sorted(bases))

    def _recover_segments_locked(self, bases: list[int]) -> int:
        total = 0
        for base in bases:
            seg = self._segments.get(base)
            if seg is None:
                continue
            psm = self._new_psm()
            rebuild_producer_state(psm, self._segments, self._log_start_offset, base,
                                   reload_from_clean_shutdown=False, now=self._clock())
            total += seg.recover(psm, self._epoch_cache)
            self._index_pending.discard(base)
        return total

    # ------------------------------------------------------------------ flush

    @storage_op("flush")
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment holding offsets in [recovery point, ``offset``) (default: the log end) and move
        the recovery point there (Kafka's ``flush``). The caller checkpoints the recovery point."""
        with self._lock:
            self._check_open()
            target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
            if target <= self._recovery_point:
                return
            for seg in self._segments.values(self._recovery_point, target):
                seg.flush()
            self._recovery_point = target

    # ------------------------------------------------------------------ helpers

    def mark_moved(self, new_dir: str | os.PathLike) -> None:
        """Called by the replica mover once this (closed) handle's partition lives on in ``new_dir``: later calls
        raise LogMovedError instead of the storage error of a closed log."""
        self._moved_to = os.fspath(new_dir)

    def _check_open(self) -> None:
        if self._closed:
            moved = self._moved_to
            if moved is not None:
                raise LogMovedError(f"log {self._dir} moved to {moved}: fetch the log again", new_dir=moved)
            raise KafkaStorageError(f"log {self._dir} is closed")


def _epoch_entry(epoch: int, start: int) -> EpochEntry:
    return EpochEntry(epoch, start)
