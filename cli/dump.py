"""``kafkalog dump``: Kafka's ``kafka-dump-log.sh --files`` offline, with the same output lines.

Text lines copy Kafka's DumpLogSegments word for word (``baseOffset: ... isvalid: ...``, ``| offset: ...``,
``Found N invalid bytes at the end of ...``, ``offset: N position: M``, ``timestamp: T offset: O``, the mismatch
reports on stderr) so grep scripts written against Kafka keep working. Where Kafka is slow or noisy we differ
on purpose, and docs/cli.md lists each case: the time-index check is one pass over the log instead of a re-scan
per entry, non-consecutive offsets are counted from the segment's base offset instead of -1, and the exit code says
whether anything was corrupt.

Everything is streamed: one batch is decoded at a time and its lines written before the next is read, so memory
does not grow with the segment.
"""

from __future__ import annotations

import bisect
import json as _json
import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click

from kafkalog.remote import localized_paths

from .main import EXIT_CORRUPT, EXIT_OK, CliState, report_error
from .output import Event, Line, Output, make_output
from .storage_opts import storage_option

DECODERS = ("string", "hex", "json", "none")
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
RECORD_INDENT = "|"

OFFSET_CHECKPOINT_NAMES = frozenset(
    {
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "replication-offset-checkpoint",
        "cleaner-offset-checkpoint",
    }
)


def _b(value: bool) -> str:
    return "true" if value else "false"


def _codec_name(batch: Any) -> str:
    try:
        return batch.compression.kafka_name
    except Exception:  # noqa: BLE001 - an unknown codec id in a corrupt batch is still dumped
        return f"unknown({batch.attributes & 0x07})"


def _ts_type_name(batch: Any) -> str:
    return batch.timestamp_type.kafka_name


def _optional_long(value: int | None) -> str:
    """Java's OptionalLong.toString, which Kafka prints for deleteHorizonMs and currentTxnFirstOffset."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


# --- decoders ---------------------------------------------------------------------------------------------------


def decode_bytes(data: bytes, decoder: str) -> tuple[str, Any]:
    """(text form, JSON value) of a key or value under ``decoder``.

    ``string`` is Kafka's StringDecoder (UTF-8, bad bytes become U+FFFD); ``json`` parses the bytes as JSON and
    falls back to the string form when they are not JSON (dumping must not stop on one odd record).
    """
    if decoder == "hex":
        text = bytes(data).hex()
        return text, text
    s = bytes(data).decode("utf-8", errors="replace")
    if decoder == "json":
        try:
            value = _json.loads(s)
        except ValueError:
            return s, s
        return _json.dumps(value, separators=(",", ":"), ensure_ascii=False), value
    return s, s


# --- events -----------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class FileHeader(Event):
    """``Dumping <file>`` (and ``Log starting offset: N`` for a ``.log``)."""

    path: str
    kind: str
    start_offset: int | None = None
    type = "file"  # type: ignore[misc]

    def text(self) -> str:
        line = f"Dumping {self.path}"
        if self.kind == "log" and self.start_offset is not None:
            line += f"\nLog starting offset: {self.start_offset}"
        return line

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": self.path, "kind": self.kind}
        if self.start_offset is not None:
            out["startOffset"] = self.start_offset
        return out


@dataclass(slots=True)
class BatchEvent(Event):
    batch: Any
    type = "batch"  # type: ignore[misc]

    def text(self) -> str:
        b = self.batch
        if b.magic >= 2:
            head = (
                f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count}"
                f" baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id}"
                f" producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.partition_leader_epoch}"
                f" isTransactional: {_b(b.is_transactional)} isControl: {_b(b.is_control)}"
                f" deleteHorizonMs: {_optional_long(b.delete_horizon_ms)}"
            )
        else:
            head = f"offset: {b.last_offset}"
        return (
            f"{head} position: {b.position} {_ts_type_name(b)}: {b.max_timestamp} size: {b.size_in_bytes}"
            f" magic: {b.magic} compresscodec: {_codec_name(b)} crc: {b.crc} isvalid: {_b(b.is_valid())}"
        )

    def fields(self) -> dict[str, Any]:
        b = self.batch
        out: dict[str, Any] = {"baseOffset": b.base_offset, "lastOffset": b.last_offset}
        if b.magic >= 2:
            out.update(
                count=b.record_count,
                baseSequence=b.base_sequence,
                lastSequence=b.last_sequence,
                producerId=b.producer_id,
                producerEpoch=b.producer_epoch,
                partitionLeaderEpoch=b.partition_leader_epoch,
                isTransactional=b.is_transactional,
                isControl=b.is_control,
                deleteHorizonMs=b.delete_horizon_ms,
            )
        out.update(
            {
                "position": b.position,
                _ts_type_name(b): b.max_timestamp,
                "size": b.size_in_bytes,
                "magic": b.magic,
                "compresscodec": _codec_name(b),
                "crc": b.crc,
                "isvalid": b.is_valid(),
            }
        )
        return out


@dataclass(slots=True)
class RecordEvent(Event):
    batch: Any
    record: Any
    skip_metadata: bool
    print_data: bool
    key_decoder: str
    value_decoder: str
    type = "record"  # type: ignore[misc]

    def _contents(self) -> list[tuple[str, str, Any]]:
        """(label, text, json) of the key and payload Kafka would print (none for control records)."""
        if not self.print_data or self.batch.is_control:
            return []
        out = []
        r = self.record
        if r.key is not None and self.key_decoder != "none":
            out.append(("key", *decode_bytes(r.key, self.key_decoder)))
        if r.value is not None and self.value_decoder != "none":
            out.append(("payload", *decode_bytes(r.value, self.value_decoder)))
        return out

    def _control(self) -> dict[str, Any] | None:
        if not self.batch.is_control:
            return None
        from kafkalog.records.control import ControlRecordType, EndTransactionMarker, parse_control_type

        try:
            ctype = parse_control_type(self.record.key)
            if ctype in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                marker = EndTransactionMarker.from_key_value(self.record.key, self.record.value)
                return {"endTxnMarker": marker.control_type.name, "coordinatorEpoch": marker.coordinator_epoch}
            type_id = int.from_bytes(bytes(self.record.key[2:4]), "big", signed=True)
            return {"controlType": f"{ctype.name}({type_id})"}
        except Exception as exc:  # noqa: BLE001 - a malformed control record is reported, not fatal
            return {"controlError": str(exc)}

    def text(self) -> str | None:
        r, b = self.record, self.batch
        parts: list[str] = []
        if not self.skip_metadata:
            line = (
                f"{RECORD_INDENT} offset: {r.offset} {_ts_type_name(b)}: {r.timestamp}"
                f" keySize: {_size(r.key)} valueSize: {_size(r.value)}"
            )
            if b.magic >= 2:
                line += f" sequence: {r.sequence} headerKeys: [{','.join(k for k, _ in r.headers)}]"
            else:
                # Legacy messages carry their own CRC (Kafka prints the inner message's for compressed wrappers).
                line += f" isValid: {_b(r.crc_valid)} crc: {r.crc}"
            control = self._control()
            if control is not None:
                if "endTxnMarker" in control:
                    line += f" endTxnMarker: {control['endTxnMarker']} coordinatorEpoch: {control['coordinatorEpoch']}"
                elif "controlType" in control:
                    line += f" controlType: {control['controlType']}"
                else:
                    line += f" controlError: {control['controlError']}"
            parts.append(line)
        prefix = f"{RECORD_INDENT} " if self.skip_metadata else " "
        for label, text, _ in self._contents():
            parts.append(f"{prefix}{label}: {text}")
            prefix = " "
        if not parts:
            return None  # Kafka prints an empty line here; nothing is more useful to a reader
        return "".join(parts)

    def fields(self) -> dict[str, Any]:
        r, b = self.record, self.batch
        out: dict[str, Any] = {
            "offset": r.offset,
            "timestamp": r.timestamp,
            "timestampType": _ts_type_name(b),
            "keySize": _size(r.key),
            "valueSize": _size(r.value),
        }
        if b.magic >= 2:
            out["sequence"] = r.sequence
            out["headerKeys"] = [k for k, _ in r.headers]
        else:
            out["headerKeys"] = []
            out["isValid"] = r.crc_valid
            out["crc"] = r.crc
        control = self._control()
        if control is not None:
            out.update(control)
        for label, _, value in self._contents():
            out[label] = value
        return out


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


@dataclass(slots=True)
class InvalidBytes(Event):
    """``Found N invalid bytes at the end of <name>`` (stdout, as Kafka prints it)."""

    name: str
    position: int
    size: int
    type = "invalid_bytes"  # type: ignore[misc]

    def text(self) -> str:
        return f"Found {self.size} invalid bytes at the end of {self.name}"

    def fields(self) -> dict[str, Any]:
        return {"file": self.name, "position": self.position, "size": self.size}


@dataclass(slots=True)
class Simple(Event):
    """A result line with a fixed text and JSON shape (index entries, checkpoint entries, snapshot entries...)."""

    line: str
    data: dict[str, Any]
    type: str = "entry"  # type: ignore[misc]

    def text(self) -> str:
        return self.line

    def fields(self) -> dict[str, Any]:
        return self.data

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, **self.data}


@dataclass(slots=True)
class Report(Event):
    """A block of problems for one file (stderr in text mode; one JSON object per item)."""

    header: str
    lines: list[str]
    items: list[dict[str, Any]]
    type: str = "problem"  # type: ignore[misc]
    is_problem = True  # type: ignore[misc]

    def text(self) -> str:
        return "\n".join([self.header, *self.lines])

    def fields(self) -> dict[str, Any]:  # pragma: no cover - to_json is used
        return {}

    def to_json(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [{"type": self.type, **item} for item in self.items]


# --- the command ------------------------------------------------------------------------------------------------


@dataclass
class DumpOptions:
    deep: bool = False
    print_data: bool = False
    verify_only: bool = False
    sanity_only: bool = False
    max_bytes: int | None = None
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    skip_metadata: bool = False
    key_decoder: str = "string"
    value_decoder: str = "string"


@dataclass
class DumpState:
    """Findings gathered across files, printed at the end as Kafka does, and the exit code they imply."""

    out: Output
    opts: DumpOptions
    code: int = EXIT_OK
    index_mismatches: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_mismatch: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_out_of_order: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    time_not_found: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    non_consecutive: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def corrupt(self) -> None:
        self.code = max(self.code, EXIT_CORRUPT)

    def emit(self, event: Event) -> None:
        self.out.emit(event)

    def problem(self, message: str, kind: str, **extra: Any) -> None:
        self.out.emit(Line(message, kind=kind, extra=extra, problem=True))


@click.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=str))
@click.option("--files", "files_opt", multiple=True, help="Comma separated files (kafka-dump-log.sh spelling).")
@click.option("--deep-iteration", is_flag=True, help="Print every record, not only batch headers.")
@click.option("--print-data-log", is_flag=True, help="Print keys and values (implies --deep-iteration).")
@click.option("--verify-index-only", is_flag=True, help="Check index entries against the log; print only problems.")
@click.option("--index-sanity-check", is_flag=True, help="Only run the broker's startup sanity check on indexes.")
@click.option("--max-bytes", type=click.IntRange(min=0), default=None, help="Read at most this many bytes of a .log.")
@click.option(
    "--max-message-size",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_MESSAGE_SIZE,
    show_default=True,
    help="Largest batch looked at when checking an index entry.",
)
@click.option("--skip-record-metadata", is_flag=True, help="Print record contents without their metadata.")
@click.option("--key-decoder", type=click.Choice(DECODERS), default=None, help="How to print keys (default string).")
@click.option(
    "--value-decoder", type=click.Choice(DECODERS), default=None, help="How to print values (default string)."
)
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per line instead of Kafka's text lines.")
@storage_option
@click.pass_obj
def dump(
    state: CliState | None,
    files: tuple[str, ...],
    files_opt: tuple[str, ...],
    deep_iteration: bool,
    print_data_log: bool,
    verify_index_only: bool,
    index_sanity_check: bool,
    max_bytes: int | None,
    max_message_size: int,
    skip_record_metadata: bool,
    key_decoder: str | None,
    value_decoder: str | None,
    json_mode: bool,
    storage_opts: dict,
) -> None:
    """Dump .log, .index, .timeindex, .txnindex, .snapshot, checkpoint and metadata files, like kafka-dump-log.sh.

    Exit code 1 when anything dumped is corrupt (bad CRC, trailing bytes, index entries that do not match the
    log, a failed sanity check, an unreadable checkpoint).
    """
    state = state or CliState()
    paths = list(files) + [p for opt in files_opt for p in opt.split(",") if p]
    if not paths:
        raise click.UsageError("give at least one FILE (or --files a,b,...)")
    # Kafka: a decoder implies --print-data-log, which implies --deep-iteration.
    print_data = print_data_log or key_decoder is not None or value_decoder is not None
    opts = DumpOptions(
        deep=deep_iteration or print_data,
        print_data=print_data,
        verify_only=verify_index_only,
        sanity_only=index_sanity_check,
        max_bytes=max_bytes,
        max_message_size=max_message_size,
        skip_metadata=skip_record_metadata,
        key_decoder=key_decoder or "string",
        value_decoder=value_decoder or "string",
    )
    st = DumpState(make_output(json_mode=json_mode, quiet=state.quiet), opts)
    with localized_paths(paths, storage_opts) as local:  # a remote file: a scratch copy with its siblings
        _dump_all(local, st, state)
    _print_findings(st)
    click.get_current_context().exit(st.code)


def _dump_all(paths: list[str], st: DumpState, state: CliState) -> None:
    for path in paths:
        try:
            dump_file(path, st)
        except BrokenPipeError:
            raise
        except Exception as exc:  # noqa: BLE001 - keep going with the next file; same line/code as the group
            st.out.stdout.flush()
            st.code = max(st.code, report_error(exc, debug=state.debug))


def file_kind(name: str) -> tuple[str, str]:
    """(kind, suffix-stripped name) for a file name; kinds: log, index, timeindex, txnindex, snapshot, ..."""
    base = name
    for temp in (".deleted", ".cleaned", ".swap"):
        if base.endswith(temp):
            base = base[: -len(temp)]
            break
    for suffix, kind in (
        (".log", "log"),
        (".index", "index"),
        (".timeindex", "timeindex"),
        (".txnindex", "txnindex"),
        (".snapshot", "snapshot"),
    ):
        if base.endswith(suffix):
            return kind, base
    if base in OFFSET_CHECKPOINT_NAMES:
        return "offset-checkpoint", base
    if base == "leader-epoch-checkpoint":
        return "leader-epoch-checkpoint", base
    if base == "partition.metadata":
        return "partition-metadata", base
    if base == "meta.properties":
        return "meta-properties", base
    if base == ".kafka_cleanshutdown":
        return "clean-shutdown", base
    return "unknown", base


def _base_offset(base_name: str) -> int:
    stem = base_name.split(".")[0]
    try:
        return int(stem)
    except ValueError:
        raise click.UsageError(f"{base_name}: a segment file name must start with its base offset") from None


def dump_file(path: str, st: DumpState) -> None:
    """Dump one file according to its name; raise for I/O errors (the caller reports them)."""
    name = os.path.basename(path)
    kind, base = file_kind(name)
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory (dump takes files; use 'kafkalog verify' for dirs)", path)
    if kind == "unknown":
        st.emit(FileHeader(path, kind))
        st.problem(f"Ignoring unknown file {path}", "ignored", file=path)
        return
    handler: Callable[[str, str, DumpState], None] = _HANDLERS[kind]
    if kind == "log":
        # Opened before the header so a missing file is one error line, not a header and then an error.
        with open(path, "rb"):
            pass
        st.emit(FileHeader(path, kind, _base_offset(base)))
    else:
        st.emit(FileHeader(path, kind))
    handler(path, base, st)


# --- .log -------------------------------------------------------------------------------------------------------


class _MappedFile:
    """A read-only mmap of a file that gives back pages already consumed.

    The library's ``read_batches`` walks a memoryview; over an mmap every page touched stays in our resident set
    until the mapping closes, so a 1 GiB segment would show as 1 GiB of RSS. Releasing the pages behind the
    cursor (``MADV_DONTNEED`` on a read-only file mapping only drops them from this process; the page cache keeps
    them) keeps the dump's memory flat whatever the segment size.
    """

    RELEASE_EVERY = 32 << 20

    def __init__(self, path: str) -> None:
        import mmap

        self._mm = None
        self._released = 0
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                self.view = memoryview(b"")
                return
            try:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # no mmap on this filesystem: read it (small files, special mounts)
                self.view = memoryview(f.read())
                return
        self.view = memoryview(self._mm)

    def release_before(self, position: int) -> None:
        """Drop pages wholly before ``position`` from the resident set (cheap no-op until 32 MiB have passed)."""
        import mmap

        if self._mm is None or position - self._released < self.RELEASE_EVERY or not hasattr(self._mm, "madvise"):
            return
        end = position - position % mmap.PAGESIZE
        try:
            self._mm.madvise(mmap.MADV_DONTNEED, self._released, end - self._released)
        except (OSError, ValueError, AttributeError):
            return
        self._released = end

    def close(self) -> None:
        try:
            self.view.release()
            if self._mm is not None:
                self._mm.close()
        except BufferError:  # a batch view still alive: the GC unmaps later
            pass


def _dump_log(path: str, base: str, st: DumpState) -> None:
    from kafkalog.errors import KafkaLogError
    from kafkalog.records import read_batches

    opts = st.opts
    last_offset: int | None = None  # Kafka: the first record sets it, so a compacted start is not a gap
    gaps: list[tuple[int, int]] = []
    mapped = _MappedFile(path)
    reader = read_batches(mapped.view, end=opts.max_bytes)
    try:
        for batch in reader:
            st.emit(BatchEvent(batch))
            if not batch.is_valid():
                st.corrupt()
            if opts.deep:
                try:
                    records = batch.records() if batch.magic >= 2 else batch.messages()
                except KafkaLogError as exc:
                    st.corrupt()
                    st.problem(
                        f"Could not read the records of the batch at position {batch.position} of {path}: {exc}",
                        "corrupt_batch",
                        file=path,
                        position=batch.position,
                        error=str(exc),
                    )
                    records = []
                for record in records:
                    if last_offset is not None and record.offset != last_offset + 1:
                        gaps.append((last_offset, record.offset))
                    last_offset = record.offset
                    st.emit(
                        RecordEvent(
                            batch, record, opts.skip_metadata, opts.print_data, opts.key_decoder, opts.value_decoder
                        )
                    )
            mapped.release_before(batch.position)
        if reader.invalid_bytes > 0:
            st.corrupt()
            # Kafka reports trailing bytes only when reading the whole file.
            if opts.max_bytes is None:
                st.emit(InvalidBytes(os.path.basename(path), reader.valid_bytes, reader.invalid_bytes))
            else:
                st.out.note(f"Stopped before {reader.invalid_bytes} unreadable bytes at position {reader.valid_bytes}")
    finally:
        del reader
        mapped.close()
    if gaps:
        st.non_consecutive.setdefault(os.path.abspath(path), []).extend(gaps)


# --- .index / .timeindex ----------------------------------------------------------------------------------------


class _LogView:
    """The segment's ``.log`` opened once, for checking many index entries against it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mapped = _MappedFile(path)
        self.buffer = self._mapped.view

    def batch_at(self, position: int, max_size: int) -> Any | None:
        """The first batch starting at ``position`` that fits in ``max_size`` bytes (Kafka's slice), or None."""
        from kafkalog.records import read_batches

        if position < 0 or position >= len(self.buffer):
            return None
        reader = read_batches(self.buffer, position=position, end=min(len(self.buffer), position + max_size))
        return next(iter(reader), None)

    def shallow_scan(self) -> tuple[array, array]:
        """(last offsets, positions) of every readable batch: one pass, 16 bytes per batch."""
        from kafkalog.records import read_batches

        lasts, positions = array("q"), array("q")
        for batch in read_batches(self.buffer):
            lasts.append(batch.last_offset)
            positions.append(batch.position)
            self._mapped.release_before(batch.position)
        return lasts, positions

    def close(self) -> None:
        self._mapped.close()


def _sibling(path: str, base: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), base.split(".")[0] + suffix)


def _open_log_for(path: str, base: str, st: DumpState) -> _LogView | None:
    log_path = _sibling(path, base, ".log")
    if not os.path.exists(log_path):
        st.out.note(f"{log_path} not found: entries of {path} are not checked against the log")
        return None
    return _LogView(log_path)


def _dump_index(path: str, base: str, st: DumpState) -> None:
    from kafkalog.errors import CorruptIndexError
    from kafkalog.index.offset_index import OffsetIndex

    start = _base_offset(base)
    index = OffsetIndex(path, start, writable=False)
    try:
        entries = index.entries_array() if index.entry_count else None
        if entries is None or len(entries) == 0:
            st.emit(Simple(f"{path} is empty.", {"file": path, "entries": 0}, type="index_empty"))
            return
        if st.opts.sanity_only:
            _sanity(index, path, st, CorruptIndexError)
            return
        log = _open_log_for(path, base, st)
        mismatches: list[tuple[int, int]] = []
        try:
            for i in range(len(entries)):
                offset, position = int(entries[i]["offset"]), int(entries[i]["position"])
                # A crash leaves a sparse file: the first zero entry after entry 0 ends the real ones (as Kafka).
                if offset == start and i > 0:
                    break
                if log is not None:
                    batch = log.batch_at(position, st.opts.max_message_size)
                    found = batch.last_offset if batch is not None else -1
                    if found != offset:
                        mismatches.append((offset, found))
                if not st.opts.verify_only:
                    st.emit(
                        Simple(
                            f"offset: {offset} position: {position}",
                            {"offset": offset, "position": position},
                            type="index",
                        )
                    )
        finally:
            if log is not None:
                log.close()
        if mismatches:
            st.corrupt()
            st.index_mismatches.setdefault(os.path.abspath(path), []).extend(mismatches)
    finally:
        index.close()


def _sanity(index: Any, path: str, st: DumpState, error_type: type[Exception]) -> None:
    try:
        index.sanity_check()
    except error_type as exc:
        st.corrupt()
        st.problem(f"{path} failed sanity check: {exc}", "sanity_check", file=path, passed=False, error=str(exc))
        return
    st.emit(Simple(f"{path} passed sanity check.", {"file": path, "passed": True}, type="sanity_check"))


def _max_record_timestamp(batch: Any) -> int:
    ts = -1
    for record in batch.records():
        if record.timestamp > ts:
            ts = record.timestamp
    return ts


def _dump_time_index(path: str, base: str, st: DumpState) -> None:
    """Time index entries, each checked against the log in one pass over the log (Kafka re-scans per entry)."""
    from kafkalog.errors import CorruptIndexError, KafkaLogError
    from kafkalog.index.time_index import TimeIndex

    start = _base_offset(base)
    index = TimeIndex(path, start, writable=False)
    try:
        if st.opts.sanity_only:
            _sanity(index, path, st, CorruptIndexError)
            return
        entries = index.entries_array() if index.entry_count else []
        if len(entries) == 0:
            return
        log = _open_log_for(path, base, st)
        key = os.path.abspath(path)
        try:
            lasts, positions = log.shallow_scan() if log is not None else (array("q"), array("q"))
            sorted_lasts = all(lasts[i] < lasts[i + 1] for i in range(len(lasts) - 1))
            by_last = None if sorted_lasts else {v: i for i, v in reversed(list(enumerate(lasts)))}
            prev_ts = -1
            for i in range(len(entries)):
                ts, offset = int(entries[i]["timestamp"]), int(entries[i]["offset"])
                if offset == start and i > 0:
                    break
                if log is not None:
                    if by_last is None:
                        j = bisect.bisect_left(lasts, offset)
                    else:
                        j = by_last.get(offset, next((k for k, v in enumerate(lasts) if v >= offset), len(lasts)))
                    if j >= len(lasts):
                        st.time_not_found.setdefault(key, []).append((offset, -1))
                    elif lasts[j] != offset:
                        st.time_not_found.setdefault(key, []).append((offset, lasts[j]))
                    else:
                        batch = log.batch_at(positions[j], len(log.buffer))
                        try:
                            max_ts = _max_record_timestamp(batch) if batch is not None else -1
                        except KafkaLogError:
                            max_ts = batch.max_timestamp if batch is not None else -1
                        if max_ts != ts:
                            st.time_mismatch.setdefault(key, []).append((ts, max_ts))
                        if prev_ts >= ts:
                            st.time_out_of_order.setdefault(key, []).append((ts, prev_ts))
                if not st.opts.verify_only:
                    st.emit(
                        Simple(
                            f"timestamp: {ts} offset: {offset}", {"timestamp": ts, "offset": offset}, type="timeindex"
                        )
                    )
                prev_ts = ts
        finally:
            if log is not None:
                log.close()
        if key in st.time_not_found or key in st.time_mismatch or key in st.time_out_of_order:
            st.corrupt()
    finally:
        index.close()


# --- .txnindex / .snapshot --------------------------------------------------------------------------------------


def _dump_txn_index(path: str, base: str, st: DumpState) -> None:
    from kafkalog.index.txn_index import TransactionIndex

    index = TransactionIndex(path, _base_offset(base), writable=False)
    try:
        for txn in index.all_entries():
            data = {
                "version": txn.version,
                "producerId": txn.producer_id,
                "firstOffset": txn.first_offset,
                "lastOffset": txn.last_offset,
                "lastStableOffset": txn.last_stable_offset,
            }
            st.emit(Simple(" ".join(f"{k}: {v}" for k, v in data.items()), data, type="txnindex"))
    finally:
        index.close()


def _dump_producer_snapshot(path: str, base: str, st: DumpState) -> None:
    from kafkalog.errors import CorruptSnapshotError
    from kafkalog.log.producer_snapshot import read_producer_snapshot

    try:
        entries = read_producer_snapshot(path)
    except CorruptSnapshotError as exc:
        st.corrupt()
        st.problem(str(exc), "corrupt_snapshot", file=path, error=str(exc))
        return
    for e in entries:
        txn_first = e.txn_first_offset
        line = (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} coordinatorEpoch: {e.coordinator_epoch}"
            f" currentTxnFirstOffset: {_optional_long(txn_first)} lastTimestamp: {e.timestamp}"
        )
        data: dict[str, Any] = {
            "producerId": e.producer_id,
            "producerEpoch": e.producer_epoch,
            "coordinatorEpoch": e.coordinator_epoch,
            "currentTxnFirstOffset": txn_first,
            "lastTimestamp": e.timestamp,
        }
        if e.has_batch:  # Kafka prints the batch metadata only when the entry has some
            line += (
                f" firstSequence: {e.first_sequence} lastSequence: {e.last_sequence} lastOffset: {e.last_offset}"
                f" offsetDelta: {e.offset_delta} timestamp: {e.timestamp}"
            )
            data.update(
                firstSequence=e.first_sequence,
                lastSequence=e.last_sequence,
                lastOffset=e.last_offset,
                offsetDelta=e.offset_delta,
                timestamp=e.timestamp,
            )
        st.emit(Simple(line, data, type="producer"))


# --- checkpoints and metadata -----------------------------------------------------------------------------------


def _checkpoint_guard(path: str, st: DumpState, read: Callable[[], Any]) -> Any | None:
    from kafkalog.errors import CorruptCheckpointError

    try:
        return read()
    except CorruptCheckpointError as exc:
        st.corrupt()
        st.problem(f"corrupt checkpoint: {exc}", "corrupt_checkpoint", file=path, error=str(exc))
        return None


def _dump_offset_checkpoint(path: str, base: str, st: DumpState) -> None:
    from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint

    offsets = _checkpoint_guard(path, st, lambda: read_offset_checkpoint(path))
    if offsets is None:
        return
    for (topic, partition), offset in offsets.items():
        data = {"topic": topic, "partition": partition, "offset": offset}
        st.emit(Simple(f"topic: {topic} partition: {partition} offset: {offset}", data, type="checkpoint"))


def _dump_leader_epochs(path: str, base: str, st: DumpState) -> None:
    from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint

    entries = _checkpoint_guard(path, st, lambda: read_leader_epoch_checkpoint(path))
    for e in entries or ():
        data = {"epoch": e.epoch, "startOffset": e.start_offset}
        st.emit(Simple(f"epoch: {e.epoch} startOffset: {e.start_offset}", data, type="leader_epoch"))


def _dump_partition_metadata(path: str, base: str, st: DumpState) -> None:
    from kafkalog.checkpoint.partition_metadata import read_partition_metadata_file

    meta = _checkpoint_guard(path, st, lambda: read_partition_metadata_file(path))
    if meta is not None:
        data = {"version": meta.version, "topicId": meta.topic_id}
        st.emit(Simple(f"version: {meta.version} topicId: {meta.topic_id}", data, type="partition_metadata"))


def _dump_meta_properties(path: str, base: str, st: DumpState) -> None:
    from kafkalog.checkpoint.meta_properties import read_meta_properties

    meta = _checkpoint_guard(path, st, lambda: read_meta_properties(path))
    if meta is not None:
        data = {
            "version": meta.version,
            "clusterId": meta.cluster_id,
            "nodeId": meta.node_id,
            "directoryId": meta.directory_id,
        }
        line = " ".join(f"{k}: {v}" for k, v in data.items() if v is not None)
        st.emit(Simple(line, data, type="meta_properties"))


def _dump_clean_shutdown(path: str, base: str, st: DumpState) -> None:
    from kafkalog.checkpoint.clean_shutdown import parse_clean_shutdown

    with open(path, "rb") as f:
        epoch, error = parse_clean_shutdown(f.read(4096))
    data = {"brokerEpoch": epoch, "error": error}
    st.emit(Simple(f"brokerEpoch: {epoch}" + (f" error: {error}" if error else ""), data, type="clean_shutdown"))


_HANDLERS: dict[str, Callable[[str, str, DumpState], None]] = {
    "log": _dump_log,
    "index": _dump_index,
    "timeindex": _dump_time_index,
    "txnindex": _dump_txn_index,
    "snapshot": _dump_producer_snapshot,
    "offset-checkpoint": _dump_offset_checkpoint,
    "leader-epoch-checkpoint": _dump_leader_epochs,
    "partition-metadata": _dump_partition_metadata,
    "meta-properties": _dump_meta_properties,
    "clean-shutdown": _dump_clean_shutdown,
}


# --- end-of-run findings (Kafka prints them after all files) ---------------------------------------------------


def _as_found(pairs: list) -> list:
    return list(pairs)  # Kafka appends these to an ArrayBuffer


def _newest_first(pairs: list) -> list:
    return pairs[::-1]  # Kafka prepends these to an immutable List and prints it as is


# What kafka-dump-log prints after the files, one report per file and kind, in Kafka's order:
# (DumpState attribute, title, line per pair, JSON keys of a pair, report type, order of the pairs).
_FINDINGS: tuple[tuple[str, str, str, tuple[str, str], str, Callable[[list], list]], ...] = (
    ("index_mismatches", "Mismatches in :{name}", "  Index offset: {0}, log offset: {1}",
     ("indexOffset", "logOffset"), "index_mismatch", _newest_first),
    ("time_mismatch", "Found timestamp mismatch in :{name}", "  Index timestamp: {0}, log timestamp: {1}",
     ("indexTimestamp", "logTimestamp"), "timeindex_mismatch", _as_found),
    ("time_out_of_order", "Found out of order timestamp in :{name}",
     "  Index timestamp: {0}, Previously indexed timestamp: {1}",
     ("indexTimestamp", "previousTimestamp"), "timeindex_out_of_order", _as_found),
    ("time_not_found", "The following indexed offsets are not found in the log.",
     "Indexed offset: {0}, found log offset: {1}", ("indexOffset", "logOffset"), "timeindex_offset_not_found",
     _as_found),
    ("non_consecutive", "Non-consecutive offsets in {name}", "  {0} is followed by {1}", ("offset", "nextOffset"),
     "non_consecutive_offsets", _newest_first),
)


def _print_findings(st: DumpState) -> None:
    for attr, title, line, (key_a, key_b), kind, order in _FINDINGS:
        for name, pairs in getattr(st, attr).items():
            rows = order(pairs)
            st.out.emit(
                Report(
                    title.format(name=name),
                    [line.format(a, b) for a, b in rows],
                    [{"file": name, key_a: a, key_b: b} for a, b in rows],
                    type=kind,
                )
            )
