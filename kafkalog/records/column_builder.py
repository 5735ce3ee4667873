"""The pure-Python column builder: collects decoded ``Record`` objects of each batch into the flat arrays
``RecordColumns`` is made of.

The compiled builder (``kafkalog.records._columns.ColumnBuilder``) has the same methods plus ``run`` and
``decode_records`` (which decode record bytes straight into the arrays) and returns the same arrays from
``finish``; the decoder loop in ``columns.py`` drives either, so both produce identical columns by construction of
the one loop and by the tests that compare them.

Arrays (``finish()`` keys): per record ``offset``, ``timestamp`` (int64), ``key_offsets`` / ``value_offsets``
(int64, n + 1 entries into ``key_data`` / ``value_data``), ``key_valid`` / ``value_valid`` (uint8, 0 = null),
``header_offsets`` (int64, n + 1 entries into the header arrays); per header ``header_key_offsets``,
``header_key_data``, ``header_value_offsets``, ``header_value_valid``, ``header_value_data``; per batch
``batch_start`` (int64, index of the batch's first record), ``batch_base_offset``, ``batch_position`` (int64),
``batch_magic`` (int8), ``partition_leader_epoch`` (int32), ``producer_id`` (int64), ``producer_epoch`` (int16),
``base_sequence`` (int32), ``timestamp_type`` (int8: -1, 0, 1), ``is_transactional``, ``is_control`` (uint8).

With ``views=True`` keys and values come as ``key_views`` / ``value_views`` instead of offsets: 16 bytes a record
in Arrow's ``binary_view`` layout (int32 length, then up to 12 inline bytes, or a 4-byte prefix, an int32 buffer
index and an int32 offset). Buffer 0 is the decoded source itself (the compiled builder points at uncompressed
records where they lie), buffer 1 is ``key_data`` / ``value_data``, which hold every byte not pointed at in place;
the pure builder copies every field there.
"""

from __future__ import annotations

import struct

import numpy as np

from .record import Record

__all__ = ["PyColumnBuilder", "BATCH_FIELDS", "to_int64", "binary_views"]

#: per-batch arrays: (name, numpy dtype), in ``begin_batch`` argument order after ``batch_start``
BATCH_FIELDS = (
    ("batch_base_offset", np.int64),
    ("batch_position", np.int64),
    ("batch_magic", np.int8),
    ("partition_leader_epoch", np.int32),
    ("producer_id", np.int64),
    ("producer_epoch", np.int16),
    ("base_sequence", np.int32),
    ("timestamp_type", np.int8),
    ("is_transactional", np.uint8),
    ("is_control", np.uint8),
)

_WRAP = 1 << 64
_HALF = 1 << 63


def to_int64(values: list[int]) -> np.ndarray:
    """int64 array of ``values``, wrapping like Java's long arithmetic (base offset/timestamp + delta can overflow
    on hostile bytes; the compiled decoder wraps the same way)."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array([((v + _HALF) % _WRAP) - _HALF for v in values], dtype=np.int64)


def _binary(items: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets n + 1, valid, data) of a list of bytes-or-None."""
    valid = np.fromiter((x is not None for x in items), dtype=np.uint8, count=len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        np.cumsum([0 if x is None else len(x) for x in items], out=offsets[1:])
    data = np.frombuffer(b"".join(x for x in items if x is not None), dtype=np.uint8)
    return offsets, valid, data


_VIEW = struct.Struct("<i12s")
_REF = struct.Struct("<i4sii")


def binary_views(items: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(views n x 16 bytes, valid, data) of a list of bytes-or-None, every field longer than 12 bytes in data
    (buffer 1), as the compiled builder lays out fields it copies."""
    views = bytearray(16 * len(items))
    valid = np.fromiter((x is not None for x in items), dtype=np.uint8, count=len(items))
    parts, size = [], 0
    for i, x in enumerate(items):
        if x is None:
            continue
        if len(x) <= 12:
            _VIEW.pack_into(views, 16 * i, len(x), x)
        else:
            _REF.pack_into(views, 16 * i, len(x), x[:4], 1, size)
            parts.append(x)
            size += len(x)
    return np.frombuffer(views, dtype=np.uint8), valid, np.frombuffer(b"".join(parts), dtype=np.uint8)


class PyColumnBuilder:
    """Collects records batch by batch; ``finish`` returns the arrays (see the module docstring)."""

    compiled = False

    def __init__(self, views: bool = False) -> None:
        self.views = views
        self._offset: list[int] = []
        self._timestamp: list[int] = []
        self._key: list[bytes | None] = []
        self._value: list[bytes | None] = []
        self._headers: list = []
        self._batches: list[tuple] = []
        self.n_bytes = 0

    @property
    def n_records(self) -> int:
        return len(self._offset)

    def begin_batch(self, base_offset: int, position: int, magic: int, leader_epoch: int, producer_id: int,
                    producer_epoch: int, base_sequence: int, timestamp_type: int, transactional: bool,
                    control: bool) -> None:  # fmt: skip
        self._batches.append((len(self._offset), base_offset, position, magic, leader_epoch, producer_id,
                              producer_epoch, base_sequence, timestamp_type, transactional, control))  # fmt: skip

    def add_records(self, recs: list[Record]) -> None:
        self._offset += [r.offset for r in recs]
        self._timestamp += [r.timestamp for r in recs]
        self._key += [r.key for r in recs]
        self._value += [r.value for r in recs]
        self._headers += [r.headers for r in recs]
        self.n_bytes += sum([(0 if r.key is None else len(r.key)) + (0 if r.value is None else len(r.value))
                             for r in recs])  # fmt: skip

    def finish(self) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {"offset": to_int64(self._offset), "timestamp": to_int64(self._timestamp)}
        fields = binary_views if self.views else _binary
        out["key_views" if self.views else "key_offsets"], out["key_valid"], out["key_data"] = fields(self._key)
        out["value_views" if self.views else "value_offsets"], out["value_valid"], out["value_data"] = fields(self._value)
        header_offsets = np.zeros(len(self._headers) + 1, dtype=np.int64)
        if self._headers:
            np.cumsum([len(h) for h in self._headers], out=header_offsets[1:])
        out["header_offsets"] = header_offsets
        flat = [h for hs in self._headers for h in hs]
        hk_off, _, out["header_key_data"] = _binary([k.encode("utf-8") for k, _ in flat])
        out["header_key_offsets"] = hk_off
        out["header_value_offsets"], out["header_value_valid"], out["header_value_data"] = _binary([v for _, v in flat])
        b = self._batches
        out["batch_start"] = np.array([x[0] for x in b], dtype=np.int64)
        for i, (name, dtype) in enumerate(BATCH_FIELDS, start=1):
            out[name] = np.array([x[i] for x in b], dtype=dtype)
        return out
