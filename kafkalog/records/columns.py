"""Columnar record decoding: every record of every batch into flat arrays, without a Python object per record.

``read_record_columns(source)`` decodes a whole source into one ``RecordColumns``; ``iter_record_columns``
yields bounded chunks (``max_records`` / ``max_bytes``) so a 1 GiB segment decodes in bounded memory (pages of a
mapped file are dropped behind the decoder). ``RecordColumns.to_arrow()`` wraps the arrays as a ``pyarrow.Table``
without copying the key/value/header bytes. ``binary_view=True`` does not copy keys and values out of the source
at all: they become Arrow ``binary_view`` columns pointing into it (a mapped file stays mapped while they live),
as Kafka's own deep iteration slices record values out of its read buffer; only the bytes of compressed batches
(decompressed) and of legacy messages are copied.

Two implementations share one loop (``RecordColumnReader._chunks``): the compiled builder (``_columns.c``) walks
runs of magic 2 batches (framing, CRC32C, decompression, varints, headers) in C: lz4 frames and zstd bounds are
walked there and a codec called per block or payload (``compression.BLOCK_DECODERS``; a zstd payload of one plain
frame straight through this thread's ``zstd_decoder()``), xerial snappy blocks likewise (``SNAPPY_BLOCK_INTO``),
other codecs go through ``decompress``;
every other batch (magic 0/1, one the C walker declines) goes through ``read_batches`` and ``RecordBatch.records()``,
which is also the whole pure-Python path. The C walker declines any batch that is not plainly well formed, and the
Python path then raises or stops exactly as ``read_batches`` + ``records()`` do, so errors, messages and
``valid_bytes`` are the same on both paths. ``KAFKALOG_NO_EXTENSIONS=1`` (or ``implementation="python"``) forces
the pure path.

Bad bytes: a truncated, structurally impossible or (with ``verify_crc``) CRC-failing batch stops decoding there,
like ``read_batches``: the result's ``valid_bytes`` / ``invalid_bytes`` / ``error`` say where and why and the
records before it are kept. A batch that frames correctly but whose records do not decode raises the
``CorruptRecordError`` that ``RecordBatch.records()`` raises for it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from crc32c import crc32c

from ..errors import CorruptRecordError, InvalidArgumentError
from .batch import RECORD_BATCH_OVERHEAD, RecordBatch
from .column_builder import BATCH_FIELDS, PyColumnBuilder
from .compression import (
    BLOCK_DECODERS,
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    SNAPPY_BLOCK_INTO,
    CompressionType,
    codec_error,
    decompress,
    decompress_into,
    zstd_decoder,
)
from .native import available as compiled_available
from .native import compiled as _compiled
from .reader import BatchReader, SourceReader, open_source
from .record import Record

__all__ = ["RecordColumns", "RecordColumnReader", "read_record_columns", "iter_record_columns", "compiled_available"]

_TS_NAMES_BYTES = [b"NoTimestampType", b"CreateTime", b"LogAppendTime"]
_CODECS = tuple(CompressionType)
_INT_MAX = (1 << 31) - 1
_DEFAULT_CHUNK_RECORDS = 1 << 16
_DEFAULT_CHUNK_BYTES = 32 << 20


def _builder_factory(implementation: str, binary_view: bool = False):
    if implementation not in ("auto", "python", "compiled"):
        raise InvalidArgumentError(f"implementation must be auto, python or compiled, not {implementation!r}")
    if implementation == "python" or (implementation == "auto" and not compiled_available()):
        cls = PyColumnBuilder
    elif _compiled is None:
        raise InvalidArgumentError("the compiled record decoder is not built (kafkalog.records._columns)")
    else:
        cls = _compiled.ColumnBuilder
    return functools.partial(cls, views=True) if binary_view else cls


class _Arrays(Mapping):
    """``RecordColumns.arrays``: the arrays by name, as ``column_builder``'s docstring lays them out. Offset columns
    that the compiled builder wrote as int32 (what Arrow's binary and list layouts take, so ``to_arrow()`` wraps
    them as they are) become their documented int64 on first access, once."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}
        self.narrow: dict[str, np.ndarray] = {}  # int32 offset columns not widened yet
        self._names: list[str] = []

    def put(self, name: str, arr: np.ndarray) -> None:
        (self.narrow if arr.dtype == np.int32 and name in _OFFSET_COLUMNS else self._arrays)[name] = arr
        self._names.append(name)

    def offsets(self, name: str) -> np.ndarray:
        """An offset column as stored: int32 when the builder wrote it so, else int64 (no widening)."""
        arr = self.narrow.get(name)
        return self._arrays[name] if arr is None else arr

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is not None:
            return arr
        narrow = self.narrow.get(name)
        if narrow is None:
            raise KeyError(name)
        # threads reading one RecordColumns may widen the same column at once: the first stored wins, and the
        # narrow one leaves only after the wide one is in place (offsets() reads either)
        wide = self._arrays.setdefault(name, narrow.astype(np.int64))
        self.narrow.pop(name, None)
        return wide

    def __contains__(self, name: object) -> bool:
        return name in self._arrays or name in self.narrow

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class RecordColumns:
    """Decoded records as numpy arrays (names in ``column_builder``'s docstring); ``len()`` is the record count.

    ``valid_bytes`` is the absolute end of the last batch decoded, ``invalid_bytes`` what follows it up to the end
    when decoding stopped at a bad batch, ``error`` the reason (the same error ``read_batches`` reports), else None.

    ``binary_view``: keys and values are ``key_views`` / ``value_views`` (``column_builder``'s docstring) over
    ``source`` (buffer 0, kept alive here) and ``key_data`` / ``value_data`` (buffer 1) instead of offsets.
    """

    def __init__(self, arrays: dict, *, position: int = 0, valid_bytes: int = 0, invalid_bytes: int = 0,
                 error: CorruptRecordError | None = None, binary_view: bool = False,
                 source: memoryview | None = None, offset_width: int = 8) -> None:  # fmt: skip
        self.binary_view = binary_view
        self.source = source if binary_view else None
        unused = ("key_offsets", "value_offsets") if binary_view else ("key_views", "value_views")
        self.arrays = _Arrays()
        for name, arr in arrays.items():
            if name in unused:
                continue
            if not isinstance(arr, np.ndarray):
                narrow = offset_width == 4 and name in _OFFSET_COLUMNS
                arr = np.frombuffer(arr, dtype=np.int32 if narrow else _DTYPES[name])
            self.arrays.put(name, arr)
        self.position = position
        self.valid_bytes = valid_bytes
        self.invalid_bytes = invalid_bytes
        self.error = error

    def __len__(self) -> int:
        return len(self.arrays["offset"])

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["arrays"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return (f"RecordColumns({len(self)} records, {len(self.arrays['batch_start'])} batches, "
                f"valid_bytes={self.valid_bytes}, error={self.error!r})")  # fmt: skip

    def raise_for_error(self) -> None:
        """Raise the error that stopped decoding, if any (for callers that treat a stop as a failure)."""
        if self.error is not None:
            raise self.error

    def batch_index(self) -> np.ndarray:
        """For each record, the index of its batch in the per-batch arrays."""
        starts = self.arrays["batch_start"]
        counts = np.diff(np.append(starts, len(self)))
        return np.repeat(np.arange(len(starts), dtype=np.int64), counts)

    def _binary_list(self, prefix: str) -> list[bytes | None]:
        if self.binary_view and prefix in ("key", "value"):
            return self._view_list(prefix)
        offsets = self.arrays.offsets(f"{prefix}_offsets")
        valid, data = self.arrays[f"{prefix}_valid"], self.arrays[f"{prefix}_data"]
        raw = data.tobytes()
        o = offsets.tolist()
        return [raw[o[i] : o[i + 1]] if v else None for i, v in enumerate(valid.tolist())]

    def _view_list(self, prefix: str) -> list[bytes | None]:
        raw = self.arrays[f"{prefix}_views"]
        fields = raw.view(np.int32).reshape(-1, 4).tolist()
        buffers = (self.source if self.source is not None else memoryview(b""), self.arrays[f"{prefix}_data"].data)
        valid = self.arrays[f"{prefix}_valid"].tolist()
        out: list[bytes | None] = []
        for i, (n, _, idx, off) in enumerate(fields):
            if not valid[i]:
                out.append(None)
            elif n <= 12:
                out.append(raw[16 * i + 4 : 16 * i + 4 + n].tobytes())
            else:
                out.append(bytes(buffers[idx][off : off + n]))
        return out

    def keys(self) -> list[bytes | None]:
        """Every record's key as bytes (None for a null key), in offset order."""
        return self._binary_list("key")

    def values(self) -> list[bytes | None]:
        """Every record's value as bytes (None for a tombstone), in offset order."""
        return self._binary_list("value")

    def headers(self) -> list[tuple[tuple[str, bytes | None], ...]]:
        """Every record's headers as ``((key, value), ...)`` tuples, in offset order."""
        hk = self.arrays["header_key_data"].tobytes()
        hko = self.arrays.offsets("header_key_offsets").tolist()
        hvals = self._binary_list("header_value")
        flat = [(hk[hko[i] : hko[i + 1]].decode("utf-8"), v) for i, v in enumerate(hvals)]
        ho = self.arrays.offsets("header_offsets").tolist()
        return [tuple(flat[ho[i] : ho[i + 1]]) for i in range(len(self))]

    def to_records(self) -> list[Record]:
        """The records as ``Record`` objects, equal to what ``RecordBatch.records()`` gives (sequence included)."""
        bi = self.batch_index().tolist()
        base_off = self.arrays["batch_base_offset"].tolist()
        base_seq = self.arrays["base_sequence"].tolist()
        magic = self.arrays["batch_magic"].tolist()
        out = []
        for i, (off, ts, k, v, h) in enumerate(zip(self.arrays["offset"].tolist(), self.arrays["timestamp"].tolist(),
                                                   self.keys(), self.values(), self.headers(), strict=True)):  # fmt: skip
            b = bi[i]
            seq = -1
            if magic[b] == 2 and base_seq[b] >= 0:
                delta = off - base_off[b]
                seq = base_seq[b] - (_INT_MAX - delta) - 1 if base_seq[b] > _INT_MAX - delta else base_seq[b] + delta
            out.append(Record(off, ts, k, v, h, seq))
        return out

    def _timestamp_type_arrow(self, pa):
        types = self.arrays["timestamp_type"]
        n = len(self)
        if _compiled is not None:
            offsets, data = _compiled.repeat_names(self.arrays["batch_start"], n, types, tuple(_TS_NAMES_BYTES))
            return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        if len(types) and bool((types == types[0]).all()):  # one type throughout: no per-batch pieces to join
            name = _TS_NAMES_BYTES[int(types[0]) + 1]
            offsets = np.arange(0, (n + 1) * len(name), len(name), dtype=np.int32)
            return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(name * n)])
        counts = np.diff(np.append(self.arrays["batch_start"], n)).tolist()
        return _per_batch_strings(pa, [_TS_NAMES_BYTES[t + 1] for t in types.tolist()], counts)

    def arrow_columns(self) -> tuple[str, ...]:
        """The column names ``to_arrow()`` gives, in its order."""
        return _ARROW_COLUMNS

    def to_arrow(self, columns: Sequence[str] | None = None):
        """A ``pyarrow.Table``: offset, timestamp, timestamp_type (Kafka's name), key, value, headers
        (list<struct<key: string, value: binary>>), then the batch fields of each record. Key, value and header
        bytes are wrapped, not copied. Binary columns are ``binary`` (``large_binary`` past 2 GiB of bytes).

        ``columns`` (names from ``arrow_columns()``, in the order wanted) builds only those: the Spark DataSource
        asks for what a user-specified schema holds, so the header lists and the per-record repeats of batch
        fields are not made for a query that does not read them."""
        import pyarrow as pa

        names = _ARROW_COLUMNS if columns is None else tuple(columns)
        unknown = [c for c in names if c not in _ARROW_COLUMNS]
        if unknown:
            raise InvalidArgumentError(f"unknown record columns {unknown}; known: {list(_ARROW_COLUMNS)}")
        a = self.arrays
        n = len(self)
        counts = None if _compiled is not None else np.diff(np.append(a["batch_start"], n))
        shared = _constant_buffers(pa, a, names, n) if _compiled is not None else {}
        cols = {}
        for name in names:
            if name in ("offset", "timestamp"):
                cols[name] = numpy_arrow(pa, a[name])
            elif name == "timestamp_type":
                cols[name] = self._timestamp_type_arrow(pa)
            elif name in ("key", "value") and self.binary_view:
                cols[name] = _arrow_views(pa, n, a[f"{name}_views"], a[f"{name}_valid"], self.source, a[f"{name}_data"])
            elif name in ("key", "value"):
                cols[name] = _arrow_binary(pa, n, a.offsets(f"{name}_offsets"), a[f"{name}_valid"], a[f"{name}_data"])
            elif name == "headers":
                cols[name] = self._headers_arrow(pa)
            elif name in shared:
                cols[name] = pa.Array.from_buffers(_arrow_type(pa, name, a[name]), n, [None, shared[name]])
            else:
                flag = name in _FLAGS
                cols[name] = _per_record(pa, a[name], a["batch_start"], n, counts, flag)
        if not cols:
            return pa.table({"_": pa.nulls(n)}).drop_columns(["_"])
        return pa.table(cols)

    def _headers_arrow(self, pa):
        a = self.arrays
        hko = a.offsets("header_key_offsets")
        m = len(hko) - 1
        hkeys = _arrow_binary(pa, m, hko, None, a["header_key_data"], pa.string())
        hvals = _arrow_binary(pa, m, a.offsets("header_value_offsets"), a["header_value_valid"],
                              a["header_value_data"])  # fmt: skip
        ho = a.offsets("header_offsets")
        struct = pa.StructArray.from_arrays([hkeys, hvals], names=["key", "value"])
        return pa.ListArray.from_arrays(pa.Array.from_buffers(pa.int32(), len(ho), [None, pa.py_buffer(_int32(ho))]),
                                        struct)  # fmt: skip


def _int32(offsets: np.ndarray):
    """Offsets as an int32 buffer: as they are when the builder wrote int32, else narrowed (the caller has
    checked that they fit)."""
    if offsets.dtype == np.int32:
        return offsets
    return _compiled.narrow_offsets(offsets) if _compiled is not None else offsets.astype(np.int32)


def _per_record(pa, per_batch: np.ndarray, starts: np.ndarray, n: int, counts: np.ndarray | None, flag: bool):
    """A batch field repeated over each batch's records (``flag``: a uint8 per batch, a ``bool`` column)."""
    if _compiled is None:
        return numpy_arrow(pa, np.repeat(per_batch.astype(bool) if flag else per_batch, counts))
    buf = _compiled.repeat_batches(starts, n, per_batch, 0 if flag else per_batch.itemsize)
    typ = pa.bool_() if flag else pa.from_numpy_dtype(per_batch.dtype)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(buf)])


def numpy_arrow(pa, values: np.ndarray):
    """A numeric or bool numpy array as an Arrow array over its buffer (bools packed to bits). ``pa.array`` would
    do the same but imports pandas on its first call (pyarrow checks every input for a pandas object): ~0.4 s and
    ~30,000 objects more in a fresh Spark Python worker that never uses it."""
    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _arrow_type(pa, name: str, per_batch: np.ndarray):
    return pa.bool_() if name in _FLAGS else pa.from_numpy_dtype(per_batch.dtype)


def _constant_buffers(pa, a: Mapping, names: Sequence[str], n: int) -> dict:
    """For the batch fields among ``names`` that hold one value through the table whose bytes are all one byte
    (-1 or 0 in most logs: the producer fields of a producer without idempotence, an unchanged leader epoch, false
    flags): slices of one buffer of that byte per byte value, sized for the widest, that their columns share, so
    it is written once instead of once a column. The values are those ``_per_record`` gives."""
    want: dict[str, tuple[int, int]] = {}
    for name in names:
        per_batch = a[name] if name in _BATCH_ARROW and n else None
        if per_batch is None or not len(per_batch) or not bool((per_batch == per_batch[0]).all()):
            continue
        raw = (b"\xff" if per_batch[0] else b"\x00") if name in _FLAGS else per_batch[:1].tobytes()
        if raw.count(raw[:1]) == len(raw):
            want[name] = (raw[0], (n + 7) // 8 if name in _FLAGS else n * len(raw))
    sizes: dict[int, int] = {}
    for byte, size in want.values():
        sizes[byte] = max(sizes.get(byte, 0), size)
    one = np.zeros(1, np.int64)
    fills = {byte: pa.py_buffer(_compiled.repeat_batches(one, size, np.array([byte], np.uint8), 1))
             for byte, size in sizes.items()}  # fmt: skip
    return {name: fills[byte].slice(0, size) for name, (byte, size) in want.items()}


def _per_batch_strings(pa, names: list[bytes], counts: list[int]):
    """A string array repeating ``names[i]`` ``counts[i]`` times (records of a batch are contiguous)."""
    data = b"".join([name * count for name, count in zip(names, counts, strict=True)])
    offsets = np.zeros(sum(counts) + 1, dtype=np.int32)
    if counts:
        np.cumsum(np.repeat(np.array([len(x) for x in names], dtype=np.int32), counts), out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _validity(pa, n: int, valid: np.ndarray | None):
    """(validity bitmap buffer or None, null count) of a uint8 valid column."""
    if valid is None or n == 0 or bool(valid.all()):
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), n - int(np.count_nonzero(valid))


def _arrow_views(pa, n: int, views: np.ndarray, valid: np.ndarray, source: memoryview | None, data: np.ndarray):
    """A ``binary_view`` Arrow array: buffer 0 is the source (wrapped, not copied), buffer 1 the copied bytes."""
    validity, nulls = _validity(pa, n, valid)
    src = pa.py_buffer(source if source is not None else b"")
    return pa.Array.from_buffers(pa.binary_view(), n, [validity, pa.py_buffer(views), src, pa.py_buffer(data)],
                                 null_count=nulls)


def _arrow_binary(pa, n: int, offsets: np.ndarray, valid: np.ndarray | None, data: np.ndarray, typ=None):
    """A binary/string Arrow array over the given buffers (data wrapped, not copied)."""
    large = int(offsets[-1]) > _INT_MAX
    if typ is None:
        typ = pa.large_binary() if large else pa.binary()
    elif large:
        typ = pa.large_string()
    off = offsets if large else _int32(offsets)
    validity, nulls = _validity(pa, n, valid)
    return pa.Array.from_buffers(typ, n, [validity, pa.py_buffer(off), pa.py_buffer(data)], null_count=nulls)


#: what ``to_arrow()`` gives, in order: record fields, then the batch fields repeated per record
_BATCH_ARROW = tuple(name for name, _ in BATCH_FIELDS if name not in ("batch_position", "batch_magic", "timestamp_type"))
_ARROW_COLUMNS = ("offset", "timestamp", "timestamp_type", "key", "value", "headers") + _BATCH_ARROW
_FLAGS = ("is_transactional", "is_control")

#: the offset columns the compiled builder writes as int32 while they fit (``_Arrays`` widens them on access)
_OFFSET_COLUMNS = frozenset(("key_offsets", "value_offsets", "header_offsets", "header_key_offsets",
                             "header_value_offsets"))  # fmt: skip

_DTYPES: dict[str, type] = {
    "offset": np.int64, "timestamp": np.int64, "key_offsets": np.int64, "key_valid": np.uint8,
    "key_data": np.uint8, "value_offsets": np.int64, "value_valid": np.uint8, "value_data": np.uint8,
    "header_offsets": np.int64, "header_key_offsets": np.int64, "header_key_data": np.uint8,
    "header_value_offsets": np.int64, "header_value_valid": np.uint8, "header_value_data": np.uint8,
    "key_views": np.uint8, "value_views": np.uint8,
    "batch_start": np.int64, **dict(BATCH_FIELDS),
}  # fmt: skip


class RecordColumnReader(SourceReader):
    """Iterate once over ``RecordColumns`` chunks of a source; afterwards ``valid_bytes`` / ``invalid_bytes`` /
    ``error`` tell where and why decoding stopped, as ``BatchReader`` does. ``close()`` releases the file mapping
    (arrays already returned do not depend on it, except ``binary_view`` chunks, which keep it mapped while they
    live)."""

    def __init__(self, source, *, position: int = 0, end: int | None = None, verify_crc: bool = True,
                 max_records: int | None = _DEFAULT_CHUNK_RECORDS, max_bytes: int | None = _DEFAULT_CHUNK_BYTES,
                 implementation: str = "auto", binary_view: bool = False) -> None:  # fmt: skip
        self._new_builder = _builder_factory(implementation, binary_view)
        self.binary_view = binary_view
        bounded = max_records is not None or max_bytes is not None
        if (max_records is not None and max_records < 1) or (max_bytes is not None and max_bytes < 1):
            raise InvalidArgumentError("max_records and max_bytes must be positive")
        self.max_records = max_records if max_records is not None else 1 << 62
        self.max_bytes = max_bytes if max_bytes is not None else 1 << 62
        buf, keep = open_source(source, populate=not bounded)
        total = len(buf)
        if end is None or end > total:
            end = total
        if position < 0 or position > end:
            raise InvalidArgumentError(f"position {position} outside the source (0..{end})")
        self.buffer, self._keep, self._released = buf, keep, 0
        self.start, self.end, self.verify_crc = position, end, verify_crc
        self.valid_bytes, self.invalid_bytes = position, 0
        self.error: CorruptRecordError | None = None
        self._used = False
        #: the log cleaner's batches to frame without their records (``_columns.c``'s ``Superseded``: live offsets,
        #: lo, hi); None everywhere else
        self.superseded: tuple | None = None

    def __iter__(self) -> Iterator[RecordColumns]:
        if self._used:
            raise RuntimeError("a RecordColumnReader can be iterated only once")
        self._used = True
        return self._nonempty()

    def _nonempty(self) -> Iterator[RecordColumns]:
        for chunk in self._chunks():
            if len(chunk):
                yield chunk

    def _finish(self, builder, chunk_start: int) -> RecordColumns:
        return RecordColumns(builder.finish(), position=chunk_start, valid_bytes=self.valid_bytes,
                             invalid_bytes=self.invalid_bytes, error=self.error, binary_view=self.binary_view,
                             source=memoryview(self.buffer) if self.binary_view else None,
                             offset_width=getattr(builder, "offset_width", 8))  # fmt: skip

    def _chunks(self) -> Iterator[RecordColumns]:
        """The decoder loop: compiled runs where possible, one ``read_batches`` batch at a time otherwise; always
        ends with one (possibly empty) chunk carrying the final state."""
        buf, end, verify = self.buffer, self.end, self.verify_crc
        max_records, max_bytes = self.max_records, self.max_bytes
        builder = self._new_builder()
        fast = builder.compiled
        pos = chunk_start = self.start
        while pos < end:
            if builder.n_records >= max_records or builder.n_bytes >= max_bytes:
                yield self._finish(builder, chunk_start)
                self.release_before(pos)
                builder, chunk_start = self._new_builder(), pos
            declined = None
            if fast:
                pos = builder.run(buf, pos, end, verify, crc32c, max_records, max_bytes, _decompress_payload,
                                  (*BLOCK_DECODERS, zstd_decoder(), SNAPPY_BLOCK_INTO), -1, self.superseded)
                self.valid_bytes = pos
                declined = builder.take_error()  # why the batch at pos was declined, if a codec call raised
                if pos >= end or builder.n_records >= max_records or builder.n_bytes >= max_bytes:
                    continue
            reader = BatchReader(buf, position=pos, end=end, validate=verify)
            for batch in reader:
                _add_batch(builder, batch, fast, declined)
                pos = self.valid_bytes = reader.valid_bytes
                if fast or builder.n_records >= max_records or builder.n_bytes >= max_bytes:
                    break
            else:
                self.valid_bytes, self.invalid_bytes, self.error = reader.valid_bytes, reader.invalid_bytes, reader.error
                break
        yield self._finish(builder, chunk_start)


def _decompress_payload(codec_id: int, body: memoryview, out: memoryview) -> int | bytes:
    """What ``RecordBatch.records_payload`` does for a compressed batch, for the compiled walker to call on gzip and
    snappy batches and on lz4/zstd payloads that may not fit its scratch: written into ``out`` (that reused
    buffer) when the codec allows, else returned."""
    codec = _CODECS[codec_id]
    n = decompress_into(codec, body, out, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE)
    return decompress(codec, body, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE) if n is None else n


def _add_batch(builder, batch, fast: bool, declined: tuple[int, BaseException] | None = None) -> None:
    """Decode one batch that ``read_batches`` produced into ``builder`` (raises as ``batch.records()`` does).
    ``declined``: the compiled walker's ``take_error()`` for the batch it stopped at (the first one here)."""
    builder.begin_batch(batch.base_offset, batch.position, batch.magic, batch.partition_leader_epoch,
                        batch.producer_id, batch.producer_epoch, batch.base_sequence, int(batch.timestamp_type),
                        batch.is_transactional, batch.is_control)  # fmt: skip
    if fast and isinstance(batch, RecordBatch):
        h = batch._h
        if h[12] >= 0:
            if declined is not None:
                _raise_declined(batch, *declined)
            payload = batch.records_payload()
            if not builder.decode_records(payload, h[12], h[0], h[7], h[8] if h[5] & 0x08 else None):
                builder.add_records(batch.records_from(payload))  # raises what records() raises
            return
    builder.add_records(batch.records())


def _raise_declined(batch: RecordBatch, source: int, exc: BaseException) -> None:
    """Raise what ``batch.records_payload()`` raises, from the compiled walker's failed attempt at the same payload
    (``source`` 0: ``_decompress_payload`` raised ``exc``; 3 / 4: cramjam's lz4 / zstd call did), so a payload that
    fails (a gzip bomb, garbage zstd blocks) is decompressed once. Anything else: ``records_payload`` decides."""
    if source:
        err = codec_error(source, batch.raw[RECORD_BATCH_OVERHEAD:], exc, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE)
    elif isinstance(exc, CorruptRecordError):
        err = exc
    else:
        return
    raise CorruptRecordError(str(err), position=batch.position) from None


def iter_record_columns(source, *, position: int = 0, end: int | None = None, verify_crc: bool = True,
                        max_records: int | None = _DEFAULT_CHUNK_RECORDS,
                        max_bytes: int | None = _DEFAULT_CHUNK_BYTES, implementation: str = "auto",
                        binary_view: bool = False) -> RecordColumnReader:  # fmt: skip
    """``RecordColumns`` chunks of ``source`` (path, bytes, bytearray, memoryview) in file order, each holding whole
    batches and ending once it reaches ``max_records`` records or ``max_bytes`` key/value bytes. Iterate the
    returned reader once; then its ``valid_bytes`` / ``invalid_bytes`` / ``error`` tell where decoding stopped.
    ``binary_view``: keys and values point into the source instead of being copied (module docstring)."""
    return RecordColumnReader(source, position=position, end=end, verify_crc=verify_crc, max_records=max_records,
                              max_bytes=max_bytes, implementation=implementation,
                              binary_view=binary_view)  # fmt: skip


def read_record_columns(source, *, position: int = 0, end: int | None = None, verify_crc: bool = True,
                        implementation: str = "auto", binary_view: bool = False) -> RecordColumns:  # fmt: skip
    """Every record of ``source`` from ``position`` to ``end`` as one ``RecordColumns`` (see the module docstring
    for bad bytes). ``implementation``: ``auto`` (compiled when built), ``python`` or ``compiled``.
    ``binary_view``: keys and values point into the source instead of being copied (module docstring)."""
    reader = RecordColumnReader(source, position=position, end=end, verify_crc=verify_crc, max_records=None,
                                max_bytes=None, implementation=implementation,
                                binary_view=binary_view)  # fmt: skip
    try:
        chunks = list(reader._chunks())
    finally:
        reader.close()
    return chunks[-1]
