"""LogSegment: one ``.log`` file with its offset, time and transaction indexes.

Mirrors Kafka's ``LogSegment``: the same index-interval rule, the same time-index max-timestamp rule, the same
recovery (rebuild every index from the batches, cut the file at the first invalid byte) and the same roll test.
Everything is lazy (KIP-263): opening a segment touches no file beyond creating an absent ``.log``; the ``.log``
handle and the index mmaps are made on first use, so a broker with many inactive segments starts fast.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kafkalog.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    LogSegmentOffsetOverflowError,
)
from kafkalog.index.base import READ_NOT_MAP_BYTES
from kafkalog.index.lazy import LazyIndexes
from kafkalog.index.offset_index import OffsetIndex
from kafkalog.index.time_index import TimeIndex, TimestampOffset
from kafkalog.index.txn_index import AbortedTxn, TransactionIndex
from kafkalog.io import file_access
from kafkalog.io.handle_cache import HandleCache
from kafkalog.limits import LONG_MAX, wall_clock_ms
from kafkalog.names import offset_to_name
from kafkalog.records.scan import scan_batches, small_batch_table
from kafkalog.segment.lifecycle import SegmentLifecycle
from kafkalog.segment.log_file import AppendedBatches, SegmentLogFile, frame_appended
from kafkalog.segment.reads import SegmentReads, TimestampAndOffset
from kafkalog.segment.recovery import (
    I32_MAX,
    EpochRecovery,
    PerBatchProgress,
    ProducerStateRecovery,
    one_pass_plan,
    rebuild_per_batch,
    replay_batches,
    valid_prefix,
)

# TimestampAndOffset is the reads' answer type; the log layer imports it from here with LogSegment.
__all__ = ["AppendedBatches", "LogSegment", "TimestampAndOffset"]


_DEFAULT_INDEX_INTERVAL = 4096
_DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024


class LogSegment(SegmentLogFile, LazyIndexes, SegmentReads, SegmentLifecycle):
    """A ``.log`` plus its three indexes. Not thread-safe by itself: the owning Log serialises writers.

    The ``.log`` descriptor and the index mappings are handles of a :class:`~kafkalog.io.handle_cache.HandleCache`
    (the Log's or LogManager's, else the process-wide one): the cache may close them whenever no thread is using
    them, and they reopen on the next use. Every use of the descriptor happens under ``_lock`` for that reason.
    """

    def __init__(
        self,
        dir: str | os.PathLike,
        base_offset: int,
        *,
        index_interval_bytes: int = _DEFAULT_INDEX_INTERVAL,
        max_index_size: int = _DEFAULT_MAX_INDEX_SIZE,
        roll_jitter_ms: int = 0,
        file_suffix: str = "",
        clock: Callable[[], int] | None = None,
        read_only: bool = False,
        handles: HandleCache | None = None,
    ) -> None:
        if handles is not None:
            self._handles = handles
        self._dir = dir if isinstance(dir, Path) else Path(dir)
        self._base_offset = int(base_offset)
        self._suffix = file_suffix
        self._read_only = read_only  # opened for reading only (a plan, an archive): no file created or written
        self.index_interval_bytes = int(index_interval_bytes)
        self.max_index_size = int(max_index_size)
        self.roll_jitter_ms = int(roll_jitter_ms)
        self._clock = clock or wall_clock_ms
        # File names as strings (names.file_name's rules); Path objects are made only when asked for, since
        # opening thousands of segments would otherwise build four per segment that are rarely used.
        if not isinstance(file_suffix, str) or "/" in file_suffix or "\0" in file_suffix:
            raise InvalidArgumentError(f"bad file suffix {file_suffix!r}")
        stem = os.path.join(str(self._dir), offset_to_name(self._base_offset))
        self._log_path = stem + ".log" + file_suffix
        # The three index objects are made on first use (LazyIndexes): a lazily loaded partition never touches
        # its inactive segments' indexes, so listing a segment must not pay for building them.
        self._stem = stem
        self._file = None  # opened on first use
        self._size: int | None = None  # known once the file is opened
        self._lock_obj: threading.RLock | None = None  # made on first use (_lock): most segments never need one
        self.created_ms = self._clock()
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp: int | None = None
        self._max_ts_and_offset: TimestampOffset | None = None  # None = not loaded from the time index yet

    # --- construction --------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dir: str | os.PathLike,
        base_offset: int,
        *,
        config=None,
        file_suffix: str = "",
        clock: Callable[[], int] | None = None,
        handles: HandleCache | None = None,
    ) -> LogSegment:
        """Open the segment at ``base_offset`` in ``dir``, creating an empty ``.log`` if absent.

        ``config`` is a ``LogConfig`` (or None for Kafka's defaults); only the index settings and jitter are used.
        """
        kwargs = {}
        if config is not None:
            kwargs = dict(
                index_interval_bytes=config.index_interval_bytes,
                max_index_size=config.segment_index_bytes,
                roll_jitter_ms=config.random_segment_jitter(),
            )
        seg = cls(dir, base_offset, file_suffix=file_suffix, clock=clock, handles=handles, **kwargs)
        if not os.path.exists(seg._log_fspath):
            seg._open_file()
        return seg

    def set_handle_cache(self, cache: HandleCache | None) -> None:
        """Count this segment's descriptor and index mappings in ``cache`` (None: the process-wide default)."""
        self._handles = cache
        if self._indexes_made():
            for idx in (self._offset_index, self._time_index, self._txn_index):
                idx.set_handle_cache(cache)

    # --- properties ----------------------------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        """The segment's first possible offset (the number in its file names)."""
        return self._base_offset

    @property
    def dir(self) -> Path:
        """The partition dir the segment's files are in."""
        return self._dir

    @property
    def log_path(self) -> Path:
        """The ``.log`` file's path (with the current suffix: ``.deleted``, ``.cleaned``, ``.swap``)."""
        return self._log_path

    @property
    def offset_index(self) -> OffsetIndex:
        """The segment's ``.index``: relative offset -> file position, every ``index.interval.bytes``."""
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        """The segment's ``.timeindex``: max timestamp -> offset, every ``index.interval.bytes``."""
        return self._time_index

    @property
    def txn_index(self) -> TransactionIndex:
        """The segment's ``.txnindex``: the aborted transactions whose markers are in this segment."""
        return self._txn_index

    @property
    def file_suffix(self) -> str:
        """The suffix after the extension ('' or ``.deleted``/``.cleaned``/``.swap``)."""
        return self._suffix

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self._base_offset}, path={str(self._log_path)!r})"

    # --- append --------------------------------------------------------------------------------------------------

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        """True when ``offset`` fits the index's 4-byte offset relative to ``base_offset``."""
        rel = offset - self._base_offset
        return 0 <= rel <= I32_MAX

    def append(self, batch_bytes: bytes | bytearray | memoryview, *, largest_offset: int | None = None,
               framed: AppendedBatches | None = None) -> int:
        """Append one or more whole batches (offsets already assigned); returns the bytes written.

        Index entries follow Kafka: an offset-index entry (last offset of the batch, its start position) when the
        bytes since the last entry exceed ``index.interval.bytes`` (checked before counting this batch), with a
        time-index entry for the max timestamp so far at the same moment. With ``largest_offset`` the whole call
        is one append of Kafka's ``LogSegment.append(largestOffset, records)``, as the cleaner makes it: one check
        for the call, an entry (``largest_offset``, the call's start position) when it passes. ``framed`` (with
        ``largest_offset`` only): what that append reads from the batches, from a caller that built them and knows
        it (the cleaner's compiled path), so they are not framed again.
        """
        data = memoryview(batch_bytes)
        if len(data) == 0:
            return 0
        if framed is None or largest_offset is None:
            framed = frame_appended(data)
        if not self.can_convert_to_relative_offset(framed.last_offset) or not self.can_convert_to_relative_offset(
            framed.first_base_offset
        ):
            raise LogSegmentOffsetOverflowError(
                f"offsets {framed.first_base_offset}..{framed.last_offset} do not fit segment {self._base_offset}"
            )
        # Kafka materialises both indexes on every append (offset range check, max-timestamp read), so their files
        # exist from the first append on; do the same so a closed segment always has its .index and .timeindex.
        self._offset_index.is_full()
        self._time_index.is_full()
        with self._lock:  # the fallback reader seeks the same file object; the handle cache waits for it
            f = self._open_file()
            physical = self._size
            assert physical is not None
            if physical == 0 and self._rolling_based_timestamp is None:
                self._rolling_based_timestamp = framed.first_max_timestamp
            self._unsynced = True
            file_access.append_at(f, data, physical)
            self._size = physical + len(data)
        max_ts = self.max_timestamp_so_far
        if largest_offset is not None:
            if not self.can_convert_to_relative_offset(largest_offset):
                raise LogSegmentOffsetOverflowError(
                    f"offset {largest_offset} does not fit segment {self._base_offset}")
            # Kafka keeps the first batch with a larger max timestamp than the segment's, and that batch's last offset
            if framed.max_timestamp > max_ts:
                self._max_ts_and_offset = TimestampOffset(framed.max_timestamp, framed.last_offset_of_max_timestamp)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                self._offset_index.append(largest_offset, physical)
                mt = self._max_ts_and_offset or TimestampOffset(-1, self._base_offset)
                self._time_index.maybe_append(mt.timestamp, mt.offset)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += len(data)
            return len(data)
        for batch in framed.batches:
            if batch.max_timestamp > max_ts:
                max_ts = batch.max_timestamp
                self._max_ts_and_offset = TimestampOffset(batch.max_timestamp, batch.offset_of_max_timestamp)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                self._offset_index.append(batch.last_offset, physical)
                mt = self._max_ts_and_offset or TimestampOffset(-1, self._base_offset)
                self._time_index.maybe_append(mt.timestamp, mt.offset)
                self._bytes_since_last_index_entry = 0
            physical += batch.size_in_bytes
            self._bytes_since_last_index_entry += batch.size_in_bytes
        return len(data)

    def append_aborted_txn(self, aborted: AbortedTxn) -> None:
        """Record an aborted transaction in the ``.txnindex`` (its ABORT marker is in this segment)."""
        self._txn_index.append(aborted)

    # --- max timestamp bookkeeping -------------------------------------------------------------------------------

    def _read_max_ts_and_offset(self) -> TimestampOffset:
        if self._max_ts_and_offset is None:
            ts, off = self._time_index.last_entry
            self._max_ts_and_offset = TimestampOffset(ts, off)
        return self._max_ts_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        """The largest batch timestamp appended so far (from the time index when not cached)."""
        return self._read_max_ts_and_offset().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """The offset that goes with ``max_timestamp_so_far``."""
        return self._read_max_ts_and_offset().offset

    @property
    def largest_timestamp(self) -> int:
        """The segment's largest record timestamp, or the file's mtime when it has none (Kafka's rule)."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        """The ``.log`` file's mtime in ms, which time-based retention falls back on."""
        return int(os.stat(self._log_path).st_mtime * 1000)

    # --- roll ----------------------------------------------------------------------------------------------------

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_based_timestamp is None:
            it, _ = self.scan(0)
            for batch in it:
                self._rolling_based_timestamp = batch.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Age used by the time-based roll: from the first batch's timestamp if it has one, else since creation."""
        self._load_first_batch_timestamp()
        ts = -1 if self._rolling_based_timestamp is None else self._rolling_based_timestamp
        return message_timestamp - ts if ts >= 0 else now_ms - self.created_ms

    @property
    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, which ``segment.ms`` rolls are measured from (Long.MAX_VALUE when none)."""
        self._load_first_batch_timestamp()
        ts = self._rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else LONG_MAX

    def should_roll(
        self,
        *,
        max_segment_bytes: int,
        max_segment_ms: int,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll test, evaluated before appending a batch set."""
        size = self.size
        reached_roll_ms = self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > max_segment_ms - self.roll_jitter_ms
        return (
            size > max_segment_bytes - messages_size
            or (size > 0 and reached_roll_ms)
            or self._offset_index.is_full()
            or self._time_index.is_full()
            or not self.can_convert_to_relative_offset(max_offset_in_messages)
        )

    # --- recovery and checks -------------------------------------------------------------------------------------

    def recover(self, producer_state: ProducerStateRecovery | None = None,
                leader_epoch_cache: EpochRecovery | None = None) -> int:
        """Rebuild every index from the batches and cut the ``.log`` at the first invalid byte.

        ``producer_state`` (a ProducerStateManager) and ``leader_epoch_cache`` are updated per batch as Kafka's
        recovery does, so transactions aborted in this segment land in the rebuilt ``.txnindex``.
        Returns the number of bytes truncated.

        One pass (:func:`~kafkalog.segment.recovery.one_pass_plan`): ``scan_batches`` gives every header as numpy
        columns with the CRCs checked, the valid prefix (:meth:`valid_prefix`'s rules) and both indexes are
        computed from the columns, and each index file is written once; only batches that need per-batch work (a
        producer id, a leader-epoch change) become ``RecordBatch`` objects. The files are byte for byte those of
        :meth:`_recover_per_batch`, which still handles what the columns cannot (legacy batches, no mmap, an
        index that would fill up).
        """
        size = self.size
        with self._read_map(size, READ_NOT_MAP_BYTES) as buf:
            plan = None if buf is None else one_pass_plan(buf, size, self._base_offset, self.index_interval_bytes,
                                                          self.max_index_size)
            if plan is not None:
                self._txn_index.reset()  # the offset and time index files are rewritten whole below
                replay_batches(buf, plan, producer_state, leader_epoch_cache, self)
        if plan is None:
            return self._recover_per_batch(producer_state, leader_epoch_cache)
        valid_bytes = plan.valid_bytes
        truncated = size - valid_bytes
        if truncated > 0:
            self._truncate_file(valid_bytes)
        self._offset_index.replace_entries(plan.offset_entries)
        self._time_index.replace_entries(plan.time_entries)
        self._max_ts_and_offset = plan.max_ts_and_offset
        self._bytes_since_last_index_entry = valid_bytes - plan.last_index_position
        return truncated

    def _recover_per_batch(self, producer_state: ProducerStateRecovery | None = None,
                           leader_epoch_cache: EpochRecovery | None = None) -> int:
        """The batch-at-a-time recovery (two passes, one index append per entry): the reference the one-pass
        :meth:`recover` must equal byte for byte, and its path for legacy (magic 0/1) batches, files that cannot
        be mapped, and rebuilds whose indexes would fill up (it raises exactly where Kafka's appends would)."""
        size = self.size
        valid_bytes = self.valid_prefix(size)
        self._offset_index.reset()
        self._time_index.reset()
        self._txn_index.reset()
        self._max_ts_and_offset = TimestampOffset(-1, -1)
        progress = PerBatchProgress()
        it, _ = self.scan(0, valid_bytes)
        try:
            rebuild_per_batch(it, self._offset_index, self._time_index, self.index_interval_bytes, producer_state,
                              leader_epoch_cache, self, progress)
        finally:  # what was reached, also when an index append raised
            self._max_ts_and_offset = progress.max_ts_and_offset
        last_index_entry = progress.last_index_entry
        truncated = size - valid_bytes
        if truncated > 0:
            self._truncate_file(valid_bytes)
        self._offset_index.trim_to_valid_size()
        self._time_index.maybe_append(*self._max_ts_and_offset, skip_full_check=True)
        self._time_index.trim_to_valid_size()
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        return truncated

    def valid_prefix(self, size: int | None = None) -> int:
        """End of the longest prefix of whole, CRC-valid batches whose offsets fit the segment and move forward
        (the rules: :func:`kafkalog.segment.recovery.valid_prefix`)."""
        size = self.size if size is None else size
        it, state = self.scan(0, size, validate=True)
        return valid_prefix(it, state, self._base_offset)

    def sanity_check(self, *, strict: bool = False, whole_batches: bool = False) -> None:
        """Kafka's checks: the offset index must exist (else the segment needs recovery, FileNotFoundError);
        txn index sane; offset and time index sane. With ``strict`` also kafkalog's stricter index checks against
        the batches in the ``.log`` (entries strictly increasing, positions inside the file, each offset entry
        at a batch start whose last offset matches); with ``whole_batches`` too, the ``.log`` must end on a whole
        batch (CorruptRecordError otherwise). One shallow scan serves both."""
        if not self._offset_index.exists():
            raise FileNotFoundError(f"offset index file {self._offset_index.file} does not exist")
        with self._offset_index.read_for_check(), self._time_index.read_for_check():
            self._sanity_check(strict, whole_batches)

    def _sanity_check(self, strict: bool, whole_batches: bool) -> None:
        self._txn_index.sanity_check()
        self._offset_index.sanity_check()
        self._time_index.sanity_check()
        if strict:
            starts, lasts, max_ts, _, valid_end = self._batch_columns()
            size = self.size
            if whole_batches and valid_end < size:
                raise CorruptRecordError(f"{size - valid_end} bytes after the last whole batch", position=valid_end)
            next_offset = int(lasts[-1]) + 1 if len(lasts) else self._base_offset
            self._offset_index.strict_check(size, batch_starts=starts, batch_last_offsets=lasts)
            self._time_index.strict_check(
                next_offset=next_offset, batch_last_offsets=lasts, batch_max_timestamps=max_ts
            )
            self._txn_index.strict_check(next_offset=next_offset)

    def batch_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Start positions, last offsets, max timestamps and is-magic-2 flags of every whole batch (shallow scan,
        no CRC): what the strict index checks compare entries against."""
        starts, lasts, max_ts, v2, _ = self._batch_columns()
        if isinstance(starts, list):
            return (np.asarray(starts, dtype=np.int64), np.asarray(lasts, dtype=np.int64),
                    np.asarray(max_ts, dtype=np.int64), np.asarray(v2, dtype=bool))
        return starts, lasts, max_ts, v2

    def _batch_columns(self) -> tuple:
        """``batch_table`` plus the end of the last whole batch: the header columns of ``scan_batches`` over a
        read-only map when the file can be mapped, else the batch-by-batch scan. A small file of whole v2 batches
        (the usual active segment) gives Python lists instead (``small_batch_table``), which the indexes' strict
        checks take without numpy."""
        self._open_file()
        size = self.size
        with self._read_map(size, READ_NOT_MAP_BYTES) as buf:
            small = None if buf is None else small_batch_table(buf, size)
            if small is not None:
                return small[0], small[1], small[2], [True] * len(small[0]), size
            scan = None if buf is None else scan_batches(buf, position=0, end=size, check_crc=False)
        if scan is not None:
            h = scan.headers
            lasts = h["base_offset"].astype(np.int64) + h["last_offset_delta"].astype(np.int64)
            return (scan.positions, lasts, h["max_timestamp"].astype(np.int64), h["magic"] >= 2,
                    int(scan.valid_bytes))
        starts: list[int] = []
        lasts_l: list[int] = []
        max_ts: list[int] = []
        v2: list[bool] = []
        it, state = self.scan(0)
        for batch in it:
            starts.append(batch.position)
            lasts_l.append(batch.last_offset)
            max_ts.append(batch.max_timestamp)
            v2.append(batch.magic >= 2)
        return (
            np.asarray(starts, dtype=np.int64),
            np.asarray(lasts_l, dtype=np.int64),
            np.asarray(max_ts, dtype=np.int64),
            np.asarray(v2, dtype=bool),
            int(state["valid_end"]),
        )

    def has_overflow(self) -> bool:
        """True when the segment holds an offset too far from its base for the 4-byte index (Kafka splits it)."""
        next_offset = self.read_next_offset()
        return next_offset > self._base_offset and not self.can_convert_to_relative_offset(next_offset - 1)

