"""The cleaner's chunk loops on decoded columns and the compiled core (``native.py``): the same decisions as
``Cleaner._map_segment``'s record loop and ``batch_filter.filter_batches``, with no Python object per record.

A read chunk is decoded once into columns (``kafkalog.records.read_record_columns``). Building the map hands the
records of its data batches to ``build_map`` (MD5, insert, latest offset, stop when full); filtering classifies
every record against the map in one call, decides per batch with numpy (kept records, tombstones, horizons,
producers' last batches), copies batches that keep every record as their bytes, and re-encodes the records of
the others in one call (``encode_records``), adding the header in Python. A chunk these loops do not take (a
batch other than magic 2; in the filter also a control or transactional batch; a chunk whose columns do not
decode as ``read_batches`` framed it) returns None and goes through the per-record Python path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kafkalog.errors import CorruptRecordError
from kafkalog.records.batch import RECORD_BATCH_OVERHEAD, assemble_batch, build_empty_batch
from kafkalog.records.columns import RecordColumns, read_record_columns
from kafkalog.records.compression import CompressionType
from kafkalog.records.record import TimestampType

from . import native
from .batch_filter import CleanerFilter, CleanerStats, FilterResult, LastRecord
from .offset_map import OffsetMap
from .txn_metadata import CleanedTransactionMetadata

__all__ = ["ChunkColumns", "decode_chunk", "map_chunk", "filter_chunk"]

_CODECS = tuple(CompressionType)
_ENCODE_COLUMNS = ("offset", "timestamp", "key_offsets", "key_valid", "key_data", "value_offsets", "value_valid",
                   "value_data", "header_offsets", "header_key_offsets", "header_key_data", "header_value_offsets",
                   "header_value_valid", "header_value_data")
_HORIZON_BIT = 0x40


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
        self.counts = np.diff(np.append(self.batch_start, self.n))

    def plain(self) -> bool:
        """No control and no transactional batch."""
        a = self.cols.arrays
        return not (a["is_control"].any() or a["is_transactional"].any())


def _field(u8: np.ndarray, pos: np.ndarray, at: int, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return u8[pos[:, None] + np.arange(at, at + width)].copy().view(dtype).ravel().astype(np.int64)


def decode_chunk(chunk: memoryview, valid: int) -> ChunkColumns | None:
    """The chunk's columns when every batch is magic 2 and decodes exactly as ``read_batches`` framed it (its
    ``valid`` bytes), else None."""
    try:
        cols = read_record_columns(chunk[:valid], verify_crc=False)
    except CorruptRecordError:
        return None
    if cols.error is not None or cols.valid_bytes != valid or not len(cols.arrays["batch_start"]):
        return None
    if (cols.arrays["batch_magic"] != 2).any():
        return None
    return ChunkColumns(chunk, cols)


def map_chunk(cc: ChunkColumns, batches: Sequence[Any], omap: OffsetMap, start: int, desired: int,
              txn: CleanedTransactionMetadata, stats: CleanerStats) -> bool:
    """``Cleaner._map_segment``'s loop over one chunk; True when the map filled up."""
    kinds = np.zeros(cc.nb, np.int8)
    if cc.plain():
        txn._consume_aborted_up_to(int(cc.last_offset[-1]))
    else:
        for i, batch in enumerate(batches):
            if batch.is_control:
                txn.on_control_batch_read(batch)
                kinds[i] = 1
            elif txn.on_batch_read(batch):
                kinds[i] = 2
    a = cc.cols.arrays
    size, latest, read, full = native.compiled.build_map(
        omap.table, omap.size, desired, start, omap.latest_offset, a["offset"], a["key_offsets"], a["key_valid"],
        a["key_data"], cc.batch_start, kinds, cc.last_offset, cc.header_count)
    omap.set_state(size, latest)
    stats.map_messages_read += read
    return full


def filter_chunk(chunk: memoryview, cc: ChunkColumns, flt: CleanerFilter) -> FilterResult | None:
    """``filter_batches`` over one chunk of plain batches (None for a chunk with control or transactional ones)."""
    if not cc.plain():
        return None
    omap = flt.map
    a = cc.cols.arrays
    nb, n = cc.nb, cc.n
    flt.txn._consume_aborted_up_to(int(cc.last_offset[-1]))
    codes = np.empty(n, np.uint8)
    native.compiled.classify(omap.table, omap.size, omap.latest_offset, a["offset"], a["key_offsets"],
                             a["key_valid"], a["key_data"], codes)
    flt.stats.invalid_messages_read += int(np.count_nonzero(codes == 2))
    has_horizon = (cc.attributes & _HORIZON_BIT) != 0
    keep_deletes = ~has_horizon | (flt.now_ms < cc.base_timestamp)
    rec_batch = np.repeat(np.arange(nb), cc.counts)
    value_valid = a["value_valid"].astype(bool)
    keep = (codes == 3) | ((codes == 1) & (value_valid | keep_deletes[rec_batch]))
    kept = np.bincount(rec_batch, weights=keep, minlength=nb).astype(np.int64)
    tombs = np.bincount(rec_batch, weights=keep & ~value_valid, minlength=nb) > 0
    set_horizon = tombs & ~has_horizon
    copy = (kept > 0) & (kept == cc.counts) & ~set_horizon
    rebuild = np.flatnonzero((kept > 0) & ~copy)
    result = FilterResult(bytes_read=int(cc.size.sum()), messages_read=n)
    rebuilt = _rebuild(cc, rebuild, keep, set_horizon, flt) if len(rebuild) else {}
    empties = np.flatnonzero(kept == 0)
    retain_empty = {int(b) for b in empties if _retain_empty(cc, int(b), flt)}
    out = result.output
    run_start = -1  # first batch of a run of copied batches, written as one slice
    for b in range(nb + 1):
        if b < nb and copy[b]:
            if run_start < 0:
                run_start = b
            continue
        if run_start >= 0:
            lo = int(cc.position[run_start])
            hi = int(cc.position[b - 1] + cc.size[b - 1])
            out += chunk[lo:hi]
            run_start = -1
        if b == nb:
            break
        if b in rebuilt:
            data, max_ts, max_off = rebuilt[b]
            out += data
            result._retained(max_ts, max_off, int(kept[b]), len(data))
        elif b in retain_empty:
            out += _empty_batch(cc, b)
            result._retained(int(cc.max_timestamp[b]), int(cc.last_offset[b]), 0, RECORD_BATCH_OVERHEAD)
    if copy.any():
        result._retained(int(cc.max_timestamp[copy].max()), int(cc.last_offset[copy].max()),
                         int(kept[copy].sum()), int(cc.size[copy].sum()))
    return result


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
        max_timestamp=int(cc.max_timestamp[b]), is_transactional=False, is_control=False)


def _rebuild(cc: ChunkColumns, batches: np.ndarray, keep: np.ndarray, set_horizon: np.ndarray,
             flt: CleanerFilter) -> dict[int, tuple[bytes, int, int]]:
    """batch -> (rebuilt bytes, max timestamp, max offset kept) for each batch in ``batches``."""
    a = cc.cols.arrays
    kept_idx = []
    for b in batches:
        lo = int(cc.batch_start[b])
        kept_idx.append(lo + np.flatnonzero(keep[lo:lo + int(cc.counts[b])]))
    idx = np.concatenate(kept_idx).astype(np.int64)
    bounds = np.zeros(len(batches) + 1, np.int64)
    np.cumsum([len(k) for k in kept_idx], out=bounds[1:])
    has_horizon = (cc.attributes[batches] & _HORIZON_BIT) != 0
    horizon = np.where(set_horizon[batches], flt.now_ms + flt.delete_retention_ms, cc.base_timestamp[batches])
    with_horizon = has_horizon | set_horizon[batches]
    ts = a["timestamp"]
    offsets = a["offset"]
    first_ts = ts[idx[bounds[:-1]]]
    base_ts = np.where(with_horizon, horizon, first_ts).astype(np.int64)
    base_offsets = cc.base_offset[batches].astype(np.int64)
    sections = native.compiled.encode_records(tuple(a[c] for c in _ENCODE_COLUMNS), idx, bounds, base_offsets,
                                              base_ts)
    out = {}
    log_append = int(TimestampType.LOG_APPEND_TIME)
    for j, b in enumerate(batches.tolist()):
        sel = idx[bounds[j]:bounds[j + 1]]
        ts_type = int(a["timestamp_type"][b])
        max_ts = int(cc.max_timestamp[b]) if ts_type == log_append else int(ts[sel].max())
        data = assemble_batch(
            sections[j], count=len(sel), base_offset=int(base_offsets[j]),
            last_offset_delta=int(cc.last_offset[b] - cc.base_offset[b]), base_timestamp=int(base_ts[j]),
            max_timestamp=max_ts, compression=_CODECS[int(cc.attributes[b]) & 0x07], timestamp_type=ts_type,
            producer_id=int(a["producer_id"][b]), producer_epoch=int(a["producer_epoch"][b]),
            base_sequence=int(a["base_sequence"][b]), partition_leader_epoch=int(a["partition_leader_epoch"][b]),
            is_transactional=False, is_control=False, has_delete_horizon=bool(with_horizon[j]))
        out[b] = (data, max_ts, int(offsets[sel].max()))
    return out
