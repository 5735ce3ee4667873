"""``kafkalog checkpoints show|set``: read, and carefully edit, a log dir's offset checkpoint files.

Edits go through the library's ``write_offset_checkpoint`` (tmp file, fsync, rename, fsync of the dir), keep the
entries' order, and take the log dir's ``.lock`` first (``locking.log_dir_writer``): a running broker or LogManager
would overwrite the edit at its next checkpoint, so editing under it is refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import click

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint, write_offset_checkpoint
from kafkalog.names import file_kind, partition_dir_name, validate_topic

from .errors import EXIT_CORRUPT, CliState, CommandError
from .locking import log_dir_writer
from .output import Event, Line, Simple, make_output

_OFFSET_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)


@dataclass
class Change(Event):
    file: str
    topic: str
    partition: int
    before: int | None
    after: int
    type = "checkpoint_set"  # type: ignore[misc]

    def text(self) -> str:
        was = "absent" if self.before is None else str(self.before)
        return f"{self.file}: {self.topic}-{self.partition} {was} -> {self.after}"

    def fields(self) -> dict[str, Any]:
        return {"file": self.file, "topic": self.topic, "partition": self.partition, "before": self.before,
                "after": self.after}  # fmt: skip


@click.group()
def checkpoints() -> None:
    """Show or edit offset checkpoint files (recovery-point, log-start-offset, replication, cleaner)."""


@checkpoints.command("show")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per entry.")
@click.pass_obj
def show(state: CliState | None, file: str, json_mode: bool) -> None:
    """Print the entries of an offset checkpoint (or a leader-epoch-checkpoint)."""
    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    kind, _ = file_kind(os.path.basename(file))
    if kind in _READ_BY_DUMP:  # a healthy file of another kind is not a "corrupt checkpoint"
        raise CommandError(f"{file}: {_READ_BY_DUMP[kind]}, not an offset or leader-epoch checkpoint: read it with "
                           f"`kafkalog dump {file}`", path=file)
    if os.path.basename(file) == "leader-epoch-checkpoint":
        for e in read_leader_epoch_checkpoint(file):
            data = {"epoch": e.epoch, "startOffset": e.start_offset}
            out.emit(Simple(f"epoch: {e.epoch} startOffset: {e.start_offset}", data, type="leader_epoch"))
        return

    negative = []
    for (topic, partition), offset in read_offset_checkpoint(file).items():
        data = {"topic": topic, "partition": partition, "offset": offset}
        out.emit(Simple(f"topic: {topic} partition: {partition} offset: {offset}", data, type="checkpoint"))
        if offset < 0:
            negative.append(f"{topic}-{partition}")
    if negative:  # Kafka never writes one: the file is damaged (a load takes it as is)
        out.emit(Line(f"kafkalog: error: {file}: negative offset for {', '.join(negative)} (Kafka never writes one)",
                      kind="problem", extra={"path": file, "partitions": negative}, problem=True))
        click.get_current_context().exit(EXIT_CORRUPT)


@checkpoints.command("set")
@click.argument("file", type=click.Path(path_type=str))
@click.argument("topic")
@click.argument("partition", type=click.IntRange(min=0, max=2**31 - 1))
@click.argument("offset", type=click.IntRange(min=0, max=2**63 - 1))
@click.option("--create", is_flag=True, help="Create the checkpoint file if it does not exist.")
@click.option("--force", is_flag=True, help="Set a recovery point beyond the partition's log end offset anyway.")
@click.option("--json", "json_mode", is_flag=True, help="Print the change as JSON.")
@click.pass_obj
def set_(
    state: CliState | None, file: str, topic: str, partition: int, offset: int, create: bool, force: bool,
    json_mode: bool,
) -> None:
    """Set TOPIC PARTITION to OFFSET in an offset checkpoint FILE (atomic replace; refuses while the dir is locked)."""

    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    name = os.path.basename(file)
    if name not in _OFFSET_CHECKPOINTS:
        raise CommandError(f"{file}: not an offset checkpoint file (expected one of {', '.join(_OFFSET_CHECKPOINTS)})",
                           path=file)
    validate_topic(topic)
    log_dir = os.path.dirname(os.path.abspath(file))
    if not os.path.isdir(log_dir):
        raise FileNotFoundError(2, "No such file or directory", log_dir)
    if not os.path.exists(file) and not create:
        raise FileNotFoundError(2, "No such file or directory (use --create to start one)", file)
    with log_dir_writer(log_dir):
        if name == "recovery-point-offset-checkpoint" and not force:
            _refuse_beyond_log_end(log_dir, topic, partition, offset)
        offsets = read_offset_checkpoint(file) if os.path.exists(file) else {}
        before = offsets.get((topic, partition))
        offsets[(topic, partition)] = offset
        write_offset_checkpoint(file, offsets, sort=False)
    out.emit(Change(name, topic, partition, before, offset))


#: kinds of files ``checkpoints show`` does not read, and what each is
_READ_BY_DUMP = {"partition-metadata": "a partition.metadata file", "snapshot": "a producer snapshot",
                 "meta-properties": "a meta.properties file", "log": "a segment", "index": "an offset index",
                 "timeindex": "a time index", "txnindex": "a transaction index",
                 "kraft-snapshot": "a KRaft metadata snapshot", "clean-shutdown": "a clean-shutdown marker"}


def _refuse_beyond_log_end(log_dir: str, topic: str, partition: int, offset: int) -> None:
    """A recovery point beyond the log end tells a later unclean start that unflushed data was flushed: recovery
    would skip it. Refused (without ``--force``) when the partition dir is in ``log_dir``."""
    from kafkalog.verify import verify_log_file

    pdir = os.path.join(log_dir, partition_dir_name(topic, partition))
    if not os.path.isdir(pdir):
        return
    logs = sorted(n for n in os.listdir(pdir) if n.endswith(".log") and n[:20].isdigit())
    if not logs:
        return
    report = verify_log_file(os.path.join(pdir, logs[-1]), include_batches=False)
    end = report.last_offset + 1 if report.last_offset is not None else int(logs[-1][:20])
    if offset > end:
        raise CommandError(f"{pdir}: recovery point {offset} is beyond the log end offset {end}: a later unclean "
                           "start would skip recovering the data below it (--force sets it anyway)", path=pdir)
