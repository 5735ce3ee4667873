"""Fuzz targets shared by the hypothesis tests (``tests/fuzz/test_fuzz_*.py``) and the atheris harnesses (``tests/fuzz/``).

Each ``target_*`` takes raw bytes (plus a few knobs), drives one parser family as far as it will go and checks the
invariants every parser must keep on hostile input:

* only ``kafkalog.errors`` types escape (``KafkaLogError``; its ``ValueError`` subclasses count, a bare
  ``ValueError``/``struct.error``/``IndexError``/``UnicodeDecodeError``/``MemoryError``/``OverflowError`` does not);
* what a parser accepts is self-consistent (reader positions add up, validated batches pass their CRC, index
  lookups answer inside the file).

A violation raises ``Escape`` (an ``AssertionError``) chained to the original exception, so pytest and atheris
both report it with the traceback of the faulty module.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafkalog.errors import KafkaLogError

#: Cap used when the fuzzers decompress a batch: keeps a single input cheap while still exercising the cap logic.
FUZZ_MAX_DECOMPRESSED = 1 << 20

BATCH_FIELDS = (
    "base_offset",
    "last_offset",
    "magic",
    "crc",
    "compression",
    "timestamp_type",
    "is_transactional",
    "is_control",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "last_sequence",
    "partition_leader_epoch",
    "base_timestamp",
    "max_timestamp",
    "record_count",
    "size_in_bytes",
    "position",
    "offset_of_max_timestamp",
    "next_offset",
)


class Escape(AssertionError):
    """A parser let a non-kafkalog exception escape, or broke one of its own invariants."""


def guarded(what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[bool, Any]:
    """Call ``fn``; ``(True, result)`` on success, ``(False, error)`` for a kafkalog error, ``Escape`` otherwise."""
    try:
        return True, fn(*args, **kwargs)
    except KafkaLogError as exc:
        return False, exc
    except Exception as exc:  # noqa: BLE001 - that is the point: anything else is a bug
        raise Escape(f"{what}: {type(exc).__module__}.{type(exc).__name__} escaped: {exc}") from exc


def check(cond: bool, message: str) -> None:
    if not cond:
        raise Escape(message)


# --- records ---------------------------------------------------------------------------------------------------


def consume_batch(batch: Any, *, max_size: int = FUZZ_MAX_DECOMPRESSED) -> list | None:
    """Touch every field and decode every record of a (magic 0/1/2) batch; the records, or None if corrupt."""
    for name in BATCH_FIELDS:
        guarded(f"batch.{name}", getattr, batch, name)
    guarded("repr(batch)", repr, batch)
    ok, valid = guarded("batch.is_valid()", batch.is_valid)
    if ok:
        check(isinstance(valid, bool), f"is_valid() returned {valid!r}")
    guarded("batch.ensure_valid()", batch.ensure_valid)
    ok, records = guarded("batch.records()", batch.records, max_size=max_size)
    if not ok:
        return None
    for r in records:
        check(isinstance(r.offset, int) and isinstance(r.timestamp, int), f"bad record {r!r}")
        check(r.key is None or isinstance(r.key, (bytes, bytearray, memoryview)), "key is not bytes")
        check(r.value is None or isinstance(r.value, (bytes, bytearray, memoryview)), "value is not bytes")
        for hk, hv in r.headers:
            check(isinstance(hk, str), "header key is not str")
            check(hv is None or isinstance(hv, (bytes, bytearray, memoryview)), "header value is not bytes")
    if hasattr(batch, "control_marker"):
        guarded("batch.control_marker()", batch.control_marker)
    return records


def target_read_batches(data: bytes, *, position: int = 0, validate: bool = False, deep: bool = True) -> list:
    """``read_batches`` over arbitrary bytes: never raises for bad bytes, positions add up, batches are contiguous,
    ``validate=True`` yields only CRC-valid batches. Returns the batches."""
    from kafkalog.records import read_batches

    position = min(max(position, 0), len(data))
    ok, reader = guarded("read_batches()", read_batches, data, position=position, validate=validate)
    if not ok:
        raise Escape(f"read_batches() raised {reader!r} for a valid position")
    batches = []
    it = iter(reader)
    while True:
        ok, batch = guarded("next(BatchReader)", next, it, None)
        if not ok:
            raise Escape(f"BatchReader iteration raised {type(batch).__name__}: {batch}; it must stop, not raise")
        if batch is None:
            break
        batches.append(batch)
    expected = position
    for b in batches:
        check(b.position == expected, f"batch at {b.position}, expected {expected}")
        check(len(b.raw) == b.size_in_bytes, "raw view length differs from size_in_bytes")
        expected += b.size_in_bytes
        if validate:
            check(b.is_valid(), f"validate=True yielded a batch with a bad CRC at {b.position}")
    check(reader.valid_bytes == expected, f"valid_bytes {reader.valid_bytes} != end of last batch {expected}")
    check(reader.valid_bytes + reader.invalid_bytes == len(data), "valid_bytes + invalid_bytes != source size")
    check((reader.invalid_bytes == 0) == (reader.error is None), "error set iff invalid bytes remain")
    if reader.error is not None:
        check(isinstance(reader.error, KafkaLogError), f"reader.error is {type(reader.error)}")
    if deep:
        for b in batches:
            consume_batch(b)
    return batches


def target_record_batch(data: bytes) -> None:
    """``RecordBatch(raw)`` built directly over arbitrary bytes."""
    from kafkalog.records import RecordBatch

    ok, batch = guarded("RecordBatch()", RecordBatch, data, 0)
    if ok:
        consume_batch(batch)


def target_legacy_batch(data: bytes) -> None:
    """``LegacyBatch(raw)`` (magic 0/1) over arbitrary bytes, plus its deep message iteration."""
    from kafkalog.records.legacy import LegacyBatch, parse_message

    guarded("parse_message()", parse_message, data, 0, len(data))
    ok, batch = guarded("LegacyBatch()", LegacyBatch, data, 0)
    if ok:
        consume_batch(batch)
        guarded("LegacyBatch.messages()", batch.messages, max_size=FUZZ_MAX_DECOMPRESSED)


def target_decompress(codec: int, data: bytes, *, max_size: int = FUZZ_MAX_DECOMPRESSED) -> None:
    """Each codec's decoder over arbitrary bytes: output never exceeds ``max_size``."""
    from kafkalog.records.compression import decompress

    for ignore_hc in (False, True):
        ok, out = guarded("decompress()", decompress, codec, data, max_size=max_size, ignore_lz4_header_checksum=ignore_hc)
        if ok:
            check(len(out) <= max_size, f"codec {codec}: {len(out)} bytes out, cap {max_size}")


def target_varint(data: bytes) -> None:
    """The varint decoders over arbitrary bytes: values stay in int32/int64 range."""
    from kafkalog.records import varint

    for name, lo, hi in (("decode_varint", -(1 << 31), (1 << 31) - 1), ("decode_varlong", -(1 << 63), (1 << 63) - 1)):
        fn = getattr(varint, name, None)
        if fn is None:
            continue
        ok, res = guarded(name, fn, data, 0)
        if ok:
            value = res[0] if isinstance(res, tuple) else res
            check(lo <= value <= hi, f"{name} returned {value} out of range")


# --- indexes ---------------------------------------------------------------------------------------------------


def _scratch_dir() -> Path:
    root = Path(os.environ.get("KAFKALOG_FUZZ_TMP", tempfile.gettempdir())) / f"kafkalog-fuzz-{os.getpid()}"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _count_attr(idx: Any) -> str:
    """The entry-count property's name (``entry_count``; ``entries`` before the index API rename)."""
    return "entry_count" if hasattr(type(idx), "entry_count") else "entries"


def target_index(kind: str, data: bytes, base_offset: int, probes: list[int], *, directory: Path | None = None) -> None:
    """Open an index (``offset``, ``time`` or ``txn``) over arbitrary file content, then look up, list and check it.

    Lookups must answer with offsets >= base offset (or the documented "below the first entry" answer) and never
    raise anything but kafkalog errors; read-only opening must leave the file unchanged.
    """
    from kafkalog.index import OffsetIndex, TimeIndex

    directory = directory or _scratch_dir()
    suffix = {"offset": ".index", "time": ".timeindex", "txn": ".txnindex"}[kind]
    path = directory / f"{base_offset % (10**20):020d}{suffix}"
    path.write_bytes(data)
    try:
        if kind == "txn":
            from kafkalog.index.txn_index import TransactionIndex

            idx = TransactionIndex(path, base_offset, writable=False)
            guarded("txn.entry count", getattr, idx, _count_attr(idx))
            guarded("txn.all_entries()", idx.all_entries)
            guarded("txn.entries_array()", idx.entries_array)
            guarded("txn.last_offset", getattr, idx, "last_offset")
            for p in probes:
                guarded("txn.collect_aborted_txns()", idx.collect_aborted_txns, p, p + 100)
            guarded("txn.sanity_check()", idx.sanity_check)
            guarded("txn.strict_check()", idx.strict_check, base_offset + 1000)
            guarded("txn.close()", idx.close)
        else:
            cls = OffsetIndex if kind == "offset" else TimeIndex
            for use_mmap in (True, False):
                idx = cls(path, base_offset, writable=False, use_mmap=use_mmap)
                ok, n = guarded(f"{kind}.entry count", getattr, idx, _count_attr(idx))
                guarded(f"{kind}.entries_array()", idx.entries_array)
                guarded(f"{kind}.sanity_check()", idx.sanity_check)
                if kind == "offset":
                    guarded("offset.strict_check()", idx.strict_check, len(data) * 4)
                else:
                    guarded("time.strict_check()", idx.strict_check, base_offset + 1000)
                for p in probes:
                    ok, ans = guarded(f"{kind}.lookup({p})", idx.lookup, p)
                    if ok:
                        check(len(ans) == 2, f"{kind}.lookup returned {ans!r}")
                if ok and n:
                    guarded(f"{kind}.entry(0)", idx.entry, 0)
                    guarded(f"{kind}.entry(n)", idx.entry, n)  # one past the end: an IndexStateError
                import numpy as np

                guarded(f"{kind}.lookup_many()", idx.lookup_many, np.asarray(probes, dtype=np.int64))
                guarded(f"{kind}.close()", idx.close)
        check(path.read_bytes() == data, f"opening a read-only {kind} index changed the file")
    finally:
        path.unlink(missing_ok=True)


# --- checkpoints and metadata --------------------------------------------------------------------------------


def _parsers() -> dict[str, Callable[[bytes], Any]]:
    from kafkalog.checkpoint.clean_shutdown import parse_clean_shutdown
    from kafkalog.checkpoint.leader_epoch import parse_leader_epoch_checkpoint
    from kafkalog.checkpoint.meta_properties import parse_meta_properties
    from kafkalog.checkpoint.offset_checkpoint import parse_offset_checkpoint
    from kafkalog.checkpoint.partition_metadata import parse_partition_metadata
    from kafkalog.log.producer_snapshot import parse_producer_snapshot

    return {
        "offset_checkpoint": parse_offset_checkpoint,
        "leader_epoch": parse_leader_epoch_checkpoint,
        "meta_properties": parse_meta_properties,
        "partition_metadata": parse_partition_metadata,
        "producer_snapshot": parse_producer_snapshot,
        "clean_shutdown": parse_clean_shutdown,
    }


CHECKPOINT_KINDS = (
    "offset_checkpoint",
    "leader_epoch",
    "meta_properties",
    "partition_metadata",
    "producer_snapshot",
    "clean_shutdown",
)


def target_checkpoint(kind: str, data: bytes) -> Any:
    """One checkpoint/metadata parser over arbitrary bytes; what it accepts must survive a write/re-read."""
    parse = _parsers()[kind]
    ok, value = guarded(f"parse {kind}", parse, data)
    if not ok:
        return None
    fmt = _formatter(kind)
    if fmt is not None:
        ok2, again = guarded(f"format {kind}", fmt, value)
        if ok2:
            ok3, reparsed = guarded(f"re-parse {kind}", parse, again)
            check(ok3, f"{kind}: formatted output of an accepted file does not parse: {reparsed!r}")
            if kind != "meta_properties":  # meta.properties keeps unknown keys/comments out of the model
                check(reparsed == value, f"{kind}: {value!r} -> {again!r} -> {reparsed!r}")
    return value


def _formatter(kind: str) -> Callable[[Any], bytes] | None:
    if kind == "offset_checkpoint":
        from kafkalog.checkpoint.offset_checkpoint import format_offset_checkpoint

        return format_offset_checkpoint
    if kind == "leader_epoch":
        from kafkalog.checkpoint.leader_epoch import format_leader_epoch_checkpoint

        return format_leader_epoch_checkpoint
    if kind == "partition_metadata":
        from kafkalog.checkpoint.partition_metadata import format_partition_metadata

        return lambda pm: format_partition_metadata(pm.topic_id)
    if kind == "producer_snapshot":
        from kafkalog.log.producer_snapshot import format_producer_snapshot

        return format_producer_snapshot
    if kind == "meta_properties":
        from kafkalog.checkpoint.meta_properties import format_meta_properties

        return format_meta_properties
    return None
