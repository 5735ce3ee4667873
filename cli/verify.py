"""``kafkalog verify``: check segments, indexes and checkpoints under any path, report every problem, keep going.

The per-segment and per-partition checks and their result types are the library's (``kafkalog.verify``:
``verify_segment`` -> ``SegmentReport``, ``verify_partition`` -> ``PartitionReport``; segments are found by
``kafkalog.discovery.discover_segments``), the same ones the Spark job runs, so ``kafkalog verify`` and
``kafkalog spark validate`` give the same verdict on the same files. This module adds what an operator expects from
a local tool on top: the checkpoint and metadata files of each partition and log dir are parsed too (a corrupt one
is corruption, not "absent"), a segment the library reports ``unreadable`` (an I/O error) exits 2, not 1, and
progress is shown on a terminal.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from kafkalog.remote import localized_paths

from .main import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, CliState, classify
from .output import Event, Line, Output, make_output
from .storage_opts import storage_option

if TYPE_CHECKING:  # pragma: no cover
    from kafkalog.discovery import SegmentItem
    from kafkalog.verify import SegmentReport

OFFSET_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)
_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


@dataclass
class Finding(Event):
    """One checked thing (segment, partition, file) with its status and problems."""

    kind: str  # segment | partition | file
    path: str
    status: str  # ok | warning | corrupt | error
    summary: str
    problems: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def type(self) -> str:  # type: ignore[override]
        return self.kind

    @property
    def is_data(self) -> bool:
        # --quiet keeps only what needs attention.
        return self.status != "ok"

    def text(self) -> str:
        label = {"ok": "ok", "warning": "WARNING", "corrupt": "CORRUPT", "error": "ERROR"}[self.status]
        line = f"{self.kind} {self.path}: {label}"
        if self.summary:
            line += f" ({self.summary})"
        return line + "".join(f"\n  {p}" for p in self.problems)

    def fields(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "problems": self.problems, **self.data}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, **self.fields()}


@dataclass
class Summary(Event):
    counts: dict[str, dict[str, int]]
    exit_code: int
    bytes_checked: int
    type = "summary"  # type: ignore[misc]

    def text(self) -> str:
        parts = []
        for kind in ("segment", "partition", "file"):
            c = self.counts.get(kind)
            if c:
                parts.append(f"{sum(c.values())} {kind}s (" + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + ")")
        verdict = {EXIT_OK: "OK", EXIT_CORRUPT: "CORRUPTION FOUND", EXIT_USAGE: "ERRORS"}[self.exit_code]
        return f"Summary: {verdict}: " + "; ".join(parts or ["nothing to check"]) + f"; {self.bytes_checked} bytes read"

    def fields(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == EXIT_OK,
            "exitCode": self.exit_code,
            "bytesChecked": self.bytes_checked,
            "counts": self.counts,
        }


@dataclass
class Verifier:
    out: Output
    counts: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    code: int = EXIT_OK
    bytes_checked: int = 0

    def report(self, finding: Finding) -> None:
        self.counts[finding.kind][finding.status] += 1
        self.code = max(
            self.code, {"ok": 0, "warning": 0, "corrupt": EXIT_CORRUPT, "error": EXIT_USAGE}[finding.status]
        )
        self.out.emit(finding)

    def error(self, kind: str, path: str, exc: BaseException) -> None:
        """An I/O or usage error: one line on stderr (as every command prints errors), and exit 2 at the end."""
        code, message = classify(exc)
        if code == EXIT_CORRUPT:
            self.report(Finding(kind, path, "corrupt", "", [message]))
            return
        self.counts[kind]["error"] += 1
        self.code = max(self.code, code)
        if self.out.is_json:
            self.out.emit(Line(message, kind="error", extra={"path": path, "exitCode": code}))
        click.echo(f"kafkalog: error: {message}", err=True)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--no-index-check", is_flag=True, help="Skip the strict .index/.timeindex/.txnindex checks.")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per segment/partition/file and a summary.")
@storage_option
@click.pass_obj
def verify(
    state: CliState | None, paths: tuple[str, ...], no_index_check: bool, json_mode: bool, storage_opts: dict
) -> None:
    """Verify segment files, partition dirs, log dirs or whole trees of them.

    Checks every batch CRC and offset, the strict sanity of every index against its log, the segments of each
    partition against each other and against the log dir's checkpoints, and parses every checkpoint, metadata
    and producer-snapshot file. Reports every corrupt range and keeps going. Exit 0 clean, 1 corruption found,
    2 usage or I/O error.
    """
    with localized_paths(paths, storage_opts) as local:  # a remote segment or partition: a scratch copy
        _verify(state, tuple(local), no_index_check, json_mode)


def _verify(state: CliState | None, paths: tuple[str, ...], no_index_check: bool, json_mode: bool) -> None:
    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    v = Verifier(out)
    items, partition_dirs, log_dirs, extra_files = _discover(paths, v)
    total = sum(max(i.size_bytes, 0) for i in items)
    reports_by_partition: dict[str, list[SegmentReport]] = defaultdict(list)
    with out.progress("verifying", total=total) as bar:
        for item in items:
            rep = _check_segment(item, not no_index_check, v)
            if rep is not None:
                reports_by_partition[item.partition_dir].append(rep)
            bar.advance(max(item.size_bytes, 0))
    for pdir in sorted(partition_dirs):
        _check_partition(pdir, reports_by_partition.get(pdir, []), v)
    for ldir in sorted(log_dirs):
        _check_log_dir(ldir, partition_dirs, v)
    for path in extra_files:
        _check_file(path, v)
    if items or partition_dirs or log_dirs or extra_files:
        out.emit(Summary({k: dict(c) for k, c in v.counts.items()}, v.code, v.bytes_checked))
    click.get_current_context().exit(v.code)


# --- discovery --------------------------------------------------------------------------------------------------


def _discover(paths: tuple[str, ...], v: Verifier) -> tuple[list[Any], set[str], set[str], list[str]]:
    """Segments, partition dirs, log dirs and loose metadata files under ``paths`` (each reported once)."""
    from kafkalog.discovery import discover_segments
    from kafkalog.errors import KafkaLogError

    items: list[Any] = []
    seen: set[str] = set()
    partition_dirs: set[str] = set()
    log_dirs: set[str] = set()
    extra_files: list[str] = []
    for raw in paths:
        if not os.path.lexists(raw):
            v.error("file", raw, FileNotFoundError(2, "No such file or directory", raw))
            continue
        path = os.path.realpath(raw)
        target = path
        if os.path.isfile(path):
            stem, suffix = os.path.splitext(path)
            if suffix in _INDEX_SUFFIXES or suffix == ".snapshot":
                target = stem + ".log"
                if not os.path.exists(target):
                    extra_files.append(path)
                    continue
            elif suffix != ".log":
                extra_files.append(path)
                continue
        try:
            found = discover_segments(target)
        except (KafkaLogError, OSError) as exc:
            v.error("file", raw, exc)
            continue
        for item in found:
            if item.path not in seen:
                seen.add(item.path)
                items.append(item)
            partition_dirs.add(item.partition_dir)
        if os.path.isdir(path):
            for dirpath, dirnames, filenames in os.walk(path):
                dirnames.sort()
                if _is_log_dir(dirpath, filenames):
                    log_dirs.add(dirpath)
                if "leader-epoch-checkpoint" in filenames or "partition.metadata" in filenames:
                    partition_dirs.add(dirpath)
        for pdir in {i.partition_dir for i in found}:
            parent = os.path.dirname(pdir)
            if os.path.isdir(path) and _is_log_dir(parent, _listdir(parent)) and parent.startswith(path):
                log_dirs.add(parent)
    items.sort(key=lambda s: (s.partition_dir, s.base_offset))
    return items, partition_dirs, log_dirs, extra_files


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _is_log_dir(path: str, names: list[str]) -> bool:
    return "meta.properties" in names or any(n in names for n in OFFSET_CHECKPOINTS)


# --- segments ---------------------------------------------------------------------------------------------------


def _check_segment(item: SegmentItem, index_check: bool, v: Verifier) -> SegmentReport | None:
    """Report one segment; the library's report, or None when its file could not be read (exit 2, not 1)."""
    from kafkalog.verify import verify_segment

    rep = verify_segment(item, index_check=index_check)
    if rep.exception is not None:
        # An I/O error (permission, EIO, a vanished file) is not damage: one error line, exit 2, and the segment is
        # left out of its partition's continuity check.
        v.error("segment", item.path, rep.exception)
        return None
    v.bytes_checked += rep.size_bytes
    problems = []
    for pos, size in rep.corrupt_ranges:
        problems.append(f"corrupt range: position {pos} size {size}")
    if rep.error:
        problems.append(rep.error)
    # "unreadable" without an OSError: a tiered segment stored transformed, which cannot be checked (exit 2).
    status = {"ok": "ok", "corrupt": "corrupt"}.get(rep.status, "error")
    if rep.index_status == "corrupt":
        status = "error" if status == "error" else "corrupt"
        problems.append(f"index: {rep.index_error}")
    elif rep.index_status in ("stale", "missing"):
        if status == "ok":
            status = "warning"
        problems.append(f"index {rep.index_status}: {rep.index_error}")
    offsets = "empty" if rep.first_offset is None else f"offsets {rep.first_offset}-{rep.last_offset}"
    summary = f"{rep.batch_count} batches, {rep.record_count} records, {offsets}, {rep.size_bytes} bytes"
    data = {
        "baseOffset": item.base_offset,
        "firstOffset": rep.first_offset,
        "lastOffset": rep.last_offset,
        "batchCount": rep.batch_count,
        "recordCount": rep.record_count,
        "size": rep.size_bytes,
        "validBytes": rep.valid_bytes,
        "invalidBytes": rep.invalid_bytes,
        "segmentStatus": rep.status,
        "indexStatus": rep.index_status,
        "indexError": rep.index_error,
        "corruptRanges": [{"position": p, "size": s} for p, s in rep.corrupt_ranges],
        "error": rep.error,
    }
    v.report(Finding("segment", item.path, status, summary, problems, data))
    return rep


# --- partitions and log dirs ------------------------------------------------------------------------------------


def _check_partition(pdir: str, segments: list[SegmentReport], v: Verifier) -> None:
    from kafkalog.errors import KafkaLogError
    from kafkalog.verify import verify_partition

    problems: list[str] = []
    status = "ok"
    data: dict[str, Any] = {"segmentCount": len(segments)}
    log_end: int | None = None
    if segments:
        p = verify_partition(segments)
        log_end = p.log_end_offset
        data.update(
            topic=p.topic,
            partition=p.partition,
            logStartOffset=p.log_start_offset,
            logEndOffset=p.log_end_offset,
            gaps=[{"from": a, "to": b} for a, b in p.gaps],
            overlaps=[{"segmentBaseOffset": a, "previousLastOffset": b} for a, b in p.overlaps],
            recoveryPoint=p.checkpoint_recovery_point,
            logStartOffsetCheckpoint=p.checkpoint_log_start_offset,
            highWatermark=p.checkpoint_high_watermark,
            continuity=p.status,
        )
        problems.extend(p.problems)
        # gaps are normal after compaction (reported, not an error); corrupt segments are reported on their own
        if p.status in ("overlap", "checkpoint_mismatch"):
            status = "corrupt"
    # Metadata files of the partition: a file that does not parse is corruption.
    epoch_path = os.path.join(pdir, "leader-epoch-checkpoint")
    if os.path.exists(epoch_path):
        from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint

        try:
            entries = read_leader_epoch_checkpoint(epoch_path)
            data["leaderEpochs"] = [{"epoch": e.epoch, "startOffset": e.start_offset} for e in entries]
            for a, b in zip(entries, entries[1:], strict=False):
                if b.epoch <= a.epoch or b.start_offset < a.start_offset:
                    status = "corrupt"
                    problems.append(f"leader-epoch-checkpoint: entry {b} does not follow {a}")
            if entries and log_end is not None and entries[-1].start_offset > log_end:
                status = "corrupt"
                problems.append(
                    f"leader-epoch-checkpoint: epoch {entries[-1].epoch} starts at {entries[-1].start_offset},"
                    f" beyond the log end offset {log_end}"
                )
        except (KafkaLogError, OSError) as exc:
            code, message = classify(exc)
            status = "corrupt" if code == EXIT_CORRUPT else "error"
            problems.append(f"leader-epoch-checkpoint: {message}")
    meta_path = os.path.join(pdir, "partition.metadata")
    if os.path.exists(meta_path):
        from kafkalog.checkpoint.partition_metadata import read_partition_metadata

        try:
            data["topicId"] = read_partition_metadata(meta_path)
        except (KafkaLogError, OSError) as exc:
            code, message = classify(exc)
            status = "corrupt" if code == EXIT_CORRUPT else "error"
            problems.append(f"partition.metadata: {message}")
    from kafkalog.log.producer_snapshot import read_producer_snapshot

    for name in sorted(_listdir(pdir)):
        if name.endswith(".snapshot"):
            try:
                read_producer_snapshot(os.path.join(pdir, name))
            except (KafkaLogError, OSError) as exc:
                code, message = classify(exc)
                # Kafka drops a bad snapshot and rebuilds producer state from the log: damage, but recoverable.
                status = "corrupt" if code == EXIT_CORRUPT else "error"
                problems.append(f"{name}: {message}")
    summary = ""
    if segments:
        summary = f"{len(segments)} segments, log start {data['logStartOffset']}, log end {data['logEndOffset']}"
    v.report(Finding("partition", pdir, status, summary, problems, data))


def _check_log_dir(ldir: str, partition_dirs: set[str], v: Verifier) -> None:
    from kafkalog.checkpoint.meta_properties import read_meta_properties
    from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
    from kafkalog.errors import KafkaLogError

    problems: list[str] = []
    status = "ok"
    data: dict[str, Any] = {}
    meta = os.path.join(ldir, "meta.properties")
    if os.path.exists(meta):
        try:
            m = read_meta_properties(meta)
            data.update(clusterId=m.cluster_id, nodeId=m.node_id, directoryId=m.directory_id)
        except (KafkaLogError, OSError) as exc:
            code, message = classify(exc)
            status = "corrupt" if code == EXIT_CORRUPT else "error"
            problems.append(f"meta.properties: {message}")
    present = {os.path.basename(p) for p in partition_dirs if os.path.dirname(p) == ldir}
    for name in OFFSET_CHECKPOINTS:
        path = os.path.join(ldir, name)
        if not os.path.exists(path):
            continue
        try:
            offsets = read_offset_checkpoint(path)
        except (KafkaLogError, OSError) as exc:
            code, message = classify(exc)
            status = "corrupt" if code == EXIT_CORRUPT else "error"
            problems.append(f"{name}: {message}")
            continue
        absent = sorted(f"{t}-{p}" for t, p in offsets if f"{t}-{p}" not in present)
        data[name] = {"entries": len(offsets), "partitionsNotInDir": absent}
    summary = f"{len(present)} partition dirs"
    v.report(Finding("logdir", ldir, status, summary, problems, data))


def _check_file(path: str, v: Verifier) -> None:
    """A loose checkpoint/metadata/snapshot file given on the command line: it must parse."""
    from .dump import file_kind

    kind, _ = file_kind(os.path.basename(path))
    try:
        if kind == "offset-checkpoint":
            from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint

            n = len(read_offset_checkpoint(path))
        elif kind == "leader-epoch-checkpoint":
            from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint

            n = len(read_leader_epoch_checkpoint(path))
        elif kind == "partition-metadata":
            from kafkalog.checkpoint.partition_metadata import read_partition_metadata

            read_partition_metadata(path)
            n = 1
        elif kind == "meta-properties":
            from kafkalog.checkpoint.meta_properties import read_meta_properties

            read_meta_properties(path)
            n = 1
        elif kind == "snapshot":
            from kafkalog.log.producer_snapshot import read_producer_snapshot

            n = len(read_producer_snapshot(path))
        else:
            v.report(Finding("file", path, "error", "", ["not a segment, checkpoint or metadata file"]))
            return
    except Exception as exc:  # noqa: BLE001 - classified centrally
        v.error("file", path, exc)
        return
    v.report(Finding("file", path, "ok", f"{kind}, {n} entries"))
