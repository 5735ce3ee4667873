"""One segment's records as Arrow record batches for the ``kafkalog`` DataSource: columns, not Python objects.

The records are decoded by :func:`kafkalog.records.iter_record_columns` (the compiled column builder when built) in
bounded chunks; the offset range and the isolation level become one numpy mask per chunk, and the DataSource's
columns are the chunk's Arrow columns (key/value/header bytes wrapped, not copied) plus the constant topic and
partition. Nothing here creates an object per record.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from kafkalog.errors import CorruptRecordError
from kafkalog.io.file_access import mapped_range
from kafkalog.log.salvage_scan import next_batch_position
from kafkalog.records import iter_record_columns
from kafkalog.records.columns import numpy_arrow

__all__ = ["COLUMNS", "SCHEMA", "ScanMetrics", "ScanSpec", "arrow_schema", "coalesced", "read_scan_metrics",
           "scan_joined", "scan_range"]

SCHEMA = (
    "topic string, partition int, offset long, timestamp long, timestamp_type string, key binary, value binary, "
    "headers array<struct<key:string,value:binary>>, producer_id long, leader_epoch int, "
    "is_transactional boolean, is_control boolean"
)

#: each DataSource column and the ``RecordColumns.to_arrow`` column it comes from (None: constant per segment)
_SOURCES = {
    "topic": None, "partition": None, "offset": "offset", "timestamp": "timestamp",
    "timestamp_type": "timestamp_type", "key": "key", "value": "value", "headers": "headers",
    "producer_id": "producer_id", "leader_epoch": "partition_leader_epoch", "is_transactional": "is_transactional",
    "is_control": "is_control",
}  # fmt: skip
#: the DataSource's columns, in SCHEMA order
COLUMNS = tuple(_SOURCES)

_MIN = -(1 << 63)
_MAX = (1 << 63) - 1
#: the columns holding record bytes: a scan that emits none of them decodes with ``binary_view`` (keys and values
#: are not copied out of the mapped segment, only pointed at, and the pointers are dropped with the chunk)
_BYTES_COLUMNS = frozenset(("key", "value", "headers"))
#: key/value bytes per decoded chunk (the record cap is the DataSource's ``arrowBatchRows``)
CHUNK_BYTES = 32 << 20
#: a whole local segment this small is read with its neighbours of the same partition in one decoder pass
#: (:func:`scan_joined`): a segment's own pass (map, decoder, columns, Arrow table) costs ~0.4 ms, more than
#: decoding 16 KiB of records
SMALL_SEGMENT_BYTES = 1 << 20
#: the most bytes of small segments one joined pass reads
JOINED_BYTES = 16 << 20


@dataclass
class ScanMetrics:
    """What one segment scan touched; written to the DataSource's ``metricsDir`` when set."""

    segment: str
    start_position: int = 0
    batches_read: int = 0  # batches decoded into columns
    batches_decoded: int = 0  # the same (the columnar decoder decodes every batch it visits)
    bytes_read: int = 0  # bytes spanned by the visited batches
    records_returned: int = 0
    skipped_regions: int = 0  # onCorrupt=skip: corrupt byte ranges read past (salvage's resync) ...
    skipped_bytes: int = 0  # ... their bytes ...
    skipped_batches: int = 0  # ... and whole CRC-valid batches dropped after one because their offsets did not follow
    first_skipped_position: int = -1  # the segment's file position of the first corrupt range
    first_skipped_error: str = ""
    lost_offsets: list = field(default_factory=list)  # [first, last] offsets no kept batch holds around each
    # skipped region (as ``recover --salvage --dry-run`` reports them); last None: to the end of what was read
    log_bytes_fetched: int = 0  # bytes of a remote .log copied to the executor (0 on local disk)
    scan_seconds: float = 0.0  # time the task spent producing this segment's batches (seek, fetch, decode, Arrow),
    # not counting the time Spark spent sending them on while the scan waited at ``yield`` ...
    yield_seconds: float = 0.0  # ... which is this: Spark serialising the batches and sending them to the JVM
    started: float = 0.0  # wall clock (``time.time()``) when the segment's scan began ...
    ended: float = 0.0  # ... and ended
    worker_start: float = 0.0  # the fresh Python worker's start-up (fork, imports) before its first segment; else 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


@dataclass(frozen=True)
class ScanSpec:
    """The range and options of one scan (see ``kafkalog.spark.datasource.Bounds``)."""

    topic: str
    partition: int
    start_offset: int  # batches whose records all lie below it are skipped (index seek target)
    offset_lo: int
    offset_hi: int  # inclusive
    aborted: list[tuple[int, int, int]] | None  # read_committed: (producer id, first, last); None: uncommitted
    verify_crc: bool = True
    skip_corrupt: bool = False  # onCorrupt=skip: read on past bad batches (else raise CorruptRecordError)
    batch_rows: int = 8192
    columns: tuple[str, ...] = COLUMNS  # what to emit, in order (a user-specified schema's columns)
    schema: object = None  # the emitted pyarrow.Schema (names as the user spelled them); None: arrow_schema()
    first_offset: int | None = None  # the lowest offset the scanned bytes may hold (None: not known) ...
    end_offset: int | None = None  # ... and the offset after the highest (the next segment's base; None: not known)


_SCHEMA_CACHE: dict[str, object] = {}


def arrow_schema():
    """SCHEMA as an Arrow schema (built once per process)."""
    if "schema" not in _SCHEMA_CACHE:
        import pyarrow as pa

        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        _SCHEMA_CACHE["schema"] = pa.schema([
            ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp", pa.int64()),
            ("timestamp_type", pa.string()), ("key", pa.binary()), ("value", pa.binary()),
            ("headers", pa.list_(header)), ("producer_id", pa.int64()), ("leader_epoch", pa.int32()),
            ("is_transactional", pa.bool_()), ("is_control", pa.bool_()),
        ])  # fmt: skip
    return _SCHEMA_CACHE["schema"]


def _mask(chunk, spec: ScanSpec, after: int = _MIN) -> tuple[np.ndarray | None, int]:
    """(which records of ``chunk`` the scan returns, None for all; how many whole batches were dropped because
    their offsets are not all above ``after``: the last offset read before a skipped corrupt region)."""
    off = chunk.offset
    n = len(off)
    starts = chunk.batch_start
    counts = np.diff(np.append(starts, n))
    keep = np.ones(n, dtype=bool)
    filtered = False
    out_of_order = 0
    if after > _MIN and n:
        nonempty = counts > 0
        batch_min = np.full(len(starts), _MAX, dtype=np.int64)
        batch_min[nonempty] = np.minimum.reduceat(off, starts[nonempty])
        follows = batch_min > after
        out_of_order = int(np.count_nonzero(~follows & nonempty))
        keep &= np.repeat(follows, counts)
        filtered = True
    if spec.start_offset > _MIN and n:
        nonempty = counts > 0
        batch_max = np.full(len(starts), _MIN, dtype=np.int64)
        batch_max[nonempty] = np.maximum.reduceat(off, starts[nonempty])
        keep &= np.repeat(batch_max >= spec.start_offset, counts)
        filtered = True
    if spec.offset_lo > _MIN:
        keep &= off >= spec.offset_lo
        filtered = True
    if spec.offset_hi < _MAX:
        keep &= off <= spec.offset_hi
        filtered = True
    if spec.aborted is not None:
        dropped = chunk.is_control.astype(bool)
        if spec.aborted:
            pid, base, txn = chunk.producer_id, chunk.batch_base_offset, chunk.is_transactional.astype(bool)
            for a_pid, first, last in spec.aborted:
                dropped |= txn & (pid == a_pid) & (base >= first) & (base <= last)
        keep &= ~np.repeat(dropped, counts)
        filtered = True
    return (keep if filtered else None), out_of_order


def _to_batches(chunk, keep: np.ndarray | None, spec: ScanSpec) -> Iterator:
    """The DataSource's columns (``spec.columns``) for the kept records of ``chunk``; columns nobody asked for
    are not built."""
    import pyarrow as pa

    n = len(chunk) if keep is None else int(np.count_nonzero(keep))
    if not n:
        return
    table = chunk.to_arrow([_SOURCES[c] for c in spec.columns if _SOURCES[c]])
    if keep is not None and table.num_columns:
        table = table.filter(numpy_arrow(pa, keep))
    cols = []
    for name in spec.columns:
        if name == "topic":
            cols.append(_repeated_string(pa, spec.topic, n))
        elif name == "partition":
            cols.append(numpy_arrow(pa, np.full(n, spec.partition, dtype=np.int32)))
        else:
            cols.append(table[_SOURCES[name]])
    schema = spec.schema if spec.schema is not None else arrow_schema()
    out = pa.Table.from_arrays([c if isinstance(c, pa.ChunkedArray) else pa.chunked_array([c]) for c in cols],
                               schema=schema)  # fmt: skip
    yield from out.to_batches()


def _repeated_string(pa, text: str, n: int):
    """A string array of ``n`` times ``text``, built from its two buffers (a dictionary array cast to strings took
    ~27x as long: ~0.2 ms per chunk of 5,000 records)."""
    raw = text.encode()
    offsets = np.arange(0, (n + 1) * len(raw), len(raw) or 1, dtype=np.int32) if raw else np.zeros(n + 1, np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)])


def scan_range(
    spec: ScanSpec, path: str, position: int, end: int | None, m: ScanMetrics, *, label: str, shift: int = 0
) -> Iterator:
    """Arrow record batches of the records in ``path`` from ``position`` up to ``end`` that ``spec`` allows.

    ``label`` names the segment in errors; ``shift`` is what to add to a position in ``path`` to get the segment's
    own file position (a fetched range starts at 0). A bad batch raises ``CorruptRecordError``; with
    ``spec.skip_corrupt`` the scan reads on from the next whole CRC-valid batch (salvage's resync) and keeps only
    batches whose offsets lie above every offset read before, counting what it dropped in ``m``.
    """
    size = os.path.getsize(path)
    end = size if end is None else min(end, size)
    with _range_source(path, position, end, size) as source:
        try:
            yield from _scan(spec, source, position, end, m, label, shift)
        finally:
            _close_lost(m, spec)


@contextlib.contextmanager
def _range_source(path: str, position: int, end: int, size: int) -> Iterator:
    """What the decoder reads ``[position, end)`` of ``path`` from: the path itself for a scan to the end of the
    file; for a range that stops before it (an end offset, a timestamp's, the last stable offset, a split
    segment's byte range), :func:`kafkalog.io.file_access.mapped_range`'s map, so the bytes past ``end`` are never
    read (a fault on a plain map reads around it by the device's readahead size: a whole 8 MiB segment for an end
    early in it)."""
    if end >= size:
        yield path
        return
    with mapped_range(path, position, end) as mm:
        yield path if mm is None else mm


def _close_lost(m: ScanMetrics, spec: ScanSpec) -> None:
    """End the open lost range (no kept batch followed the last skipped region in this scan): up to the
    offset before ``spec.end_offset``, or unknown; drop the ranges that hold no offset."""
    if m.lost_offsets and m.lost_offsets[-1][1] is None and spec.end_offset is not None:
        m.lost_offsets[-1][1] = spec.end_offset - 1
    m.lost_offsets[:] = [r for r in m.lost_offsets if r[0] is None or r[1] is None or r[1] >= r[0]]


def _scan(spec: ScanSpec, path, position: int, end: int, m: ScanMetrics, label: str, shift: int) -> Iterator:
    after = _MIN  # once a region was skipped: the highest offset read before it
    top = _MIN
    open_lost = False  # the last lost range still waits for the first kept batch after its region
    started_at = position + shift
    views = not _BYTES_COLUMNS.intersection(spec.columns)
    while position < end:
        reader = iter_record_columns(path, position=position, end=end, verify_crc=spec.verify_crc,
                                     max_records=spec.batch_rows, max_bytes=CHUNK_BYTES, binary_view=views)  # fmt: skip
        base = m.bytes_read
        try:
            for chunk in reader:
                nb = len(chunk.batch_start)
                if open_lost and nb:
                    following = chunk.batch_base_offset[chunk.batch_base_offset > after]
                    if len(following):
                        m.lost_offsets[-1][1] = int(following[0]) - 1
                        open_lost = False
                m.batches_read += nb
                m.batches_decoded += nb
                m.bytes_read = base + reader.valid_bytes - position
                keep, dropped = _mask(chunk, spec, after)
                m.skipped_batches += dropped
                if spec.skip_corrupt and len(chunk):
                    top = max(top, int(chunk.offset.max()))
                for batch in _to_batches(chunk, keep, spec):
                    m.records_returned += batch.num_rows
                    yield batch
                if nb and int(chunk.batch_base_offset[-1]) > spec.offset_hi:
                    return
            error, bad = reader.error, reader.valid_bytes
        finally:
            m.bytes_read = base + reader.valid_bytes - position
            reader.close()
        if error is None:
            return
        reason = _reason(error)
        if not spec.skip_corrupt:
            raise CorruptRecordError(f"{label}: {reason}", position=bad + shift)
        nxt = _next_batch(path, bad, end)
        if m.first_skipped_position < 0:
            m.first_skipped_position, m.first_skipped_error = bad + shift, reason
        m.skipped_regions += 1
        m.skipped_bytes += nxt - bad
        after = max(after, top)
        if not open_lost:  # a region right after another one extends its lost range
            if after > _MIN:
                first = after + 1
            elif started_at == 0:
                first = spec.first_offset
            else:  # a seek: nothing read before the region, which lies past the range's start
                first = spec.offset_lo if spec.offset_lo > _MIN else None
            m.lost_offsets.append([first, None])
            open_lost = True
        position = nxt


def scan_joined(spec: ScanSpec, segments: list[tuple[str, int]]) -> list | None:
    """The Arrow batches of whole small segments of one partition (``(path, size)``, in offset order, read whole:
    no range, no filter) decoded in one pass over their bytes joined: whole segments hold whole batches, so the
    joined bytes are a valid log. None when anything is off (a batch fails, a segment does not end where its last
    batch ends, a file is shorter than listed): the caller then reads each segment on its own, which raises or
    skips exactly as a segment's own scan does. Nothing is returned before the whole pass succeeded."""
    parts = []
    for path, size in segments:
        with open(path, "rb") as f:
            parts.append(f.read(size))
        if len(parts[-1]) != size:
            return None
    data = b"".join(parts)
    starts = np.cumsum([0] + [len(p) for p in parts[:-1]], dtype=np.int64)
    reader = iter_record_columns(data, verify_crc=spec.verify_crc, max_records=spec.batch_rows,
                                 max_bytes=CHUNK_BYTES, binary_view=not _BYTES_COLUMNS.intersection(spec.columns))  # fmt: skip
    try:
        chunks = list(reader)
        if reader.error is not None or reader.valid_bytes != len(data):
            return None
    except CorruptRecordError:
        return None
    finally:
        reader.close()
    positions = np.concatenate([c.batch_position for c in chunks]) if chunks else np.empty(0, np.int64)
    if not np.isin(starts, positions).all():  # a segment's tail ran into the next one's bytes
        return None
    return [b for chunk in chunks for b in _to_batches(chunk, None, spec)]


def coalesced(batches: Iterator, rows: int) -> Iterator:
    """``batches`` with runs of small ones (tiny segments: a batch each) joined into batches of up to ``rows``
    records: Spark's Python data source path costs per batch, ~2 ms, more than a small segment's decode. A batch of
    ``rows / 2`` or more passes as it is."""
    import pyarrow as pa

    held: list = []
    count = 0
    for batch in batches:
        if batch.num_rows >= rows // 2 and not held:
            yield batch
            continue
        held.append(batch)
        count += batch.num_rows
        if count >= rows // 2:
            yield held[0] if len(held) == 1 else pa.concat_batches(held)
            held, count = [], 0
    if held:
        yield held[0] if len(held) == 1 else pa.concat_batches(held)


def _reason(error: CorruptRecordError) -> str:
    """The decoder's message without its position: that one is in the scanned file (a fetched range of a remote
    segment starts at 0); the segment's own position is given instead."""
    text = str(error)
    suffix = f" (at position {error.position})" if getattr(error, "position", None) is not None else ""
    return text[: -len(suffix)] if suffix and text.endswith(suffix) else text


def _next_batch(source, bad: int, end: int) -> int:
    """Where the next whole CRC-valid batch after the bad one at ``bad`` starts (``end`` when none); ``source``:
    a path or :func:`_range_source`'s map."""
    if isinstance(source, mmap.mmap):
        with memoryview(source) as view, view[:end] as part:
            return next_batch_position(part, bad)
    with open(source, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        with memoryview(mm) as view, view[:end] as part:
            return next_batch_position(part, bad)


def read_scan_metrics(metrics_dir: str) -> dict[str, int]:
    """Totals over every task's metrics in ``metrics_dir``: segments, batches_read, batches_decoded, bytes_read,
    records_returned, log_bytes_fetched, skipped_regions, skipped_bytes, skipped_batches (onCorrupt=skip), and
    floats: scan_seconds (the tasks' own Python time), yield_seconds (Spark taking their batches to the JVM),
    worker_start (fresh workers' start-up), first_started / last_ended (wall clock of the first segment's start
    and the last one's end: the tasks' span inside a query's wall time)."""
    names = ("batches_read", "batches_decoded", "bytes_read", "records_returned", "log_bytes_fetched",
             "skipped_regions", "skipped_bytes", "skipped_batches")  # fmt: skip
    seconds = ("scan_seconds", "yield_seconds", "worker_start")
    totals: dict = {"segments": 0, **dict.fromkeys(names, 0), **dict.fromkeys(seconds, 0.0), "first_started": 0.0,
                    "last_ended": 0.0}  # fmt: skip
    if not os.path.isdir(metrics_dir):
        return totals
    for name in os.listdir(metrics_dir):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(metrics_dir, name), encoding="utf-8") as f:
            d = json.load(f)
        totals["segments"] += 1
        for k in names:
            totals[k] += int(d.get(k, 0))
        for k in seconds:
            totals[k] += float(d.get(k, 0.0))
        if d.get("started"):
            first = totals["first_started"]
            totals["first_started"] = min(first, d["started"]) if first else d["started"]
            totals["last_ended"] = max(totals["last_ended"], d.get("ended", 0.0))
    return totals
