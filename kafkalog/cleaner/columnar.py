"""The cleaner's chunk loops on decoded columns and the compiled core (``native.py``): the same decisions as
``Cleaner._map_segment``'s record loop and ``batch_filter.filter_batches``, with no Python object per record.

A read chunk is decoded once into columns (``kafkalog.records.read_record_columns``). Building the map hands the
records of its data batches to ``build_map`` (MD5, insert, latest offset, stop when full); filtering classifies
every record against the map in one call, decides per batch with numpy (kept records, tombstones, horizons,
producers' last batches; a chunk with control or transactional batches asks ``CleanerFilter.check_batch`` per
batch for the transaction bookkeeping), and ``write_chunk`` writes the output: batches that keep every record
copied as their bytes, the others rebuilt in C (a compressed one's records section goes through the codec
function of ``compression.compressors()``). A chunk these loops do not take (a batch other than magic 2, records
that do not decode) has no columns and goes through the per-record Python path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from kafkalog.errors import CleanerError, CorruptRecordError
from kafkalog.records.batch import build_empty_batch
from kafkalog.records.columns import RecordColumnReader, RecordColumns
from kafkalog.records.compression import compressors
from kafkalog.records.reader import read_batches
from kafkalog.records.record import TimestampType
from kafkalog.segment.log_file import AppendedBatches

from . import native
from .batch_filter import BatchRetention, CleanerFilter, CleanerStats, FilterResult, LastRecord
from .offset_map import OffsetMap
from .txn_metadata import CleanedTransactionMetadata

__all__ = ["Chunk", "ChunkColumns", "Superseded", "read_chunk", "map_chunk", "filter_chunk"]

_ENCODE_COLUMNS = ("offset", "timestamp", "key_offsets", "key_valid", "key_data", "value_offsets", "value_valid",
                   "value_data", "header_offsets", "header_key_offsets", "header_key_data", "header_value_offsets",
                   "header_value_valid", "header_value_data")
_HORIZON_BIT = 0x40
_MAGIC = 16  # the magic byte's position in a batch


class ChunkColumns:
    """A chunk's records as columns plus the batch header fields the cleaner needs (numpy arrays per batch)."""

    def __init__(self, chunk: memoryview, cols: RecordColumns) -> None:
        a = cols.arrays
        self.cols = cols
        self.n = len(cols)
        self.batch_start = a["batch_start"]
        self.nb = len(self.batch_start)
        pos = a["batch_position"]
        u8 = np.frombuffer(chunk, np.uint8)
        self.position = pos
        self.size = _field(u8, pos, 8, ">i4") + 12
        self.attributes = _field(u8, pos, 21, ">i2")
        self.base_offset = a["batch_base_offset"]
        self.last_offset = self.base_offset + _field(u8, pos, 23, ">i4")
        self.base_timestamp = _field(u8, pos, 27, ">i8")
        self.max_timestamp = _field(u8, pos, 35, ">i8")
        self.header_count = _field(u8, pos, 57, ">i4").astype(np.int32)
        #: the records decoded per batch: none for a batch the decoder framed without them (``Superseded``)
        self.counts = np.diff(np.append(self.batch_start, self.n))
        #: the records read per batch, as Kafka counts them: those decoded, or the header's count where none were
        self.read_counts = np.where(self.counts == 0, self.header_count, self.counts)

    def plain(self) -> bool:
        """No control and no transactional batch."""
        a = self.cols.arrays
        return not (a["is_control"].any() or a["is_transactional"].any())


def _field(u8: np.ndarray, pos: np.ndarray, at: int, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return u8[pos[:, None] + np.arange(at, at + width)].copy().view(dtype).ravel().astype(np.int64)


class Chunk:
    """One read chunk: its bytes, how many of them are whole batches (``valid``), their columns when the compiled
    loops can take them, and the batches as objects (framed on first use: the fast loops do not need them)."""

    def __init__(self, data: memoryview, valid: int, columns: ChunkColumns | None,
                 batches: list[Any] | None = None) -> None:
        self.data = data
        self.valid = valid
        self.columns = columns
        self._batches = batches

    @property
    def batches(self) -> list[Any]:
        if self._batches is None:
            self._batches = list(read_batches(self.data[:self.valid]))
        return self._batches

    def record_count(self) -> int:
        """The record counts of the batch headers, summed."""
        if self.columns is not None:
            return int(self.columns.header_count.sum())
        return sum(b.record_count for b in self.batches)


class Superseded:
    """The batches of a clean pass that keep no record, known from the offset map before they are read: a data
    batch (neither control nor transactional) inside the offsets the map covers keeps a record only if one of its
    offsets is a mapped key's latest (a value of the map) or a record without a key (which Kafka counts as
    invalid). The clean pass's decoder frames the others without decompressing them (``_columns.c``'s
    ``Superseded``); ``filter_chunk`` drops them, or keeps them empty, as it would after decoding them.

    Built while the map is: the offsets of records without a key are noted chunk by chunk (at most
    ``MAX_NO_KEY``; past that, or when a chunk took the per-record path, nothing is skipped)."""

    MAX_NO_KEY = 1 << 20

    def __init__(self, start: int) -> None:
        self.start = start
        self.usable = True
        self._no_key: list[np.ndarray] = []
        self._no_key_count = 0

    def note_chunk(self, cc: ChunkColumns) -> None:
        """The map pass read ``cc``: remember its records without a key."""
        a = cc.cols.arrays
        offsets = a["offset"][(a["key_valid"] == 0) & (a["offset"] >= self.start)]
        if len(offsets):
            self._no_key.append(offsets.astype(np.int64))
            self._no_key_count += len(offsets)
            self.usable = self.usable and self._no_key_count <= self.MAX_NO_KEY

    def for_decoder(self, omap: OffsetMap) -> tuple[np.ndarray, int, int] | None:
        """(live offsets sorted, first, last offset the map covers) for the decoder, or None (skip nothing)."""
        if not self.usable or omap.table is None or omap.latest_offset < self.start:
            return None
        values = np.empty(omap.size, np.int64)
        n = native.compiled.map_offsets(omap.table, omap.size, values)
        live = np.sort(np.concatenate([values[:n], *self._no_key]))
        return live, self.start, omap.latest_offset


def read_chunk(data: bytes, compiled: bool, superseded: tuple[np.ndarray, int, int] | None = None) -> Chunk:
    """Frame ``data`` as ``read_batches`` does (whole batches from its start); with ``compiled``, decode a chunk
    that starts with a magic 2 batch into columns, which frame it the same way (a chunk whose records do not
    decode is framed by ``read_batches`` and left to the per-record path, which raises what it raises).
    ``superseded``: ``Superseded.for_decoder``, the batches to frame without decoding their records."""
    view = memoryview(data)
    if compiled and len(data) > _MAGIC and data[_MAGIC] == 2:
        reader = RecordColumnReader(view, verify_crc=False, max_records=None, max_bytes=None)
        reader.superseded = superseded
        try:
            cols: RecordColumns | None = list(reader._chunks())[-1]
        except CorruptRecordError:
            cols = None
        finally:
            reader.close()
        if cols is not None:
            nb = len(cols.arrays["batch_start"])
            plain_v2 = nb and not (cols.arrays["batch_magic"] != 2).any()
            return Chunk(view, cols.valid_bytes, ChunkColumns(view, cols) if plain_v2 else None)
    reader = read_batches(view)
    batches = list(reader)
    return Chunk(view, reader.valid_bytes, None, batches)


def map_chunk(chunk: Chunk, omap: OffsetMap, start: int, desired: int, txn: CleanedTransactionMetadata,
              stats: CleanerStats) -> bool | None:
    """``Cleaner._map_segment``'s loop over one chunk with columns; True when the map filled up (None: the
    batches as objects do not line up with the columns, nothing done)."""
    cc = chunk.columns
    assert cc is not None
    kinds = np.zeros(cc.nb, np.int8)
    if cc.plain():
        txn._consume_aborted_up_to(int(cc.last_offset[-1]))
    elif not _aligned(chunk):
        return None
    else:
        for i, batch in enumerate(chunk.batches):
            if batch.is_control:
                txn.on_control_batch_read(batch)
                kinds[i] = 1
            elif txn.on_batch_read(batch):
                kinds[i] = 2
    a = cc.cols.arrays
    try:
        size, latest, read, full = native.compiled.build_map(
            omap.table, omap.size, desired, start, omap.latest_offset, a["offset"], a["key_offsets"],
            a["key_valid"], a["key_data"], cc.batch_start, kinds, cc.last_offset, cc.header_count)
    except OverflowError as exc:  # a load factor above 1 filled every slot: Kafka's put refuses that too
        raise CleanerError(str(exc)) from None
    omap.set_state(size, latest)
    stats.map_messages_read += read
    return full


def filter_chunk(chunk: Chunk, flt: CleanerFilter) -> FilterResult | None:
    """``filter_batches`` over one chunk with columns (None when its batches as objects do not line up with them).
    Plain chunks are decided in numpy alone; a chunk with a control or transactional batch asks
    ``CleanerFilter.check_batch`` batch by batch (the transaction bookkeeping) and decides its records in bulk."""
    cc = chunk.columns
    assert cc is not None
    omap = flt.map
    a = cc.cols.arrays
    nb, n = cc.nb, cc.n
    has_horizon = (cc.attributes & _HORIZON_BIT) != 0
    control = a["is_control"].astype(bool)
    if cc.plain():
        flt.txn._consume_aborted_up_to(int(cc.last_offset[-1]))
        discard = delete = marker_of_empty_txn = np.zeros(nb, bool)
        maybe_empty = (a["producer_id"] >= 0) | (cc.last_offset + 1 == flt.upper_bound_offset)
        retain_empty = np.zeros(nb, bool)
        retain_empty[[int(b) for b in np.flatnonzero(maybe_empty) if _retain_empty(cc, int(b), flt)]] = True
    else:
        decided = _check_batches(chunk, flt)
        if decided is None:
            return None
        discard, delete, marker_of_empty_txn, retain_empty = decided
    codes = np.empty(n, np.uint8)
    native.compiled.classify(omap.table, omap.size, omap.latest_offset, a["offset"], a["key_offsets"],
                             a["key_valid"], a["key_data"], codes)
    rec_batch = np.repeat(np.arange(nb), cc.counts)
    decided_by_map = ~(discard | control)[rec_batch]  # the records keep_record looks up
    flt.stats.invalid_messages_read += int(np.count_nonzero((codes == 2) & decided_by_map & ~delete[rec_batch]))
    keep_deletes = ~has_horizon | (flt.now_ms < cc.base_timestamp)
    value_valid = a["value_valid"].astype(bool)
    keep = (codes == 3) | ((codes == 1) & (value_valid | keep_deletes[rec_batch]))
    keep = np.where(decided_by_map, keep, control[rec_batch] & ~discard[rec_batch])
    kept = np.bincount(rec_batch, weights=keep, minlength=nb).astype(np.int64)
    tombs = np.bincount(rec_batch, weights=keep & ~value_valid, minlength=nb) > 0
    set_horizon = (tombs | marker_of_empty_txn) & ~has_horizon
    copy = (kept > 0) & (kept == cc.counts) & ~set_horizon
    rebuild = (kept > 0) & ~copy
    empties = np.flatnonzero((kept == 0) & retain_empty).tolist()
    result = FilterResult(bytes_read=int(cc.size.sum()), messages_read=int(cc.read_counts[~delete].sum()))
    actions = np.where(copy, 1, np.where(rebuild, 2, 0)).astype(np.int8)
    retained = copy | rebuild
    retained[empties] = True
    # the records each rebuilt batch keeps, batch by batch: idx[bounds[j]:bounds[j + 1]] for the j-th
    rb = np.flatnonzero(rebuild)
    idx = np.flatnonzero(keep & rebuild[rec_batch])
    bounds = np.zeros(len(rb) + 1, np.int64)
    np.cumsum(kept[rb], out=bounds[1:])
    ts, offsets = a["timestamp"], a["offset"]
    with_horizon = has_horizon[rb] | set_horizon[rb]
    horizon = np.where(set_horizon[rb], flt.now_ms + flt.delete_retention_ms, cc.base_timestamp[rb])
    base_ts = np.where(with_horizon, horizon, ts[idx[bounds[:-1]]] if len(rb) else 0).astype(np.int64)
    starts = bounds[:-1]
    log_append = a["timestamp_type"][rb] == int(TimestampType.LOG_APPEND_TIME)
    max_ts = np.where(log_append, cc.max_timestamp[rb],
                      np.maximum.reduceat(ts[idx], starts) if len(rb) else 0).astype(np.int64)
    max_off = np.maximum.reduceat(offsets[idx], starts) if len(rb) else np.zeros(0, np.int64)
    extras = [_empty_batch(cc, b) for b in empties]  # in file order, as write_chunk takes them
    actions[empties] = 3
    result.output = native.compiled.write_chunk(
        chunk.data, cc.position, cc.size, actions, tuple(a[c] for c in _ENCODE_COLUMNS), idx.astype(np.int64),
        bounds, base_ts, with_horizon.astype(np.uint8), max_ts, extras, compressors())
    if retained.any():
        result.messages_retained = int(kept[retained].sum())
        result.bytes_retained = len(result.output)
        out_ts = cc.max_timestamp.copy()  # each written batch's max timestamp (rebuilt ones: of what they keep)
        out_ts[rb] = max_ts
        out_off = cc.last_offset.copy()
        out_off[rb] = max_off
        result.max_timestamp = int(out_ts[retained].max())
        result.max_offset = int(out_off[retained].max())
        written = np.flatnonzero(retained)
        top = written[int(np.argmax(out_ts[written]))]  # the first batch with the largest max timestamp
        result.framed = AppendedBatches(int(cc.base_offset[written[0]]), int(cc.last_offset[written[-1]]),
                                        int(out_ts[written[0]]), int(out_ts[top]), int(cc.last_offset[top]))
    return result


def _check_batches(chunk: Chunk, flt: CleanerFilter) -> tuple[np.ndarray, ...] | None:
    """Per batch (discard its records, delete it, a marker of a transaction with nothing left, retain it empty),
    from ``CleanerFilter.check_batch`` in file order; None when the batches do not line up with the columns."""
    if not _aligned(chunk):
        return None
    cc, batches = chunk.columns, chunk.batches
    discard, delete, marker, retain_empty = (np.zeros(cc.nb, bool) for _ in range(4))
    for i, batch in enumerate(batches):
        retention, marker[i] = flt.check_batch(batch)
        discard[i] = flt._discard_records
        delete[i] = retention is BatchRetention.DELETE
        retain_empty[i] = retention is BatchRetention.RETAIN_EMPTY
    return discard, delete, marker, retain_empty


def _aligned(chunk: Chunk) -> bool:
    """Whether the chunk's batches as objects are its columns' batches, one for one."""
    batches, cc = chunk.batches, chunk.columns
    return len(batches) == cc.nb and all(b.position == p for b, p in zip(batches, cc.position.tolist(), strict=True))


def _retain_empty(cc: ChunkColumns, b: int, flt: CleanerFilter) -> bool:
    """``CleanerFilter.check_batch``'s RETAIN_EMPTY for a plain batch: a producer's last batch or the pass's last."""
    pid = int(cc.cols.arrays["producer_id"][b])
    if pid >= 0 and _is_last_of_producer(flt.last_records, pid, int(cc.last_offset[b])):
        return True
    return int(cc.last_offset[b]) + 1 == flt.upper_bound_offset


def _is_last_of_producer(last_records: Mapping[int, LastRecord], pid: int, last_offset: int) -> bool:
    last = last_records.get(pid)
    return last is not None and last.last_data_offset is not None and last.last_data_offset == last_offset


def _empty_batch(cc: ChunkColumns, b: int) -> bytes:
    a = cc.cols.arrays
    return build_empty_batch(
        base_offset=int(cc.base_offset[b]), last_offset=int(cc.last_offset[b]), producer_id=int(a["producer_id"][b]),
        producer_epoch=int(a["producer_epoch"][b]), base_sequence=int(a["base_sequence"][b]),
        partition_leader_epoch=int(a["partition_leader_epoch"][b]), timestamp_type=int(a["timestamp_type"][b]),
        max_timestamp=int(cc.max_timestamp[b]), is_transactional=bool(a["is_transactional"][b]),
        is_control=bool(a["is_control"][b]))
