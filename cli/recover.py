"""``kafkalog recover``: run Kafka's log recovery offline on a partition dir or a whole log dir, or salvage it.

What recovery would do comes from the library's plan mode (``kafkalog.log.recovery_plan.plan_recovery``: the
loader's own decisions, taken without writing), so ``--dry-run`` prints exactly what the load would cut, and a real
run prints the same plan beside the log end offset the load produced. Around it this command adds:

* the log dir's ``.lock`` is taken first (``locking.log_dir_writer``), so it refuses (exit 2) while a Kafka broker,
  a LogManager or another kafkalog writer holds the dir; a dry run is refused the same way (its answer would be
  about files a live broker is changing) but only tries the lock and creates nothing under PATH;
* after a clean shutdown (Kafka skips recovery) or below the recovery point, segments recovery does not read are
  read anyway, and bytes there that are not valid batches are reported with a hint (``--full`` runs Kafka's
  recovery from offset 0, ``--salvage`` keeps every valid batch);
* ``--salvage`` (beyond Kafka, ``kafkalog.log.salvage``): only the damaged byte ranges go, every valid batch stays,
  later segments included; the removed bytes and a report go to ``--quarantine-dir`` (default: beside the log
  dir, ``<log dir>.kafkalog-quarantine``). With ``--dry-run`` both plans are shown side by side;
* in a log dir, the ``recovery-point-offset-checkpoint`` and ``replication-offset-checkpoint`` entries of a
  partition whose log end went down are clamped to its new log end offset (atomically, via the library), as the
  broker would do on its next checkpoint.

Exit code 1 when recovery truncated, deleted or salvaged data (or would, with ``--dry-run``), or found corruption it
does not read; 0 when nothing was lost.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import click

from kafkalog.checkpoint.offset_checkpoint import read_log_dir_checkpoints, write_offset_checkpoint
from kafkalog.errors import KafkaLogError
from kafkalog.log.config import LogConfig
from kafkalog.log.recovery_trial import measured_load, trial_load
from kafkalog.names import parse_partition_dir
from kafkalog.verify.findings import describe_error
from kafkalog.verify.startup import REFUSED_NAME, refused_dirs

from .errors import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, CliState
from .locking import log_dir_writer
from .output import Event, Line, make_output
from .recover_summary import RecoverSummary
from .targets import parse_config_items, resolve_partition_dirs


def _range_text(ranges: list[list[int]]) -> str:
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in ranges)


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
    lost_ranges: list[list[int]] = field(default_factory=list)  # Kafka's recovery: offsets past the new log end
    unseen: list[dict[str, Any]] = field(default_factory=list)
    salvage: dict[str, Any] | None = None  # the salvage report (to_json) with --salvage
    now_ms: int | None = None  # the load's clock (None: the wall clock)
    changed_files: list[str] = field(default_factory=list)  # files of the partition dir the load changed
    error: str | None = None  # why this partition could not be recovered (one line; nothing of it changed)
    exit_code: int = EXIT_OK  # this partition's verdict: 1 data lost or corruption found, 2 not checked
    type = "partition"  # type: ignore[misc]

    def _below_log_start(self, d: dict[str, Any]) -> bool:
        """A deleted segment whose offsets all lie below the log start: already deleted, nothing lost."""
        return d["lastOffset"] is not None and d["lastOffset"] < (self.log_start_offset or 0)

    @property
    def kafka_loses(self) -> bool:
        return bool(self.truncations) or any(
            not self._below_log_start(d) and (d["bytes"] or d["lastOffset"] is not None) for d in self.deleted
        )

    @property
    def lost_data(self) -> bool:
        if self.salvage is not None:
            return bool(self.salvage["ranges"])
        return self.kafka_loses

    @property
    def offsets_lost(self) -> int:
        return sum(b - a + 1 for a, b in self.lost_ranges)

    @property  # type: ignore[override]
    def is_problem(self) -> bool:  # an error goes to stderr, as every error line does
        return self.error is not None

    @property
    def changed(self) -> bool:
        """The run changes (or, dry, would change) bytes of this partition's files or its checkpoint entries."""
        if self.error is not None:
            return False
        return bool(self.changed_files or self.checkpoints)

    def text(self) -> str:
        would = "would " if self.dry_run else ""
        how = "clean shutdown: Kafka skips recovery" if self.clean_shutdown else "unclean shutdown"
        if self.error is not None:  # one line on stderr
            was = "would be" if self.dry_run else "was"
            return f"kafkalog: error: {self.error} (nothing of {self.path} {was} changed)"
        lines = [
            f"{'Dry run: ' if self.dry_run else ''}Recovering {self.path} ({how}, recovery point {self.recovery_point})"
        ]
        kafka = "Kafka's recovery " if self.salvage is not None else ""
        kwould = "would " if self.dry_run or self.salvage is not None else ""
        for t in self.truncations:
            lost = (
                f"offsets {t['firstOffsetLost']}-{t['lastOffsetLost']} lost"
                if t["lastOffsetLost"] is not None
                else "no readable offsets lost"
            )
            lines.append(f"  {kafka}{kwould}truncate {t['segment']} at position {t['position']}: {t['bytes']} bytes, "
                         f"{lost}")
        for d in self.deleted:
            if self._below_log_start(d):
                lost = f"offsets {d['firstOffset']}-{d['lastOffset']} below the log start offset {self.log_start_offset}"
            else:
                lost = f"offsets {d['firstOffset']}-{d['lastOffset']} lost" if d["lastOffset"] is not None else "empty"
            lines.append(f"  {kafka}{kwould}delete {d['segment']}: {d['bytes']} bytes, {lost}")
        for a in self.actions:
            if a["action"] not in ("truncated", "deleted segment"):
                lines.append(f"  {kwould}{a['action']}: {a['file']}")
        if self.salvage is not None:
            end = self.salvage["logEndOffsetAfter"]
            kafka_end = self.salvage["kafkaLogEndOffsetAfter"]
            lines.append(f"  {'':16}{'Kafka recovery':>24}  {'salvage':>24}")
            lines.append(f"  {'log end offset':16}{f'{self.log_end_before} -> {kafka_end}':>24}  "
                         f"{f'{self.log_end_before} -> {end}':>24}")
            k_lost = f"{_range_text(self.lost_ranges)} ({self.offsets_lost})" if self.lost_ranges else "none"
            s_lost = (f"{_range_text(self.salvage['lostRanges'])} ({self.salvage['offsetsLost']})"
                      if self.salvage["lostRanges"] else "none")
            lines.append(f"  {'offsets lost':16}{k_lost:>24}  {s_lost:>24}")
            k_bytes = sum(t["bytes"] for t in self.truncations) + sum(d["bytes"] for d in self.deleted)
            s_bytes = sum(r["bytes"] for r in self.salvage["ranges"])
            lines.append(f"  {'bytes removed':16}{k_bytes:>24}  {s_bytes:>24}")
            for r in self.salvage["ranges"]:
                lost = (f"offsets {r['firstOffset']}-{r['lastOffset']} lost" if r["firstOffset"] is not None
                        else "no offsets lost")
                lines.append(f"  salvage {'would remove' if self.dry_run else 'removed'} {r['segment']} {r['position']}-{r['position'] + r['bytes']} "
                             f"({r['bytes']} bytes, {'/'.join(r['reasons'])}): {lost}")
            if self.salvage.get("quarantine"):
                lines.append(f"  removed bytes and {self.salvage['reportFile']} in {self.salvage['quarantine']}")
            elif self.salvage["ranges"]:
                lines.append(f"  removed bytes would be kept in {self.salvage['quarantineRoot']}")
        for c in self.checkpoints:
            lines.append(f"  {would}set {c['file']} {c['partition']} {c['before']} -> {c['after']}")
        if self.changed_files:
            changed = "that would change" if self.dry_run else "changed"
            lines.append(f"  files {changed}: {', '.join(self.changed_files)}")
        if self.salvage is None:
            lines.append(f"  log end offset {self.log_end_before} -> {self.log_end_after}")
            if self.lost_ranges:
                lines.append(f"  offsets lost: {_range_text(self.lost_ranges)} ({self.offsets_lost} offsets)")
        for u in self.unseen:
            if u.get("index"):
                lines.append(f"  {u['segment']}: its index fails its check ({u['index']}): recovery does not read "
                             "that segment, so Kafka would answer lookups from the index as is")
                continue
            lines.append(f"  {u['segment']} holds {u['bytes']} bytes that are not valid batches from position "
                         f"{u['position']}: recovery does not read that segment, so Kafka would serve them as is")
        if self.unseen and self.salvage is None:
            lines.append("  run with --full (Kafka's recovery from offset 0) or --salvage (keep every valid batch)")
        if not self.lost_data and not self.unseen:
            lines.append("  nothing lost")
        return "\n".join(lines)

    def fields(self) -> dict[str, Any]:
        kafka = {
            "truncations": self.truncations,
            "deletedSegments": self.deleted,
            "lostRanges": self.lost_ranges,
            "offsetsLost": self.offsets_lost,
        }
        head = {
            "path": self.path,
            "dryRun": self.dry_run,
            "mode": "kafka" if self.salvage is None else "salvage",
            "cleanShutdown": self.clean_shutdown,
            "recoveryPoint": self.recovery_point,
            "logStartOffset": self.log_start_offset,
            "logEndOffsetBefore": self.log_end_before,
            "nowMs": self.now_ms,
        }
        if self.error is not None:
            return {**head, "error": self.error, "changed": False, "exitCode": self.exit_code}
        head["changed"] = self.changed
        if self.salvage is None:
            return {**head, "logEndOffsetAfter": self.log_end_after, **kafka, "actions": self.actions,
                    "changedFiles": self.changed_files,
                    "checkpoints": self.checkpoints, "unseenCorruption": self.unseen, "lostData": self.lost_data}
        s = self.salvage
        return {
            **head,
            "logEndOffsetAfter": s["logEndOffsetAfter"],
            "lostRanges": s["lostRanges"],
            "offsetsLost": s["offsetsLost"],
            "ranges": s["ranges"],
            "rewritten": s["rewritten"],
            "quarantine": s["quarantine"] or s["quarantineRoot"],
            "changedFiles": self.changed_files,
            "reportFile": s["reportFile"] if s["ranges"] else None,
            "checkpoints": self.checkpoints,
            "lostData": self.lost_data,
            # Kafka's recovery after a crash from offset 0, on the same files: the comparison.
            "kafka": {"logEndOffsetAfter": s["kafkaLogEndOffsetAfter"], **kafka, "actions": self.actions},
        }


@click.command()
@click.argument("path", type=click.Path(path_type=str))
@click.option("--dry-run", is_flag=True, help="Show what recovery would do; change nothing on disk.")
@click.option("--full", is_flag=True, help="Recover every segment, as after a crash with recovery point 0.")
@click.option("--salvage", is_flag=True,
              help="Beyond Kafka: keep every valid batch, remove only damaged bytes (kept in the quarantine dir).")
@click.option("--quarantine-dir", type=click.Path(path_type=str), default=None,
              help="Where --salvage keeps the removed bytes and its report (default: <log dir>.kafkalog-quarantine "
                   "beside the log dir; never inside it).")
@click.option(
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Topic config used to rebuild indexes (e.g. index.interval.bytes=512); Kafka's defaults otherwise.",
)
@click.option("--now-ms", type=click.IntRange(min=0), default=None, metavar="MS",
              help="Kafka's clock for the load, in ms since the epoch. It decides which producer ids have expired "
                   "(producer.id.expiration.ms), so it fixes the producer snapshots recovery writes. Default: the "
                   "partition's own clock, its newest batch timestamp (the wall clock when it has none).")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per partition and a summary.")
@click.pass_obj
def recover(
    state: CliState | None, path: str, dry_run: bool, full: bool, salvage: bool, quarantine_dir: str | None,
    configs: tuple[str, ...], now_ms: int | None, json_mode: bool,
) -> None:
    """Run Kafka's log recovery offline on a partition dir or a whole log dir (or salvage it).

    Takes the log dir's .lock first, as a Kafka broker does: refuses (exit 2) while a broker, a LogManager or
    another kafkalog writer holds it, --dry-run included. Without --full, does exactly
    what the broker would do at its next start: nothing after a clean shutdown, else recovery from the
    checkpointed recovery point. --salvage keeps every valid batch instead. Exit 1 when data was (or would be)
    truncated, deleted or salvaged, or when corruption recovery would not read was found.
    """

    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    if quarantine_dir is not None and not salvage:
        raise click.BadParameter("only with --salvage", param_hint="--quarantine-dir")
    log_dir, pdirs = resolve_partition_dirs(path, verb="recover")
    config = LogConfig.from_properties(parse_config_items(configs))
    if salvage:
        _check_quarantine_dir(log_dir, quarantine_dir)
    code = EXIT_OK
    recs: list[PartitionRecovery] = []
    refused = refused_dirs(log_dir) if len(pdirs) != 1 or pdirs[0] != os.path.abspath(path) else []
    for dir_path in refused:  # Kafka stops at startup on each: name it, before and after the work alike
        out.emit(Line(f"kafkalog: error: {dir_path}: {REFUSED_NAME}", kind="startupRefusal",
                      extra={"path": dir_path}, problem=True))
        code = EXIT_CORRUPT
    with log_dir_writer(log_dir, dry_run=dry_run):
        ckpts = read_log_dir_checkpoints(log_dir)
        clean = os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown")) and not full
        with out.progress("recovering", total=len(pdirs)) as bar:
            for pdir in pdirs:
                rec = _recover_or_error(pdir, config, ckpts, clean=clean, full=full, dry_run=dry_run,
                                        salvage=salvage, quarantine_dir=quarantine_dir, now_ms=now_ms)
                if rec.error is None and (rec.lost_data or rec.unseen):
                    rec.exit_code = EXIT_CORRUPT
                if rec.error is None and rec.lost_data:
                    rec.checkpoints = _clamp_checkpoints(log_dir, pdir, rec, ckpts, dry_run)
                code = max(code, rec.exit_code)
                out.emit(rec)
                recs.append(rec)
                bar.advance()
    out.emit(RecoverSummary.of(recs, dry_run=dry_run, salvage=salvage, exit_code=code, refused=len(refused)))
    click.get_current_context().exit(code)


def _recover_or_error(pdir: str, config: Any, ckpts: dict[str, dict[tuple[str, int], int]], *, clean: bool,
                      full: bool, dry_run: bool, **kw: Any) -> PartitionRecovery:
    """One partition's recovery; a partition that cannot be recovered (Kafka refuses it, a file cannot be read)
    becomes a result with ``error`` set, so a log dir's run goes on to its other partitions and its summary. The
    plan raises what the load would, before anything is written, so a dry run names the same errors."""
    try:
        return _recover_partition(pdir, config, ckpts, clean=clean, full=full, dry_run=dry_run, **kw)
    except (KafkaLogError, OSError, ValueError) as exc:  # a bug (anything else) still ends the run
        status, message = describe_error(exc)
        rec = PartitionRecovery(pdir, dry_run, clean and not kw.get("salvage"), 0, None, None)
        rec.error = message
        rec.exit_code = EXIT_CORRUPT if status == "corrupt" else EXIT_USAGE
        return rec


def _check_quarantine_dir(log_dir: str, quarantine_dir: str | None) -> None:
    """A quarantine inside the log dir would be read by Kafka's loader: refuse it before anything runs."""
    if quarantine_dir is None:
        return
    q = os.path.realpath(quarantine_dir)
    root = os.path.realpath(log_dir)
    if q == root or q.startswith(root + os.sep):
        raise click.BadParameter(
            f"{quarantine_dir} is inside the log dir {log_dir}, where Kafka's loader would read it",
            param_hint="--quarantine-dir",
        )


def _recover_partition(
    pdir: str, config: Any, ckpts: dict[str, dict[tuple[str, int], int]], *, clean: bool, full: bool, dry_run: bool,
    salvage: bool = False, quarantine_dir: str | None = None, now_ms: int | None = None,
) -> PartitionRecovery:
    from kafkalog.log.log import Log
    from kafkalog.log.recovery_plan import plan_recovery
    from kafkalog.log.salvage import REPORT_FILE, default_quarantine_dir, salvage_partition

    parsed = parse_partition_dir(os.path.basename(pdir))
    key = (parsed.topic, parsed.partition)
    recovery_point = 0 if full else ckpts["recovery-point-offset-checkpoint"].get(key, 0)
    log_start = ckpts["log-start-offset-checkpoint"].get(key)
    # With --salvage, Kafka's side of the comparison is its recovery after a crash from offset 0: what it would
    # make of the same damage.
    kafka_clean = clean and not salvage
    kafka_point = 0 if salvage else recovery_point
    plan = plan_recovery(pdir, config, clean_shutdown=kafka_clean, recovery_point=kafka_point,
                         log_start_offset=log_start or 0, look_everywhere=True)
    rec = PartitionRecovery(pdir, dry_run, kafka_clean, kafka_point, log_start, plan.log_end_before,
                            plan.log_end_after)
    # Producer-id expiry is measured against this clock: by default the partition's own (its last kept batch's
    # timestamp), so a recovery writes the producer snapshots Kafka writes recovering right after the last write,
    # whenever it runs, and drops no producer state for the time the files sat idle.
    now = rec.now_ms = now_ms if now_ms is not None else plan.last_timestamp
    clock = None if now is None else (lambda: now)
    rec.truncations = [
        {"segment": t.segment, "position": t.position, "bytes": t.bytes, "firstOffsetLost": t.first_offset_lost,
         "lastOffsetLost": t.last_offset_lost} for t in plan.truncations
    ]
    rec.deleted = [
        {"segment": d.segment, "bytes": d.bytes, "firstOffset": d.first_offset, "lastOffset": d.last_offset}
        for d in plan.deleted
    ]
    rec.actions = [{"action": a, "file": f} for a, f in plan.actions]
    rec.lost_ranges = [list(r) for r in plan.lost_ranges]
    rec.unseen = [{"segment": u.segment, "position": u.position, "bytes": u.bytes, "index": u.index}
                  for u in plan.unseen_corruption]
    if salvage:
        report = None

        def run_salvage(d: str) -> int:
            nonlocal report
            # a trial's quarantine goes beside its scratch log dir, the real run's where the operator said
            q = quarantine_dir if d == pdir else os.path.join(os.path.dirname(os.path.dirname(d)), "quarantine")
            report = salvage_partition(d, quarantine_dir=q, dry_run=False, config=config, log_start_offset=log_start,
                                       clock=clock)
            return report.log_end_after

        if dry_run:
            dry_report = salvage_partition(pdir, quarantine_dir=quarantine_dir, dry_run=True, config=config,
                                           log_start_offset=log_start, clock=clock)
            _, rec.changed_files = trial_load(pdir, run_salvage, writes_logs=set(dry_report.rewritten))
            report = dry_report  # the trial's paths are the scratch copy's: the report is the dry one
        else:
            _, rec.changed_files = measured_load(pdir, run_salvage)
        assert report is not None
        doc = report.to_json()
        doc["kafkaLogEndOffsetAfter"] = plan.log_end_after
        doc["quarantineRoot"] = str(quarantine_dir or default_quarantine_dir(pdir))
        doc["quarantine"] = None if report.quarantine is None else str(report.quarantine)
        doc["reportFile"] = REPORT_FILE
        rec.salvage = doc
        rec.unseen = []  # salvage reads every segment
        rec.log_end_after = report.log_end_after
        return rec

    def load(d: str) -> int:
        log = Log.open(d, config, recovery_point=recovery_point, log_start_offset=log_start, clean_shutdown=clean,
                       clock=clock)
        try:
            return log.log_end_offset
        finally:
            log.close()

    # The files the load changes, measured; a dry run measures a load of a scratch copy (recovery_trial).
    if dry_run:
        rec.log_end_after, rec.changed_files = trial_load(pdir, load, writes_logs={t.segment for t in plan.truncations})
    else:
        rec.log_end_after, rec.changed_files = measured_load(pdir, load)
    return rec


def _clamp_checkpoints(
    log_dir: str, pdir: str, rec: PartitionRecovery, ckpts: dict[str, dict[tuple[str, int], int]], dry_run: bool
) -> list[dict[str, Any]]:
    """Clamp checkpointed offsets past the new log end (what the broker's next checkpoint would write)."""

    parsed = parse_partition_dir(os.path.basename(pdir))
    key = (parsed.topic, parsed.partition)
    changes = []
    leo = rec.salvage["logEndOffsetAfter"] if rec.salvage is not None else rec.log_end_after
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
