"""``kafkalog clean``: one pass of Kafka's log cleaner over a stopped broker's partition dir or log dir.

The cleaning is the library's (``kafkalog.cleaner``: Kafka 4.0's ``Cleaner``, byte for byte); this command adds:

* the log dir's ``.lock`` is taken first: it refuses while a broker or a LogManager holds the dir;
* ``--config`` takes topic keys (``cleanup.policy`` defaults to ``compact``; ``min.cleanable.dirty.ratio``,
  ``delete.retention.ms``, ``segment.bytes``, ...) and the broker's ``log.cleaner.*`` keys (one cleaner thread's
  share of ``log.cleaner.dedupe.buffer.size`` sizes the offset map, as on a broker);
* on a log dir it cleans the partitions the broker's cleaner knew as compacted (those in the dir's
  ``cleaner-offset-checkpoint``) and Kafka's internal compacted topics; ``--all-partitions`` takes every partition
  dir (the topic configs are not in the log dir: the same ``--config`` applies to all);
* the first dirty offset comes from the log dir's ``cleaner-offset-checkpoint`` and a pass advances it there
  (atomically); after a clean shutdown the log is opened as Kafka does, otherwise it is recovered first from the
  checkpointed recovery point, unless that recovery would cut data: then the partition is refused (exit 1) and
  ``kafkalog recover`` is the command to run;
* each round is a cleaner thread's: the pass when the log is dirty enough, then, cleaned or not, Kafka's
  ``deleteOldSegments`` (segments wholly below the log start offset; time and size retention for
  ``compact,delete``);
* every batch a pass reads has its CRC checked: a failing one refuses the partition before anything is
  rewritten (exit 1, ``kafkalog recover --salvage`` is the way on);
* a failed, refused or interrupted run leaves a dir Kafka loads correctly (``clean_safety``): the clean-shutdown
  marker is away while logs are open, a refused partition is put back as it was, Ctrl-C stops the pass at its next
  chunk and exits 130;
* it says what it removed (records, bytes, segments) or, with ``--dry-run``, would remove: the round then runs on
  a scratch copy of each partition dir (temporary space of its size), so the dir, its lock file and the
  checkpoint are left exactly as they were.

Exit 0 when every partition was examined (cleaned or not dirty enough), 1 when a partition holds corrupt data, 2
on a usage or I/O error or a partition the cleaner could not clean, 130 after Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import click

from kafkalog.checkpoint.offset_checkpoint import read_log_dir_checkpoints
from kafkalog.cleaner.checkpoint import read_cleaner_checkpoint, update_cleaner_checkpoint
from kafkalog.cleaner.config import CLEANER_KEYS, CleanerConfig
from kafkalog.cleaner.dirty_range import INTERNAL_COMPACTED_TOPICS
from kafkalog.errors import KafkaLogError, LogCleaningAbortedError
from kafkalog.limits import wall_clock_ms
from kafkalog.log.config import LogConfig
from kafkalog.names import parse_partition_dir

from .clean_safety import EXIT_INTERRUPTED, MarkerHold, PartitionSnapshot, interruptible
from .errors import EXIT_CORRUPT, EXIT_OK, CliState, CommandError, classify, report_error
from .locking import log_dir_writer
from .output import Event, make_output
from .targets import parse_config_items, resolve_partition_dirs


@dataclass
class PartitionClean(Event):
    path: str
    partition: str
    report: dict[str, Any]
    type = "partition"  # type: ignore[misc]

    def text(self) -> str:
        r = self.report
        ratio = "n/a" if r["cleanableRatio"] is None else f"{r['cleanableRatio']:.2f}"
        head = f"{self.partition}: dirty offsets {r['firstDirtyOffset']}-{r['firstUncleanableOffset'] - 1}" \
            if r["firstUncleanableOffset"] > r["firstDirtyOffset"] else f"{self.partition}: nothing dirty"
        deleted = r["retentionSegmentsDeleted"]
        gone = (f"; {'would delete' if r['dryRun'] else 'deleted'} {deleted} segments (log start offset, "
                "retention)") if deleted else ""
        if not r["cleaned"]:
            return f"{head} (dirty ratio {ratio}): not cleaned, below min.cleanable.dirty.ratio{gone}"
        verb = "would remove" if r["dryRun"] else "removed"
        done = "would clean" if r["dryRun"] else "cleaned"
        return (f"{head} (dirty ratio {ratio}): {done} up to offset {r['endOffset']}, {verb} "
                f"{r['recordsRemoved']} records, {r['bytesRemoved']} bytes, {r['segmentsRemoved']} segments"
                + ("" if r["dryRun"] else f"; first dirty offset now {r['checkpointAfter']}") + gone)

    def fields(self) -> dict[str, Any]:
        return {"path": self.path, "partition": self.partition, **self.report}


@dataclass
class CleanSummary(Event):
    partitions: int
    cleaned: int
    records: int
    bytes: int
    segments: int
    skipped: int
    dry_run: bool
    deleted: int = 0
    type = "summary"  # type: ignore[misc]

    def text(self) -> str:
        verb = "would remove" if self.dry_run else "removed"
        skipped = f"; {self.skipped} partition dirs not known as compacted (--all-partitions)" if self.skipped else ""
        deleted = (f"; {'would delete' if self.dry_run else 'deleted'} {self.deleted} segments (log start offset, "
                   "retention)") if self.deleted else ""
        return (f"{self.partitions} partitions, {self.cleaned} {'to clean' if self.dry_run else 'cleaned'}: {verb} "
                f"{self.records} records, {self.bytes} bytes, {self.segments} segments{deleted}{skipped}")

    def fields(self) -> dict[str, Any]:
        return {"partitions": self.partitions, "cleaned": self.cleaned, "recordsRemoved": self.records,
                "bytesRemoved": self.bytes, "segmentsRemoved": self.segments, "skipped": self.skipped,
                "retentionSegmentsDeleted": self.deleted, "dryRun": self.dry_run}


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--dry-run", is_flag=True, help="Say what a pass would remove; change nothing.")
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE",
              help="A topic key (cleanup.policy defaults to compact) or a broker log.cleaner.* key.")
@click.option("--now-ms", type=int, default=None, help="The cleaner's clock (default: now); delete horizons use it.")
@click.option("--all-partitions", is_flag=True, help="On a log dir, every partition dir, not only compacted ones.")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per partition and a summary.")
@click.pass_obj
def clean(state: CliState | None, path: str, dry_run: bool, configs: tuple[str, ...], now_ms: int | None,
          all_partitions: bool, json_mode: bool) -> None:
    """Compact a stopped broker's partition dir or log dir with Kafka's log cleaner (one round: the pass, then
    the segments below the log start offset and, for compact,delete, past retention are deleted).

    Refuses while the log dir is locked, and a partition holding a batch that fails its CRC. The first dirty offset
    comes from the log dir's cleaner-offset-checkpoint, which the pass advances. Ctrl-C stops cleanly (exit 130).
    """
    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    props = parse_config_items(configs)
    broker = {k: v for k, v in props.items() if k in CLEANER_KEYS}
    topic = {"cleanup.policy": "compact", **{k: v for k, v in props.items() if k not in CLEANER_KEYS}}
    config = LogConfig.from_properties(topic)
    if not config.compact:
        raise click.BadParameter(f"cleanup.policy={topic['cleanup.policy']} does not compact", param_hint="--config")
    from kafkalog.cleaner.cleaner import Cleaner  # loads the segment layer (numpy): only when cleaning

    try:
        cleaner = Cleaner(CleanerConfig.from_properties(broker))  # one thread's offset map, reused per partition
    except KafkaLogError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from None
    now = wall_clock_ms() if now_ms is None else now_ms
    log_dir, pdirs = resolve_partition_dirs(path, verb="clean")
    code = EXIT_OK
    with log_dir_writer(log_dir, dry_run=dry_run), interruptible() as interrupt:
        cleaner.set_check_done(interrupt.check)
        checkpoint = read_cleaner_checkpoint(log_dir)
        single = len(pdirs) == 1 and os.path.abspath(path) == pdirs[0]
        chosen = pdirs if single or all_partitions else [p for p in pdirs if _known_compacted(p, checkpoint)]
        if not chosen:
            raise CommandError(f"{log_dir}: no compacted partition dirs (none in its cleaner-offset-checkpoint; "
                               "--all-partitions cleans every one)" if pdirs else f"{log_dir}: no partition dirs")
        totals = CleanSummary(len(chosen), 0, 0, 0, 0, len(pdirs) - len(chosen), dry_run)
        ckpts = read_log_dir_checkpoints(log_dir)
        hold = MarkerHold(log_dir)
        if dry_run:
            marker = os.path.exists(hold.path)
        else:
            hold.release()  # as Kafka's load: a crash while logs are open must count as an unclean shutdown
            marker = hold.present
        present = {_key(p) for p in pdirs}
        unclean: list[str] = []  # partitions whose log could not be closed cleanly
        with out.progress("cleaning", total=len(chosen)) as bar:
            for pdir in chosen:
                if interrupt.seen:
                    break
                try:
                    event = _clean_one(pdir, config, cleaner, now, checkpoint, ckpts, marker, dry_run, unclean)
                except LogCleaningAbortedError:
                    break  # Ctrl-C: the log was closed cleanly
                except Exception as exc:  # noqa: BLE001 - one partition's failure, reported, the others go on
                    code = max(code, report_error(_naming(exc, pdir), debug=state.debug, out=out, path=pdir))
                    bar.advance()
                    continue
                r = event.report
                after = r["checkpointAfter"]
                if after is not None and not dry_run:
                    checkpoint = update_cleaner_checkpoint(log_dir, {_key(pdir): after}, keep=present)
                totals.deleted += r["retentionSegmentsDeleted"]
                if r["cleaned"]:
                    totals.cleaned += 1
                    totals.records += r["recordsRemoved"]
                    totals.bytes += r["bytesRemoved"]
                    totals.segments += r["segmentsRemoved"]
                out.emit(event)
                bar.advance()
        if not unclean:
            hold.restore()  # every log opened was closed cleanly
        out.emit(totals)
    if interrupt.seen:
        report_error(CommandError("interrupted (SIGINT): the pass in progress stopped, the partitions before it "
                                  "are done; the log dir was closed cleanly", EXIT_INTERRUPTED, path=log_dir),
                     debug=False, out=out, path=log_dir)
        code = EXIT_INTERRUPTED
    click.get_current_context().exit(code)


def _naming(exc: Exception, pdir: str) -> Exception:
    """``exc`` as an error line that names the partition dir it happened in."""
    code, message = classify(exc)
    if pdir in message:
        return exc
    named = CommandError(f"{pdir}: {message}", code, path=pdir)
    named.__cause__ = exc
    return named


def _key(pdir: str) -> tuple[str, int]:
    parsed = parse_partition_dir(os.path.basename(pdir))
    return parsed.topic, parsed.partition


def _known_compacted(pdir: str, checkpoint: dict[tuple[str, int], int]) -> bool:
    parsed = parse_partition_dir(os.path.basename(pdir))
    if parsed.kind:
        return False  # a future or stray replica: its log is the current one's business
    return (parsed.topic, parsed.partition) in checkpoint or parsed.topic in INTERNAL_COMPACTED_TOPICS


def _clean_one(pdir: str, config: LogConfig, cleaner: Any, now: int,
               checkpoint: dict[tuple[str, int], int], ckpts: dict[str, dict[tuple[str, int], int]], marker: bool,
               dry_run: bool, unclean: list[str]) -> PartitionClean:
    """One round over ``pdir``; a dry run makes it on a scratch copy (opening a log may recover it and resizes
    its active segment's indexes: the original must not change), so its answer is the real run's."""
    key = _key(pdir)
    if not dry_run:
        report = _pass(pdir, key, config, cleaner, now, checkpoint, ckpts, marker, unclean)
    else:
        with tempfile.TemporaryDirectory(prefix="kafkalog-clean-") as scratch:
            copy = os.path.join(scratch, os.path.basename(pdir))
            shutil.copytree(pdir, copy)  # copy2: mtimes kept (legacy delete horizons and cleaned mtimes use them)
            report = _pass(copy, key, config, cleaner, now, checkpoint, ckpts, marker, unclean, scratch=True)
            report.dry_run = True
    doc = report.to_json()
    for name in ("recordsRemoved", "bytesRemoved", "segmentsRemoved", "endOffset"):
        doc.setdefault(name, None if name == "endOffset" else 0)
    return PartitionClean(pdir, f"{key[0]}-{key[1]}", doc)


def _pass(pdir: str, key: tuple[str, int], config: LogConfig, cleaner: Any, now: int,
          checkpoint: dict[tuple[str, int], int], ckpts: dict[str, dict[tuple[str, int], int]], marker: bool,
          unclean: list[str], *, scratch: bool = False) -> Any:
    """Open, one round, close. A partition refused before anything was swapped in is put back as it was (after a
    clean shutdown the open rewrote only the active segment's files); after a swap, or after an unclean shutdown
    (the open was Kafka's recovery), it is closed cleanly, as Kafka closes a log whose pass failed."""
    from kafkalog.cleaner.run import clean_partition
    from kafkalog.log.log import Log
    from kafkalog.log.recovery_plan import plan_recovery

    recovery_point = ckpts["recovery-point-offset-checkpoint"].get(key, 0)
    log_start = ckpts["log-start-offset-checkpoint"].get(key, 0)
    if not marker:
        # after a crash the load recovers first; cleaning must not be what cuts data: that is `recover`'s to say
        plan = plan_recovery(pdir, config, clean_shutdown=False, recovery_point=recovery_point,
                             log_start_offset=log_start)
        if plan.loses_data:
            raise CommandError(f"{pdir}: recovery after the unclean shutdown would cut data (offsets "
                               f"{plan.log_end_after}-{(plan.log_end_before or 1) - 1}); run `kafkalog recover` first",
                               EXIT_CORRUPT, path=pdir)
    snapshot = PartitionSnapshot.take(pdir) if marker and not scratch else None
    swapped: list[str] = []
    try:
        log = Log.open(pdir, config, clean_shutdown=marker, clock=lambda: now, recovery_point=recovery_point,
                       log_start_offset=log_start)
    except BaseException:
        if snapshot is not None and snapshot.restorable():
            snapshot.restore()
        elif marker and not scratch:
            unclean.append(pdir)  # an open that failed half way: no marker, Kafka's next load recovers
        raise
    try:
        report = clean_partition(log, checkpointed=checkpoint.get(key), now_ms=now, cleaner=cleaner,
                                 step=swapped.append)
    except BaseException as exc:
        if (snapshot is not None and not swapped and not isinstance(exc, LogCleaningAbortedError)
                and snapshot.restorable()):
            log.close_handlers()
            snapshot.restore()
        else:
            _close(log, unclean)
        raise
    _close(log, unclean)
    return report


def _close(log: Any, unclean: list[str]) -> None:
    """Scheduled deletions run (a stopped broker: nobody reads the replaced segments any more), then a clean
    close; if that fails the handles are released and the error goes on (the marker is then not restored)."""
    try:
        log.delete_expired_files(now=1 << 62)
        log.close()
    except BaseException:
        unclean.append(str(log.dir))
        log.close_handlers()
        raise
