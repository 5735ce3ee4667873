"""``kafkalog recover``: run Kafka's log recovery offline on a partition dir or a whole log dir, and say what it cut.

Recovery itself is the library's ``Log.open`` (the ``LogLoader``: leftovers, swaps, orphan indexes, then every
segment from the recovery point re-read, indexes rebuilt, the log cut at the first invalid byte and later segments
deleted). This command adds what an operator needs around it:

* the log dir's ``.lock`` is taken first, so it refuses while a broker or a LogManager holds the dir;
* the before/after of every segment is compared, so the report names the segment, the cut position, the bytes
  and the offsets lost (offsets of readable batches past the cut; a torn batch has no readable offsets);
* ``--dry-run`` runs the same recovery on a private copy of the files recovery would touch (the segments from the
  recovery point on, segments with a missing offset index, and the small metadata files), so nothing under PATH
  changes, not even the ``.lock`` file when none exists;
* in a log dir, the ``recovery-point-offset-checkpoint`` and ``replication-offset-checkpoint`` entries of a
  truncated partition are clamped to its new log end offset (atomically, via the library), as the broker would
  do on its next checkpoint.

Exit code 1 when recovery truncated or deleted data (or would, with ``--dry-run``), 0 when nothing was lost.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import Any

import click

from .errors import EXIT_CORRUPT, EXIT_OK, CliState, CommandError
from .output import Event, make_output

_LOG_DIR_FILES = ("meta.properties", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                  "replication-offset-checkpoint", ".kafka_cleanshutdown")  # fmt: skip


@dataclass
class SegmentState:
    size: int
    last_offset: int | None  # last offset of the readable batches, None when none


@dataclass
class PartitionRecovery(Event):
    path: str
    dry_run: bool
    clean_shutdown: bool
    recovery_point: int
    log_start_offset: int | None
    log_end_before: int | None
    log_end_after: int | None = None
    truncations: list[dict[str, Any]] = field(default_factory=list)
    deleted: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, str]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    type = "partition"  # type: ignore[misc]

    @property
    def lost_data(self) -> bool:
        return bool(self.truncations or self.deleted)

    def text(self) -> str:
        would = "would " if self.dry_run else ""
        how = "clean shutdown: Kafka skips recovery" if self.clean_shutdown else "unclean shutdown"
        lines = [
            f"{'Dry run: ' if self.dry_run else ''}Recovering {self.path} ({how}, recovery point {self.recovery_point})"
        ]
        for t in self.truncations:
            lost = (
                f"offsets {t['firstOffsetLost']}-{t['lastOffsetLost']} lost"
                if t["lastOffsetLost"] is not None
                else "no readable offsets lost"
            )
            lines.append(f"  {would}truncate {t['segment']} at position {t['position']}: {t['bytes']} bytes, {lost}")
        for d in self.deleted:
            lost = f"offsets {d['firstOffset']}-{d['lastOffset']} lost" if d["lastOffset"] is not None else "empty"
            lines.append(f"  {would}delete {d['segment']}: {d['bytes']} bytes, {lost}")
        for a in self.actions:
            if a["action"] not in ("truncated", "deleted segment"):
                lines.append(f"  {would}{a['action']}: {a['file']}")
        for c in self.checkpoints:
            lines.append(f"  {would}set {c['file']} {c['partition']} {c['before']} -> {c['after']}")
        lines.append(f"  log end offset {self.log_end_before} -> {self.log_end_after}")
        if not self.lost_data:
            lines.append("  nothing lost")
        return "\n".join(lines)

    def fields(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "dryRun": self.dry_run,
            "cleanShutdown": self.clean_shutdown,
            "recoveryPoint": self.recovery_point,
            "logStartOffset": self.log_start_offset,
            "logEndOffsetBefore": self.log_end_before,
            "logEndOffsetAfter": self.log_end_after,
            "truncations": self.truncations,
            "deletedSegments": self.deleted,
            "actions": self.actions,
            "checkpoints": self.checkpoints,
            "lostData": self.lost_data,
        }


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--dry-run", is_flag=True, help="Show what recovery would do; change nothing on disk.")
@click.option("--full", is_flag=True, help="Recover every segment, as after a crash with recovery point 0.")
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Topic config used to rebuild indexes (e.g. index.interval.bytes=512); Kafka's defaults otherwise.",
)
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per partition and a summary.")
@click.pass_obj
def recover(
    state: CliState | None, path: str, dry_run: bool, full: bool, configs: tuple[str, ...], json_mode: bool
) -> None:
    """Run Kafka's log recovery offline on a partition dir or a whole log dir.

    Honours the log dir's .lock (refuses while a broker or LogManager holds it). Without --full, does exactly
    what the broker would do at its next start: nothing after a clean shutdown, else recovery from the
    checkpointed recovery point. Exit 1 when data was (or would be) truncated or deleted.
    """
    from kafkalog.log.config import LogConfig
    from kafkalog.names import parse_partition_dir

    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    if not os.path.isdir(path):
        raise CommandError(f"{path}: not a directory (give a partition dir or a log dir)")
    props = {}
    for item in configs:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--config")
        props[key] = value
    config = LogConfig.from_properties(props)
    path = os.path.abspath(path)
    if _is_partition_dir(path):
        log_dir, pdirs = os.path.dirname(path), [path]
    else:
        log_dir = path
        pdirs = []
        for name in sorted(os.listdir(path)):
            full_path = os.path.join(path, name)
            if not os.path.isdir(full_path):
                continue
            try:
                parsed = parse_partition_dir(name)
            except ValueError:
                continue
            if parsed.kind != "delete":
                pdirs.append(full_path)
        if not pdirs and not any(os.path.exists(os.path.join(path, n)) for n in _LOG_DIR_FILES):
            raise CommandError(f"{path}: neither a partition dir (<topic>-<partition>) nor a log dir")
    lock = _lock(log_dir, dry_run)
    code = EXIT_OK
    try:
        ckpts = _read_checkpoints(log_dir)
        clean = os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown")) and not full
        with out.progress("recovering", total=len(pdirs)) as bar:
            for pdir in pdirs:
                rec = _recover_partition(pdir, config, ckpts, clean=clean, full=full, dry_run=dry_run)
                if rec.truncations or rec.deleted:
                    code = EXIT_CORRUPT
                    rec.checkpoints = _clamp_checkpoints(log_dir, pdir, rec, ckpts, dry_run)
                out.emit(rec)
                bar.advance()
    finally:
        if lock is not None:
            lock.release()
    click.get_current_context().exit(code)


def _is_partition_dir(path: str) -> bool:
    from kafkalog.names import parse_partition_dir

    try:
        parse_partition_dir(os.path.basename(path))
    except ValueError:
        return False
    names = os.listdir(path)
    return not any(n in names for n in _LOG_DIR_FILES)


def _lock(log_dir: str, dry_run: bool) -> Any:
    """Take the log dir's lock (refusing while held); a dry run only probes an existing lock file."""
    from kafkalog.manager.lock import LOCK_FILE_NAME, DirLock

    if dry_run:
        if os.path.exists(os.path.join(log_dir, LOCK_FILE_NAME)):
            DirLock.acquire(log_dir).release()
        return None
    return DirLock.acquire(log_dir)


def _read_checkpoints(log_dir: str) -> dict[str, dict[tuple[str, int], int]]:
    """The log dir's offset checkpoints; an unreadable one counts as empty, as Kafka reads them at startup."""
    from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
    from kafkalog.errors import CorruptCheckpointError

    out: dict[str, dict[tuple[str, int], int]] = {}
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        try:
            out[name] = read_offset_checkpoint(os.path.join(log_dir, name))
        except (FileNotFoundError, CorruptCheckpointError):
            out[name] = {}
    return out


def _segments(pdir: str) -> dict[int, str]:
    from kafkalog.names import parse_segment_file_name

    found = {}
    for name in os.listdir(pdir):
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed.suffix == ".log" and not parsed.temp_suffix:
            found[parsed.offset] = name
    return dict(sorted(found.items()))


def _state(path: str) -> SegmentState:
    from kafkalog.verify import verify_log_file

    report = verify_log_file(path, include_batches=False)
    return SegmentState(report.file_size, report.last_offset)


def _recover_partition(
    pdir: str, config: Any, ckpts: dict[str, dict[tuple[str, int], int]], *, clean: bool, full: bool, dry_run: bool
) -> PartitionRecovery:
    from kafkalog.log.log import Log
    from kafkalog.names import parse_partition_dir

    parsed = parse_partition_dir(os.path.basename(pdir))
    key = (parsed.topic, parsed.partition)
    recovery_point = 0 if full else ckpts["recovery-point-offset-checkpoint"].get(key, 0)
    log_start = ckpts["log-start-offset-checkpoint"].get(key)
    segments = _segments(pdir)
    # The segments recovery may touch: from the one holding the recovery point on (all of them when unclean and
    # the point is 0), plus any whose offset index is missing (the loader rebuilds those wherever they are).
    bases = list(segments)
    first_touched = max([b for b in bases if b <= recovery_point] or [bases[0] if bases else 0])
    touched = [b for b in bases if (not clean and b >= first_touched) or not _has_index(pdir, segments[b])]
    before = {b: _state(os.path.join(pdir, segments[b])) for b in touched}
    last_before = max((s.last_offset for s in before.values() if s.last_offset is not None), default=None)
    rec = PartitionRecovery(
        pdir, dry_run, clean, recovery_point, log_start, None if last_before is None else last_before + 1
    )
    work_root = tempfile.mkdtemp(prefix="kafkalog-recover-") if dry_run else None
    try:
        work = pdir
        if work_root is not None:
            work = os.path.join(work_root, os.path.basename(pdir))
            _copy_for_dry_run(pdir, work, {segments[b] for b in touched})
        log = Log.open(work, config, recovery_point=recovery_point, log_start_offset=log_start, clean_shutdown=clean)
        try:
            rec.log_end_after = log.log_end_offset
            actions = list(log.load_actions)
        finally:
            log.close()
        after = _segments(work)
        for b in touched:
            name = segments[b]
            old = before[b]
            if b not in after:
                first = b
                rec.deleted.append(
                    {"segment": name, "bytes": old.size, "firstOffset": first if old.last_offset is not None else None,
                     "lastOffset": old.last_offset}
                )  # fmt: skip
                continue
            new_size = os.path.getsize(os.path.join(work, after[b]))
            if new_size < old.size:
                first_lost = rec.log_end_after
                lost_last = old.last_offset if old.last_offset is not None and old.last_offset >= first_lost else None
                rec.truncations.append(
                    {"segment": name, "position": new_size, "bytes": old.size - new_size,
                     "firstOffsetLost": first_lost if lost_last is not None else None, "lastOffsetLost": lost_last}
                )  # fmt: skip
        rec.actions = [{"action": a, "file": f} for a, f in actions]
    finally:
        if work_root is not None:
            shutil.rmtree(work_root, ignore_errors=True)
    if rec.log_end_before is None:
        rec.log_end_before = rec.log_end_after if not rec.lost_data else rec.log_end_before
    return rec


def _has_index(pdir: str, log_name: str) -> bool:
    return os.path.exists(os.path.join(pdir, log_name[: -len(".log")] + ".index"))


def _copy_for_dry_run(src: str, dst: str, segment_logs: set[str]) -> None:
    """Copy what recovery reads or changes: the touched segments with their indexes, and every small file."""
    from kafkalog.names import parse_segment_file_name

    os.makedirs(dst)
    stems = {n[: -len(".log")] for n in segment_logs}
    for name in os.listdir(src):
        source = os.path.join(src, name)
        if not os.path.isfile(source):
            continue
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            if name.split(".")[0] not in stems and not parsed.temp_suffix:
                continue
        shutil.copy2(source, os.path.join(dst, name))


def _clamp_checkpoints(
    log_dir: str, pdir: str, rec: PartitionRecovery, ckpts: dict[str, dict[tuple[str, int], int]], dry_run: bool
) -> list[dict[str, Any]]:
    """Clamp checkpointed offsets past the new log end (what the broker's next checkpoint would write)."""
    from kafkalog.checkpoint.offset_checkpoint import write_offset_checkpoint
    from kafkalog.names import parse_partition_dir

    parsed = parse_partition_dir(os.path.basename(pdir))
    key = (parsed.topic, parsed.partition)
    changes = []
    leo = rec.log_end_after
    if leo is None:
        return changes
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        offsets = ckpts.get(name, {})
        old = offsets.get(key)
        if old is None or old <= leo:
            continue
        changes.append({"file": name, "partition": f"{key[0]}-{key[1]}", "before": old, "after": leo})
        if not dry_run:
            offsets[key] = leo
            write_offset_checkpoint(os.path.join(log_dir, name), offsets, sort=False)
    return changes
