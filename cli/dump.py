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

import itertools
import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from kafkalog.archive.discovery import kafka_files, nothing_found
from kafkalog.errors import (
    CorruptIndexError,
    InvalidArgumentError,
    KafkaLogError,
)
from kafkalog.metadata.decode import scala_map_order
from kafkalog.metadata.kraft_snapshot import check_kraft_snapshot
from kafkalog.metadata.snapshot import parse_snapshot_name
from kafkalog.names import base_offset_prefix, file_kind
from kafkalog.records import read_batches

from .dump_events import (
    DECODERS,
    DEFAULT_MAX_MESSAGE_SIZE,
    BatchEvent,
    FileHeader,
    InvalidBytes,
    RecordEvent,
    Report,
    java_absolute_path,
)
from .dump_files import (
    dump_clean_shutdown,
    dump_leader_epochs,
    dump_meta_properties,
    dump_offset_checkpoint,
    dump_partition_metadata,
    dump_producer_snapshot,
)
from .dump_remote import dump_paths, walk_key
from .dump_state import DumpOptions, DumpState
from .errors import CliState, CommandError, report_error
from .output import Event, Progress, Simple, make_output
from .storage_opts import rsm_config_option, storage_option

if TYPE_CHECKING:
    from kafkalog.verify.index_match import LogBatches

# The index classes, the index checks and remote storage import numpy (or pyarrow): the functions that use them
# import them, so that ``kafkalog --help`` and the other commands do not load them (tests/project/test_layering.py).

# --- the command ------------------------------------------------------------------------------------------------


@click.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=str), metavar="FILE_OR_DIR...")
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
@click.option("--offsets-decoder", is_flag=True, help="Decode __consumer_offsets records (group coordinator).")
@click.option("--transaction-log-decoder", is_flag=True, help="Decode __transaction_state records.")
@click.option("--cluster-metadata-decoder", is_flag=True, help="Decode __cluster_metadata records (KRaft).")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per line instead of Kafka's text lines.")
@storage_option
@rsm_config_option
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
    offsets_decoder: bool,
    transaction_log_decoder: bool,
    cluster_metadata_decoder: bool,
    json_mode: bool,
    storage_opts: dict,
    rsm: Any,
) -> None:
    """Dump .log, .index, .timeindex, .txnindex, .snapshot, checkpoint and metadata files, like kafka-dump-log.sh.

    A DIR (partition dir, log dir, or a tree of them) stands for the Kafka files below it, in the order
    ``--files DIR/*`` would give them; other files there (.lock, notes) are passed over.

    Exit code 1 when anything dumped is corrupt (bad CRC, trailing bytes, index entries that do not match the
    log, a failed sanity check, an unreadable checkpoint).

    A segment stored by Aiven's tiered-storage plugin (its ``.log`` object beside an ``.rsm-manifest``) is dumped
    as the segment it stores, with the indexes out of its ``.indexes``; encrypted ones need ``--rsm-config``.
    """
    state = state or CliState()
    paths = list(files) + [p for opt in files_opt for p in opt.split(",") if p]
    if not paths:
        raise click.UsageError("give at least one FILE or DIR (or --files a,b,...)")
    # Kafka: a decoder implies --print-data-log, which implies --deep-iteration; the internal-topic decoders are
    # taken in Kafka's order of precedence.
    internal = next((name for name, on in (("offsets", offsets_decoder), ("transaction-log", transaction_log_decoder),
                                           ("cluster-metadata", cluster_metadata_decoder)) if on), None)
    print_data = print_data_log or key_decoder is not None or value_decoder is not None or internal is not None
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
        internal=internal,
    )
    st = DumpState(make_output(json_mode=json_mode, quiet=state.quiet), opts, debug=state.debug)
    # a URL's segments and an Aiven segment's .log are read as they are fetched (st.streamed), never copied
    with dump_paths(paths, storage_opts, rsm, st.streamed) as (local, shown):
        st.out.show_as(shown)
        files = _expand_dirs(local, st.streamed)
        with st.out.progress("dumping", total=len(files)) if len(files) > 1 else nullcontext(Progress()) as bar:
            _dump_all(files, st, bar)
    _print_findings(st)
    if files and st.ignored == len(files):  # nothing Kafka wrote was named: nothing dumped is not a pass
        st.code = max(st.code, report_error(CommandError(f"{', '.join(paths)}: no file Kafka writes (nothing dumped)"),
                                            out=st.out))
    if st.not_dumped and (st.out.is_json or len(files) > 1):  # one file: its error line says it all
        st.out.emit(NotDumped(len(files), st.not_dumped, st.code))
    click.get_current_context().exit(st.code)


@dataclass
class NotDumped(Event):
    """The closing line when files could not be dumped: how many of how many, and which (on stderr after several
    files, so Kafka's own output on stdout is unchanged; a ``summary`` object under --json)."""

    total: int
    paths: list[str]
    exit_code: int
    type = "summary"  # type: ignore[misc]
    is_problem = True  # type: ignore[misc]

    def text(self) -> str:
        return f"kafkalog: not dumped: {len(self.paths)} of {self.total} file(s): {', '.join(self.paths)}"

    def fields(self) -> dict[str, Any]:
        return {"files": self.total, "notDumped": self.paths, "exitCode": self.exit_code}


def _expand_dirs(paths: list[str], streamed: dict[str, Any]) -> list[str]:
    """Each local dir replaced by the Kafka files below it (a partition dir, a log dir, a tree of them), in the
    order ``--files dir/*`` takes them; the ``streamed`` names below it (a URL's segment objects, read where they
    lie) take their places among them. A dir holding none stays in the list, and so does a dir named like a Kafka
    file (``00000000000000000000.log/``): :func:`dump_file` reports either at its place in the order."""
    files: list[str] = []
    for path in paths:
        found: list[str] = []
        if _walkable(path):
            found = list(kafka_files(path))
            top = os.path.join(path, "")
            more = [n for n in streamed if n.startswith(top) and file_kind(os.path.basename(n))[0] != "unknown"]
            if more:
                found = sorted(set(found) | set(more), key=walk_key(path))
        files.extend(found or [path])
    return files


def _walkable(path: str) -> bool:
    return os.path.isdir(path) and file_kind(os.path.basename(os.path.normpath(path)))[0] == "unknown"


def _dump_all(paths: list[str], st: DumpState, bar: Progress) -> None:
    for path in paths:
        try:
            dump_file(path, st)
        except BrokenPipeError:
            raise
        except Exception as exc:  # noqa: BLE001 - keep going with the next file; same line/code as the group
            st.failed(exc, path)
            st.not_dumped.append(path)
        bar.advance()


def _base_offset(path: str, base_name: str) -> int:
    """The base offset in a segment file's name; an error naming the file when it is not one (not digits, beyond
    a long: Kafka's tool fails on it too)."""
    try:
        return base_offset_prefix(base_name)
    except InvalidArgumentError as exc:
        reason = str(exc).partition(": ")[2]
        raise InvalidArgumentError(f"{path}: {reason}") from None


def dump_file(path: str, st: DumpState) -> None:
    """Dump one file according to its name; raise for I/O errors (the caller reports them)."""
    name = os.path.basename(path)
    kind, base = file_kind(name)
    streamed = path in st.streamed  # read where it lies (a URL's object, an Aiven segment's .log)
    if not streamed and os.path.isdir(path):
        if _walkable(path):
            raise nothing_found(path)
        raise IsADirectoryError(21, "Is a directory", path)
    if not streamed:
        os.stat(path)  # a missing or unreadable path is an error with the OS's reason, whatever its name
    if kind == "unknown":
        st.emit(FileHeader(path, kind))
        st.problem(f"Ignoring unknown file {path}", "ignored", file=path)
        st.ignored += 1
        return
    handler: Callable[[str, str, DumpState], None] = _HANDLERS[kind]
    if kind in ("log", "kraft-snapshot"):
        # Opened before the header so a missing file is one error line, not a header and then an error.
        if not streamed:
            with open(path, "rb"):
                pass
        if kind == "log":
            st.emit(FileHeader(path, kind, _base_offset(path, base)))
        else:
            st.emit(FileHeader(path, kind, snapshot=parse_snapshot_name(base)))
    else:
        st.emit(FileHeader(path, kind))
    handler(path, base, st)


# --- .log -------------------------------------------------------------------------------------------------------


def _dump_log(path: str, base: str, st: DumpState) -> None:
    opts = st.opts
    last_offset: int | None = None  # Kafka: the first record sets it, so a compacted start is not a gap
    gaps: list[tuple[int, int]] = []
    # one pass: map without prefaulting (or stream the fetched bytes) and give pages back behind the cursor, so
    # memory stays flat
    source = st.streamed.get(path)
    if source is not None:
        from kafkalog.verify.stream_log import StreamedBatches

        reader: Any = StreamedBatches(source, end=opts.max_bytes)
    else:
        reader = read_batches(path, end=opts.max_bytes, populate=False)
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
                            batch, record, opts.skip_metadata, opts.print_data, opts.key_decoder, opts.value_decoder,
                            opts.internal,
                        )
                    )
            reader.release_before(batch.position)
        if reader.invalid_bytes > 0:
            # Kafka reports trailing bytes only when reading the whole file; under --max-bytes it stops where the
            # limit cuts a batch and says nothing. Bytes that do not form a batch even in the whole file are still
            # damage: a note and exit 1.
            if opts.max_bytes is None:
                st.corrupt()
                st.emit(InvalidBytes(os.path.basename(path), reader.valid_bytes, reader.invalid_bytes))
            elif not _cut_by_limit(path, reader.valid_bytes, opts.max_bytes, source):
                st.corrupt()
                st.out.note(f"Stopped before {reader.invalid_bytes} unreadable bytes at position {reader.valid_bytes}")
    finally:
        del reader
    if gaps:
        st.non_consecutive.setdefault(java_absolute_path(path), []).extend(gaps)


def _dump_kraft_snapshot(path: str, base: str, st: DumpState) -> None:
    """A KRaft snapshot: its batches as a segment's, then what breaks the raft layer's rules (exit 1)."""
    _dump_log(path, base, st)
    check = check_kraft_snapshot(path)
    for problem in check.problems:
        st.corrupt()
        st.problem(f"{path}: {problem}", "kraft_snapshot", file=path, error=problem)


def _cut_by_limit(path: str, position: int, limit: int, source: Any = None) -> bool:
    """Whether the bytes at ``position`` are a whole batch in the full file that ends past ``limit`` (so
    ``--max-bytes`` cut it, as Kafka's tool stops there), rather than bytes that are not a batch."""
    if source is not None:  # a streamed log: that one batch by ranged reads
        from kafkalog.verify.stream_log import RangedLog

        size, _ = source.open()
        batch = RangedLog(source, size).batch_at(position)
        return batch is not None and position + batch.size_in_bytes > limit
    reader = read_batches(path, position=position, populate=False)
    try:
        return any(batch.position + batch.size_in_bytes > limit for batch in itertools.islice(reader, 1))
    finally:
        del reader


# --- .index / .timeindex ----------------------------------------------------------------------------------------


def _sibling(path: str, base: str, suffix: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(path)), base.split(".")[0] + suffix)


def _open_log_for(path: str, base: str, st: DumpState,
                  timestamps_of: Any = None) -> tuple[Any, LogBatches, dict[int, int]] | None:  # fmt: skip
    """The segment's ``.log`` (mapped once, without prefaulting) and its batch columns, for checking index entries
    against it; the scan gives pages back behind it, so a large segment does not stay resident. A streamed
    ``.log`` is scanned in one pass over its fetched bytes, which also gives the largest record timestamp of the
    batches whose last offsets are ``timestamps_of`` (a time index's); the log is then read by ranges."""
    from kafkalog.verify.index_match import scan_log_batches

    log_path = _sibling(path, base, ".log")
    source = st.streamed.get(log_path)
    if source is not None:
        from kafkalog.verify.stream_log import scan_streamed_log

        try:
            batches, ranged, found = scan_streamed_log(source, timestamps_of)
        except OSError as exc:
            st.failed(exc, log_path)
            return None
        return ranged, batches, found
    if not os.path.lexists(log_path):
        st.out.note(f"{log_path} not found: entries of {path} are not checked against the log")
        return None
    if os.path.abspath(log_path) in st.unreadable:  # its error line is already out: the entries go unchecked
        return None
    try:
        if os.path.isdir(log_path):
            raise IsADirectoryError(21, "Is a directory", log_path)
        reader = read_batches(log_path, populate=False)  # owns the mapping; the view keeps it alive
    except OSError as exc:  # one error line for the .log, however many of its indexes need it
        st.failed(exc, log_path)
        return None
    return reader.buffer, scan_log_batches(reader.buffer, reader.release_before), {}


def _dump_index(path: str, base: str, st: DumpState) -> None:
    from kafkalog.index.offset_index import OffsetIndex
    from kafkalog.verify.index_match import live_entry_count, match_offset_index

    start = _base_offset(path, base)
    index = _open_index(OffsetIndex, path, start, st)
    try:
        entries = index.entries_array() if index.entry_count else None
        if entries is None or len(entries) == 0:
            st.emit(Simple(f"{path} is empty.", {"file": path, "entries": 0}, type="index_empty"))
            return
        if st.opts.sanity_only:
            _sanity(index, path, st, CorruptIndexError)
            return
        entries = entries[: live_entry_count(entries["offset"], start)]
        opened = _open_log_for(path, base, st)
        if opened is not None:
            log, batches, _ = opened
            match = match_offset_index(
                entries["offset"], entries["position"], log, batches, max_size=st.opts.max_message_size
            )
            if match.mismatches:
                st.corrupt()
                st.index_mismatches.setdefault(java_absolute_path(path), []).extend(match.mismatches)
        _print_entries(entries, "offset", "position", "index", st)
    finally:
        index.close()


def _print_entries(entries: Any, first: str, second: str, kind: str, st: DumpState) -> None:
    """Each index entry as Kafka prints it, ``<first>: A <second>: B`` (nothing with --verify-index-only)."""
    if st.opts.verify_only:
        return
    for a, b in zip(entries[first].tolist(), entries[second].tolist(), strict=True):
        st.emit(Simple(f"{first}: {a} {second}: {b}", {first: a, second: b}, type=kind))


def _sanity(index: Any, path: str, st: DumpState, error_type: type[Exception]) -> None:
    try:
        index.sanity_check()
    except error_type as exc:
        st.corrupt()
        st.problem(f"{path} failed sanity check: {exc}", "sanity_check", file=path, passed=False, error=str(exc))
        return
    st.emit(Simple(f"{path} passed sanity check.", {"file": path, "passed": True}, type="sanity_check"))


def _dump_time_index(path: str, base: str, st: DumpState) -> None:
    """Time index entries, checked against the log from one scan of it (Kafka re-scans the log per entry)."""
    from kafkalog.index.time_index import TimeIndex
    from kafkalog.verify.index_match import live_entry_count, match_time_index

    start = _base_offset(path, base)
    index = _open_index(TimeIndex, path, start, st)
    try:
        if st.opts.sanity_only:
            _sanity(index, path, st, CorruptIndexError)
            return
        entries = index.entries_array() if index.entry_count else []
        if len(entries) == 0:
            return
        entries = entries[: live_entry_count(entries["offset"], start)]
        opened = _open_log_for(path, base, st, entries["offset"])
        if opened is not None:
            log, batches, found = opened
            match = match_time_index(entries["timestamp"], entries["offset"], log, batches, found)
            key = java_absolute_path(path)
            for found, target in (
                (match.not_found, st.time_not_found),
                (match.mismatch, st.time_mismatch),
                (match.out_of_order, st.time_out_of_order),
            ):
                if found:
                    target.setdefault(key, []).extend(found)
            if match.not_found or match.mismatch or match.out_of_order:
                st.corrupt()
        _print_entries(entries, "timestamp", "offset", "timeindex", st)
    finally:
        index.close()


def _open_index(cls: Any, path: str, start: int, st: DumpState) -> Any:
    """The index file at ``path``, or a streamed index object's bytes fetched into memory."""
    source = st.streamed.get(path)
    if source is not None:
        return cls.from_bytes(path, start, source.data())
    return cls(path, start, writable=False)


# --- .txnindex / .snapshot --------------------------------------------------------------------------------------


def _dump_txn_index(path: str, base: str, st: DumpState) -> None:
    from kafkalog.index.txn_index import TransactionIndex

    index = _open_index(TransactionIndex, path, _base_offset(path, base), st)
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


_HANDLERS: dict[str, Callable[[str, str, DumpState], None]] = {
    "log": _dump_log,
    "kraft-snapshot": _dump_kraft_snapshot,
    "index": _dump_index,
    "timeindex": _dump_time_index,
    "txnindex": _dump_txn_index,
    "snapshot": dump_producer_snapshot,
    "offset-checkpoint": dump_offset_checkpoint,
    "leader-epoch-checkpoint": dump_leader_epochs,
    "partition-metadata": dump_partition_metadata,
    "meta-properties": dump_meta_properties,
    "clean-shutdown": dump_clean_shutdown,
}


# --- end-of-run findings (Kafka prints them after all files) ---------------------------------------------------


def _as_found(pairs: list) -> list:
    return list(pairs)  # Kafka appends these to an ArrayBuffer


def _newest_first(pairs: list) -> list:
    return pairs[::-1]  # Kafka prepends these to an immutable List and prints it as is


# What kafka-dump-log prints after the files, one report per file and kind, in Kafka's order:
# (DumpState attribute, title, line per pair, JSON keys of a pair, report type, order of the pairs). Files come in
# the order of Kafka's mutable.HashMap keyed by absolute path; the two maps of immutable Lists are put once per
# pair (each prepend), the time index's ArrayBuffers once per file (scala_map_order).
_PUT_PER_PAIR = ("index_mismatches", "non_consecutive")
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
        found = getattr(st, attr)
        puts = [name for name, pairs in found.items() for _ in (pairs if attr in _PUT_PER_PAIR else (None,))]
        for name in scala_map_order(puts):
            rows = order(found[name])
            st.out.emit(
                Report(
                    title.format(name=name),
                    [line.format(a, b) for a, b in rows],
                    [{"file": name, key_a: a, key_b: b} for a, b in rows],
                    type=kind,
                )
            )
