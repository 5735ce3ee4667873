"""Log: one partition directory as Kafka's ``UnifiedLog`` + ``LocalLog`` run it.

Appends (leader: offsets assigned here; follower: offsets kept), reads, rolls, flushes, truncation and retention,
with the same files appearing and disappearing as in Kafka. Loading is ``loader.LogLoader``; producer state is
``producer_state.ProducerStateManager``; leader epochs are ``epoch_cache.LeaderEpochFileCache``.

Threading: one re-entrant lock per Log serialises appends, rolls, truncations, retention and reads of the active
segment (reads of inactive segments only touch immutable bytes).

I/O errors: a standalone Log lets ``OSError`` propagate. A Log owned by a ``LogManager`` carries the manager's
``StorageHooks`` (Kafka's ``UnifiedLog`` holds the ``LogDirFailureChannel`` for the same reason): an I/O error in
any public operation, whoever calls it, takes the dir offline and surfaces as ``KafkaStorageError``, and a read
first has the segments it lands on sanity-checked when KIP-263 left them pending.
"""

from __future__ import annotations

import errno
import functools
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kafkalog.errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    InconsistentMetadataError,
    InvalidArgumentTypeError,
    InvalidOffsetError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    io_cause,
)
from kafkalog.limits import INT_MAX as _I32_MAX
from kafkalog.limits import wall_clock_ms
from kafkalog.log.config import LogConfig
from kafkalog.log.epoch_cache import CHECKPOINT_FILE, LeaderEpochFileCache
from kafkalog.log.loader import LogLoader, rebuild_producer_state
from kafkalog.log.producer_state import AppendOrigin, CompletedTxn, ProducerStateManager
from kafkalog.log.segments import LogSegments
from kafkalog.names import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, file_name
from kafkalog.records import CompressionType, RecordBatch, TimestampType, build_batch, read_batches
from kafkalog.records.batch import set_base_offset, set_max_timestamp, set_partition_leader_epoch
from kafkalog.segment import LogSegment, TimestampAndOffset

__all__ = ["Log", "LogAppendInfo", "TimestampAndOffset", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP"]

#: Special ``offset_for_timestamp`` targets (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

PARTITION_METADATA_FILE = "partition.metadata"
#: The errors ``Path.exists`` answers False for: a file failing to open with one of these does not exist.
_MISSING_ERRNOS = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


@dataclass
class LogAppendInfo:
    """What an append did (Kafka's ``LogAppendInfo``). ``duplicate`` marks an idempotent retry that was not
    written again (offsets are those of the original batch)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int = -1
    log_start_offset: int = 0
    valid_bytes: int = 0
    shallow_count: int = 0
    record_count: int = 0
    last_leader_epoch: int = -1
    compression: CompressionType = CompressionType.NONE
    rolled: bool = False
    duplicate: bool = False
    batches: list[RecordBatch] = field(default_factory=list, repr=False)


def _as_config(config: LogConfig | Mapping[str, Any] | None) -> LogConfig:
    if config is None:
        return LogConfig()
    if isinstance(config, LogConfig):
        return config
    return LogConfig.from_properties(config)


def _topic_partition(path: Path) -> tuple[str | None, int | None]:
    try:
        from kafkalog.names import parse_partition_dir

        tp = parse_partition_dir(path.name)
        return tp.topic, tp.partition
    except Exception:  # noqa: BLE001 - any dir name is allowed for a standalone Log
        head, _, tail = path.name.rpartition("-")
        return (head or None), (int(tail) if tail.isdigit() else None)


class StorageHooks(Protocol):
    """What a LogManager plugs into each Log it owns, so direct calls on the Log follow the manager's rules."""

    def before_read(self, log: Log, offset: int) -> None:
        """Runs before a read at ``offset`` (outside the Log's lock): check pending segments first (KIP-263)."""

    def on_io_error(self, log: Log, cause: OSError, what: str) -> BaseException:
        """The exception to raise for ``cause`` (after taking the log's dir offline, or ``cause`` itself when the
        caller's own failure handling must see the raw error)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def _storage_op(what: str, *, reads_at: bool = False) -> Callable[[_F], _F]:
    """Route an OSError of a public operation through the Log's hooks (when it has some).

    Only the outermost operation of a thread reports: a public method called by another one while the Log's lock
    is held lets the error travel up to the outer call, which reports it once the lock is released (offline
    handling waits for partition locks, so it must never run under one).
    """

    def deco(fn: _F) -> _F:
        @functools.wraps(fn)
        def op(self: Log, *args: Any, **kwargs: Any) -> Any:
            hooks = self._hooks
            if hooks is None or self._lock._is_owned():  # type: ignore[attr-defined]
                return fn(self, *args, **kwargs)
            try:
                if reads_at:
                    hooks.before_read(self, args[0] if args else kwargs["offset"])
                return fn(self, *args, **kwargs)
            except (OSError, KafkaStorageError) as exc:
                cause = io_cause(exc)
                if cause is None:
                    raise
                err = hooks.on_io_error(self, cause, what)
                if err is cause:
                    raise
                raise err from cause

        return op  # type: ignore[return-value]

    return deco


class Log:
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
        producer_id_expiration_ms: int = 86_400_000,
        rebuild_bad_epoch_checkpoint: bool = True,
    ) -> Log:
        """Load (or create) the partition dir at ``path``.

        ``recovery_point`` / ``log_start_offset`` come from the log dir's checkpoints (default 0);
        ``clean_shutdown`` says whether the dir had its clean-shutdown marker. A malformed
        ``leader-epoch-checkpoint`` is rebuilt from the batches' partition leader epochs (Kafka refuses to load
        the partition); pass ``rebuild_bad_epoch_checkpoint=False`` for Kafka's behaviour (KafkaStorageError).
        """
        self = object.__new__(cls)
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
        self._lock = threading.RLock()
        self._closed = False
        self._pending_deletes: list[tuple[int, list[Path]]] = []
        self._high_watermark: int | None = None  # None: follows the log end offset
        self._hooks: StorageHooks | None = None  # set by a LogManager (attach_storage_hooks)
        self._topic, self._partition = _topic_partition(path)
        try:
            os.mkdir(path)  # Path.mkdir(parents=True, exist_ok=True) without pathlib's overhead
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        except FileNotFoundError:
            path.mkdir(parents=True, exist_ok=True)

        self._topic_id = self._init_topic_id(topic_id)

        epoch_path = path / CHECKPOINT_FILE
        self.epoch_cache_rebuilt = False
        try:
            self._epoch_cache = LeaderEpochFileCache(epoch_path)
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
        )
        loaded = loader.load()
        self.load_actions = loader.actions
        # Still-present segments this load rebuilt: the manager's sanity check counts them as checked.
        self.recovered_at_load: frozenset[int] = frozenset(loader.recovered_bases)
        self._log_start_offset = loaded.log_start_offset
        self._recovery_point = max(loaded.recovery_point, loaded.log_start_offset)
        self._log_end_offset = loaded.next_offset
        if self.epoch_cache_rebuilt:
            self._rebuild_epoch_cache()

    def _init_topic_id(self, topic_id: str | None) -> str | None:
        from kafkalog.checkpoint.partition_metadata import read_partition_metadata, write_partition_metadata

        meta = self._dir / PARTITION_METADATA_FILE
        try:
            stored = read_partition_metadata(meta)
        except OSError as exc:  # no stat first: one failed open is the whole cost of a missing file
            if exc.errno not in _MISSING_ERRNOS:
                raise
            stored = None
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
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def topic(self) -> str | None:
        return self._topic

    @property
    def partition(self) -> int | None:
        return self._partition

    @property
    def topic_id(self) -> str | None:
        return self._topic_id

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> LogSegments:
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        seg = self._segments.last
        assert seg is not None
        return seg

    @property
    def leader_epoch_cache(self) -> LeaderEpochFileCache:
        return self._epoch_cache

    @property
    def producer_state(self) -> ProducerStateManager:
        return self._psm

    @property
    def size(self) -> int:
        return self._segments.size_in_bytes()

    @property
    def high_watermark(self) -> int:
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

    # ------------------------------------------------------------------ append

    @_storage_op("append")
    def append_as_leader(
        self,
        records: Iterable[Any] | bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        compression: CompressionType | int = CompressionType.NONE,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        timestamp: int | None = None,
    ) -> LogAppendInfo:
        """Append as the leader: offsets assigned from the log end, ``partitionLeaderEpoch`` set, LogAppendTime
        stamped when the topic uses it, producer state validated (duplicates of one of a producer's last 5
        batches are answered with the original offsets and not written again).

        ``records`` are ``Record`` objects / ``(key, value[, headers])`` tuples (one batch is built), or bytes
        of client-built magic-2 batches (rewritten in place as Kafka's validator does for v2).
        """
        with self._lock:
            self._check_open()
            now = self._clock()
            log_append = now if self._config.is_log_append_time else None
            ts_type = TimestampType.LOG_APPEND_TIME if log_append is not None else TimestampType.CREATE_TIME
            if isinstance(records, (bytes, bytearray, memoryview)):
                data = self._assign_offsets_in_place(bytes(records), leader_epoch, log_append)
            else:
                recs = list(records)
                if not recs:
                    raise InvalidRecordError("append of zero records")
                data = build_batch(
                    _renumber(recs, self._log_end_offset), base_offset=self._log_end_offset, compression=compression,
                    timestamp_type=ts_type, producer_id=producer_id, producer_epoch=producer_epoch,
                    base_sequence=base_sequence, partition_leader_epoch=leader_epoch,
                    is_transactional=is_transactional, log_append_time=log_append,
                    timestamp=now if timestamp is None else timestamp,
                )
            return self._append(data, origin=AppendOrigin.CLIENT, log_append_time=log_append if log_append else -1)

    @_storage_op("append")
    def append_as_follower(self, batch_bytes: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches replicated from a leader: offsets, epochs and timestamps are kept as they are.

        Offsets must increase and the first must be >= the log end offset (InvalidOffsetError); a bad CRC or
        trailing partial batch raises CorruptRecordError. Rolls and indexes exactly as Kafka's follower path.
        """
        with self._lock:
            self._check_open()
            return self._append(bytes(batch_bytes), origin=AppendOrigin.REPLICATION, log_append_time=-1)

    def _assign_offsets_in_place(self, data: bytes, leader_epoch: int, log_append: int | None) -> bytes:
        """Kafka's in-place v2 validation path: set base offset, leader epoch (and LogAppendTime), fix CRCs."""
        out = bytearray(data)
        offset = self._log_end_offset
        reader = read_batches(out)
        batches = list(reader)
        if reader.invalid_bytes or not batches:
            raise CorruptRecordError("client batches are truncated or malformed", position=reader.valid_bytes)
        for batch in batches:
            if batch.magic != 2:
                raise InvalidRecordError("append_as_leader takes magic 2 batches only")
            if not batch.is_valid():
                raise CorruptRecordError("client batch has a bad CRC", position=batch.position)
            pos = batch.position
            set_base_offset(out, pos, offset)
            set_partition_leader_epoch(out, pos, leader_epoch)  # neither field is covered by the CRC
            if log_append is not None:
                set_max_timestamp(out, pos, batch.size_in_bytes, TimestampType.LOG_APPEND_TIME, log_append)
            offset += batch.last_offset - batch.base_offset + 1
        return bytes(out)

    def _analyze(self, data: bytes, origin: AppendOrigin) -> LogAppendInfo:
        reader = read_batches(data)
        batches = list(reader)
        if reader.invalid_bytes:
            raise CorruptRecordError(
                f"{reader.invalid_bytes} bytes after the last whole batch", position=reader.valid_bytes
            )
        if not batches:
            raise InvalidRecordError("append of zero batches")
        first = batches[0]
        info = LogAppendInfo(
            first_offset=first.base_offset, last_offset=-1, max_timestamp=-1, offset_of_max_timestamp=-1,
            log_start_offset=self._log_start_offset,
        )
        last = -1
        monotonic = True
        for batch in batches:
            if batch.last_offset <= last:
                monotonic = False
            last = batch.last_offset
            info.last_leader_epoch = batch.partition_leader_epoch
            if batch.size_in_bytes > self._config.max_message_bytes and origin is AppendOrigin.CLIENT:
                raise InvalidRecordError(
                    f"batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {self._config.max_message_bytes}"
                )
            if not batch.is_valid():
                raise CorruptRecordError("batch fails its CRC check", position=batch.position)
            if batch.last_offset < batch.base_offset:
                raise InvalidRecordError(f"batch at {batch.position}: last offset before base offset")
            if batch.max_timestamp > info.max_timestamp:
                info.max_timestamp = batch.max_timestamp
                info.offset_of_max_timestamp = last
            info.valid_bytes += batch.size_in_bytes
            info.shallow_count += 1
            info.record_count += batch.record_count
            if batch.compression != CompressionType.NONE:
                info.compression = batch.compression
        if not monotonic:
            raise InvalidOffsetError(f"out of order offsets in append: {[b.base_offset for b in batches]}")
        info.last_offset = last
        info.batches = batches
        return info

    def _append(self, data: bytes, *, origin: AppendOrigin, log_append_time: int) -> LogAppendInfo:
        info = self._analyze(data, origin)
        info.log_append_time = log_append_time
        if info.first_offset < self._log_end_offset:
            raise InvalidOffsetError(
                f"first offset {info.first_offset} of the append is below the log end offset {self._log_end_offset}"
            )
        # Leader epochs (Kafka: maybeAssignEpochStartOffset per v2 batch; older magic clears the cache).
        for batch in info.batches:
            if batch.magic >= 2:
                if batch.partition_leader_epoch >= 0:
                    self._epoch_cache.assign(batch.partition_leader_epoch, batch.base_offset)
            elif self._epoch_cache.non_empty():
                self._epoch_cache.clear_and_flush()

        segment, info.rolled = self._maybe_roll(len(data), info)

        # Producer state: validate and collect, then write, then commit (Kafka's order).
        pending: dict[int, Any] = {}
        completed: list[CompletedTxn] = []
        for batch in info.batches:
            if not batch.has_producer_id:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self._psm.last_entry(batch.producer_id)
                dup = None if entry is None else entry.find_duplicate_batch(
                    batch.producer_epoch, batch.base_sequence, batch.last_sequence
                )
                if dup is not None:
                    info.first_offset, info.last_offset = dup.first_offset, dup.last_offset
                    info.max_timestamp, info.offset_of_max_timestamp = dup.timestamp, dup.last_offset
                    info.duplicate = True
                    info.batches = []
                    return info
            app = pending.get(batch.producer_id)
            if app is None:
                app = pending[batch.producer_id] = self._psm.prepare_update(batch.producer_id, origin)
            done = app.append(batch)
            if done is not None:
                completed.append(done)

        segment.append(data)
        self._log_end_offset = info.last_offset + 1

        for app in pending.values():
            self._psm.update(app)
        for txn in completed:
            lso = self._psm.last_stable_offset(txn)
            if txn.is_aborted:
                from kafkalog.index.txn_index import AbortedTxn

                segment.append_aborted_txn(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            self._psm.complete_txn(txn)
        self._psm.update_map_end_offset(info.last_offset + 1)
        if self._high_watermark is None:
            self._psm.on_high_watermark_updated(self._log_end_offset)
        if self._unflushed_messages() >= self._config.flush_messages:
            self.flush()
        return info

    def _unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    # ------------------------------------------------------------------ roll

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo) -> tuple[LogSegment, bool]:
        seg = self.active_segment
        now = self._clock()
        if seg.should_roll(
            max_segment_bytes=self._config.segment_bytes, max_segment_ms=self._config.max_segment_ms(),
            messages_size=messages_size, max_timestamp_in_messages=info.max_timestamp,
            max_offset_in_messages=info.last_offset, now_ms=now,
        ):
            roll_offset = info.first_offset if info.first_offset >= 0 else info.last_offset - _I32_MAX
            return self._roll(roll_offset), True
        return seg, False

    @_storage_op("roll")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected, log end offset) and snapshot the producer state there."""
        with self._lock:
            self._check_open()
            return self._roll(expected_next_offset)

    def _roll(self, expected_next_offset: int | None) -> LogSegment:
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        active = self.active_segment
        if new_offset in self._segments:
            if active.base_offset == new_offset and active.size == 0:
                # KAFKA-6388: an empty active segment whose index is "full": replace it in place.
                self._segments.remove(new_offset)
                active.delete()
                seg = self._new_segment(new_offset)
            else:
                raise KafkaStorageError(f"segment at {new_offset} already exists in {self._dir}")
        elif new_offset < active.base_offset:
            raise KafkaStorageError(f"cannot roll to {new_offset}: below the active segment {active.base_offset}")
        else:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                p = file_name(self._dir, new_offset, suffix)
                if p.exists():
                    p.unlink()
            active.on_becoming_inactive()
            seg = self._new_segment(new_offset)
        self._psm.update_map_end_offset(new_offset)
        self._psm.take_snapshot()
        return seg

    def _new_segment(self, base: int) -> LogSegment:
        seg = LogSegment.open(self._dir, base, config=self._config, clock=self._clock)
        self._segments.add(seg)
        return seg

    # ------------------------------------------------------------------ read

    @_storage_op("read", reads_at=True)
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
            max_pos = active_size if seg is active else None
            nxt = self._segments.higher(seg.base_offset)
            got = seg.read_valid(offset, max_bytes, max_position=max_pos,
                                 limit=end if nxt is None else min(end, nxt.base_offset))
            if got:
                out = got
                break
            seg = nxt
        if max_offset is not None:
            out = [b for b in out if b.base_offset < max_offset]
        return out

    @_storage_op("offset lookup")
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
            if seg.largest_timestamp >= timestamp:
                return seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
        return None

    # ------------------------------------------------------------------ flush

    @_storage_op("flush")
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

    # ------------------------------------------------------------------ truncation

    @_storage_op("truncate")
    def truncate_to(self, target_offset: int) -> bool:
        """Drop everything at and above ``target_offset`` (follower truncation); True if anything was removed."""
        if target_offset < 0:
            raise OffsetOutOfRangeError(f"cannot truncate to negative offset {target_offset}")
        with self._lock:
            self._check_open()
            if target_offset >= self._log_end_offset:
                self._epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            first = self._segments.first
            if first is not None and first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset)
                return True
            doomed = [s for s in self._segments.values() if s.base_offset > target_offset]
            self._remove_and_delete_segments(doomed)
            self.active_segment.truncate_to(target_offset)
            self._log_end_offset = target_offset
            self._recovery_point = min(self._recovery_point, target_offset)
            self._delete_producer_snapshots(doomed)
            self._epoch_cache.truncate_from_end(target_offset)
            self._log_start_offset = min(target_offset, self._log_start_offset)
            rebuild_producer_state(
                self._psm, self._segments, self._log_start_offset, target_offset,
                reload_from_clean_shutdown=False, now=self._clock(),
            )
            if self._high_watermark is not None and self._high_watermark > target_offset:
                self._high_watermark = target_offset
            return True

    @_storage_op("truncate")
    def truncate_fully_and_start_at(self, new_offset: int, log_start_offset: int | None = None) -> None:
        """Delete every segment and start an empty one at ``new_offset`` (Kafka's truncateFullyAndStartAt)."""
        with self._lock:
            self._check_open()
            doomed = self._segments.values()
            self._remove_and_delete_segments(doomed)
            self._new_segment(new_offset)
            self._log_end_offset = new_offset
            self._recovery_point = new_offset
            self._delete_producer_snapshots(doomed)
            self._epoch_cache.clear_and_flush()
            self._psm.truncate_fully_and_start_at(new_offset)
            self._log_start_offset = new_offset if log_start_offset is None else log_start_offset
            rebuild_producer_state(
                self._psm, self._segments, self._log_start_offset, new_offset,
                reload_from_clean_shutdown=False, now=self._clock(),
            )
            if self._high_watermark is not None:
                self._high_watermark = new_offset

    # ------------------------------------------------------------------ retention

    @_storage_op("log start offset update")
    def maybe_increment_log_start_offset(self, new_log_start: int) -> bool:
        """Move the log start forward (DeleteRecords or retention); never past the high watermark."""
        with self._lock:
            if new_log_start > self.high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot move the log start to {new_log_start}: above the high watermark {self.high_watermark}"
                )
            if new_log_start <= self._log_start_offset:
                return False
            self._log_start_offset = new_log_start
            self._epoch_cache.truncate_from_start(new_log_start)
            self._psm.on_log_start_offset_incremented(new_log_start)
            self._recovery_point = max(self._recovery_point, new_log_start)
            return True

    @_storage_op("retention")
    def delete_old_segments(self) -> int:
        """Kafka's retention pass: log-start breach, then ``retention.bytes``, then ``retention.ms`` (by each
        segment's largest timestamp against ``clock``). Deleted segments are renamed ``.deleted`` and removed by
        ``delete_expired_files`` after ``file.delete.delay.ms``. Returns the number of segments deleted."""
        with self._lock:
            self._check_open()
            deleted = self._delete_log_start_breached()
            if self._config.delete:
                deleted += self._delete_retention_size_breached()
                deleted += self._delete_retention_ms_breached()
            return deleted

    def _delete_log_start_breached(self) -> int:
        return self._delete_old_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset
        )

    def _delete_retention_size_breached(self) -> int:
        limit = self._config.retention_bytes
        size = self.size
        if limit < 0 or size < limit:
            return 0
        diff = [size - limit]

        def pred(seg: LogSegment, _nxt: LogSegment | None) -> bool:
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False

        return self._delete_old_segments(pred)

    def _delete_retention_ms_breached(self) -> int:
        limit = self._config.retention_ms
        if limit < 0:
            return 0
        now = self._clock()
        return self._delete_old_segments(lambda seg, _nxt: now - seg.largest_timestamp > limit)

    def _delete_old_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        segs = self._segments.values()
        deletable: list[LogSegment] = []
        hw = self.high_watermark
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            if nxt is None and seg.size == 0:
                break
            if hw >= upper and predicate(seg, nxt):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        to_delete = deletable
        if len(self._segments) == len(deletable):
            new_seg = self._roll(None)
            if deletable[-1].base_offset == new_seg.base_offset:
                to_delete = deletable[:-1]
        self._remove_and_delete_segments(to_delete)
        self._delete_producer_snapshots(deletable)
        first = self._segments.first
        assert first is not None
        if first.base_offset > self._log_start_offset:
            self._log_start_offset = first.base_offset
            self._epoch_cache.truncate_from_start(self._log_start_offset)
            self._psm.on_log_start_offset_incremented(self._log_start_offset)
            self._recovery_point = max(self._recovery_point, self._log_start_offset)
        return len(deletable)

    def _remove_and_delete_segments(self, doomed: Sequence[LogSegment]) -> None:
        """Take segments out of the map and rename their files ``.deleted``; removal is scheduled."""
        if not doomed:
            return
        paths: list[Path] = []
        for seg in doomed:
            self._segments.remove(seg.base_offset)
            seg.rename_suffix(DELETED_SUFFIX)
            paths.append(Path(seg.log_path))
            for idx in (seg.offset_index, seg.time_index, seg.txn_index):
                paths.append(Path(idx.file))
        self._schedule_delete(paths)

    def _delete_producer_snapshots(self, segments: Sequence[LogSegment]) -> None:
        paths = []
        for seg in segments:
            p = self._psm.remove_and_mark_snapshot_for_deletion(seg.base_offset)
            if p is not None:
                paths.append(p)
        if paths:
            self._schedule_delete(paths)

    def _schedule_delete(self, paths: list[Path]) -> None:
        due = self._clock() + self._config.file_delete_delay_ms
        self._pending_deletes.append((due, paths))
        if self._config.file_delete_delay_ms <= 0:
            self.delete_expired_files()

    @_storage_op("file deletion")
    def delete_expired_files(self, now: int | None = None) -> int:
        """Remove ``.deleted`` files whose ``file.delete.delay.ms`` has passed (the manager's scheduler hook).
        Returns how many files were removed."""
        with self._lock:
            now = self._clock() if now is None else now
            keep: list[tuple[int, list[Path]]] = []
            removed = 0
            for due, paths in self._pending_deletes:
                if due > now:
                    keep.append((due, paths))
                    continue
                for p in paths:
                    try:
                        p.unlink()
                        removed += 1
                    except FileNotFoundError:
                        pass
            self._pending_deletes = keep
            return removed

    @property
    def pending_deletes(self) -> list[Path]:
        return [p for _, paths in self._pending_deletes for p in paths]

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self._dir} is closed")


def _epoch_entry(epoch: int, start: int):
    from kafkalog.log.epoch_cache import EpochEntry

    return EpochEntry(epoch, start)


def _renumber(records: list[Any], base: int) -> list[Any]:
    """Leader appends number records from the log end: Record objects get offsets base, base+1, ... (their
    own offsets are the producer's business), tuples pass through (build_batch numbers them)."""
    from dataclasses import replace

    from kafkalog.records import Record

    out = []
    for i, r in enumerate(records):
        out.append(replace(r, offset=base + i) if isinstance(r, Record) else r)
    return out
