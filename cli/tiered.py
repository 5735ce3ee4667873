"""``kafkalog tiered``: tiered-storage buckets (KIP-405) checked against the broker's ``__remote_log_metadata``.

``audit`` is read-only: it lists the bucket once, replays the metadata and prints one line per topic-partition
(the rules are :mod:`kafkalog.verify.tiered_audit`'s). Exit 0: every partition checked and sound; 1: anything
wrong; 2: the bucket or the metadata could not be read, or held nothing to check.
"""

from __future__ import annotations

import json
import os

import click

from kafkalog.errors import NothingToCheckError
from kafkalog.metadata.remote_log import read_remote_log_metadata

from .errors import EXIT_OK, CommandError
from .locking import log_dir_writer
from .output import make_output
from .storage_opts import rsm_config_option, storage_option


@click.group("tiered")
def tiered() -> None:
    """Tiered-storage buckets (KIP-405): audit against __remote_log_metadata."""


@tiered.command("audit")
@click.argument("bucket", type=str)
@click.option("--remote-log-metadata", "metadata_dirs", multiple=True, required=True,
              type=click.Path(file_okay=False, path_type=str),
              help="A __remote_log_metadata-N partition dir, or a log dir holding them (repeatable).")
@click.option("--log-dir", "log_dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="The broker's log dir: remote offsets are also checked against each local log start offset.")
@rsm_config_option
@storage_option
@click.option("--json", "json_mode", is_flag=True, help="One JSON document: every partition and its problems.")
def audit(bucket: str, metadata_dirs: tuple[str, ...], log_dir: str | None, rsm: object,
          storage_opts: dict[str, str], json_mode: bool) -> None:
    """Check BUCKET (a dir or a URL) against the replayed __remote_log_metadata: missing or short objects,
    orphans, unfinished copies and deletes, offset gaps and overlaps, leader-epoch lineage. Read-only.
    (--rsm-config is accepted for symmetry with the other commands: the audit reads only manifests and sizes,
    which Aiven never encrypts.)"""
    from kafkalog.verify.tiered_audit import audit_bucket

    make_output(json_mode=json_mode)  # renders this command's errors as JSON under --json
    for d in (*metadata_dirs, *([log_dir] if log_dir else [])):
        if not os.path.isdir(d):
            raise CommandError(f"{d}: not a directory", path=d)
    report = audit_bucket(bucket, metadata_dirs, log_dir=log_dir, options=storage_opts)
    if not report.findings:
        raise NothingToCheckError("no remote segment objects and no remote log metadata: nothing checked",
                                  path=bucket)
    if json_mode:
        click.echo(json.dumps({"bucket": bucket, **report.to_dict(), "exit_code": report.exit_code}))
    else:
        for f in report.findings:
            click.echo(f"{f.path}: {f.status}: {f.summary}")
            for p in f.problems:
                click.echo(f"  {p}")
        click.echo(f"{len(report.findings)} partition(s), {report.objects} object(s) ({report.object_bytes} bytes), "
                   f"{report.metadata_records} metadata record(s); orphaned: {report.orphan_bytes} bytes")
    click.get_current_context().exit(report.exit_code or EXIT_OK)


@tiered.command("restore")
@click.argument("bucket", type=str)
@click.option("--to", "to", required=True, type=click.Path(file_okay=False, path_type=str),
              help="The log dir the partition dirs are written into (created if missing; existing partition dirs "
                   "are never touched).")
@click.option("--partition", "partitions", multiple=True, metavar="TOPIC-N", help="Restore only these (repeatable).")
@click.option("--remote-log-metadata", "metadata_dirs", multiple=True,
              type=click.Path(file_okay=False, path_type=str),
              help="__remote_log_metadata-N dirs (or a log dir holding them): restore exactly the segments a broker "
                   "would read (COPY_SEGMENT_FINISHED), and know the last one's end offset.")
@click.option("--topic-id", "topic_id", default=None, help="Write this topic id to partition.metadata (default: "
              "the bucket's).")
@rsm_config_option
@storage_option
@click.option("--dry-run", is_flag=True, help="Say what would be written; write nothing.")
@click.option("--json", "json_mode", is_flag=True, help="One JSON document: every partition restored.")
def restore(bucket: str, to: str, partitions: tuple[str, ...], metadata_dirs: tuple[str, ...], topic_id: str | None,
            rsm: object, storage_opts: dict[str, str], dry_run: bool, json_mode: bool) -> None:
    """Rebuild partition dirs under --to from BUCKET's remote segments at their original offsets (logs, indexes,
    producer snapshots, leader-epoch checkpoint, partition.metadata), which Kafka's loader opens as they were.
    Refuses a log dir a broker holds."""
    from kafkalog.log.restore import plan_restore
    from kafkalog.log.restore import restore as write_restore

    make_output(json_mode=json_mode)
    segments = None
    if metadata_dirs:
        meta = read_remote_log_metadata(metadata_dirs)
        segments = {s.segment_id: (s.start_offset, s.end_offset) for p in meta.partitions.values() for s in p.live()}
    plan = plan_restore(bucket, to, partitions=partitions, segments=segments, topic_id=topic_id,
                        options=storage_opts)
    if not dry_run:
        os.makedirs(to, exist_ok=True)
    if os.path.isdir(to):
        with log_dir_writer(to, dry_run=dry_run):
            if not dry_run:
                write_restore(plan, rsm=rsm, options=storage_opts)
    if json_mode:
        click.echo(json.dumps(plan.to_dict()))
    else:
        verb = "would restore" if dry_run else "restored"
        for p in plan.partitions:
            end = "?" if p.log_end_offset is None else p.log_end_offset - 1
            click.echo(f"{p.topic}-{p.partition}: {verb} {len(p.segments)} segment(s), offsets "
                       f"{p.log_start_offset}-{end} ({p.bytes} bytes of objects) -> {p.target}")
    click.get_current_context().exit(EXIT_OK)
