"""``kafkalog dirs describe``: the offline equivalent of ``kafka-log-dirs.sh --describe``.

``--json`` prints Kafka's shape (``{"version":1,"brokers":[{"broker":N,"logDirs":[{"logDir":...,"error":null,
"partitions":[{"partition":"t-0","size":N,"offsetLag":0,"isFuture":false}]}]}]}``) with extra fields Kafka's
admin API also knows (directory id, total/usable bytes) and what only an offline look can give (offline reason,
log start/end offsets, checkpointed recovery point and high watermark). Sizes are the sum of the ``.log``
files, as Kafka's ``UnifiedLog.size``; the log end offset comes from a scan of the last segment only.
A dir that cannot be read is described with ``error`` set and makes the exit code 2.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import click

from kafkalog.checkpoint.meta_properties import read_meta_properties
from kafkalog.checkpoint.offset_checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    effective_log_start_offset,
    read_log_dir_checkpoints,
)
from kafkalog.cleaner.dirty_range import INTERNAL_COMPACTED_TOPICS, dirty_ratio_from_sizes
from kafkalog.names import parse_partition_dir, parse_segment_file_name
from kafkalog.verify.startup import REFUSED_NAME, refused_dirs

from .assignments_cmd import assignments  # KIP-858: its own module, a subcommand of `dirs`
from .errors import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, CliState, classify
from .output import Progress, make_output

DEFAULT_CHECKPOINTS = (RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)


@click.group()
def dirs() -> None:
    """Describe log dirs."""


@dirs.command("describe")
@click.argument("log_dirs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "json_mode", is_flag=True, help="kafka-log-dirs.sh --describe JSON (one object).")
@click.pass_obj
def describe(state: CliState | None, log_dirs: tuple[str, ...], json_mode: bool) -> None:
    """Partitions, sizes and offsets of each LOGDIR, grouped by the broker (node.id) that owns it."""
    code = EXIT_OK
    brokers: dict[int, list[dict[str, Any]]] = {}
    out = make_output(json_mode=json_mode, quiet=(state or CliState()).quiet)  # the bar: stderr, terminals only
    for raw in log_dirs:
        with out.progress(f"describing {raw}") as bar:
            broker, info = _describe_dir(raw, bar)
        if info["error"] is not None:
            code = EXIT_USAGE
            click.echo(f"kafkalog: error: {info['offlineReason']}", err=True)
        for refused in info["refusedDirs"]:  # Kafka's LogManager stops at startup on each
            code = max(code, EXIT_CORRUPT)
            click.echo(f"kafkalog: error: {refused['path']}: {refused['reason']}", err=True)
        brokers.setdefault(broker, []).append(info)
    doc = {"version": 1, "brokers": [{"broker": b, "logDirs": d} for b, d in sorted(brokers.items())]}
    if json_mode:
        click.echo(json.dumps(doc))
    else:
        for b in doc["brokers"]:
            for d in b["logDirs"]:
                click.echo(_text(b["broker"], d))
    click.get_current_context().exit(code)


def _text(broker: int, d: dict[str, Any]) -> str:
    head = f"logDir: {d['logDir']} broker: {broker} directoryId: {d['directoryId']}"
    if d["error"] is not None:
        return f"{head} error: {d['error']} offlineReason: {d['offlineReason']}"
    lines = [
        f"{head} totalBytes: {d['totalBytes']} usableBytes: {d['usableBytes']} partitions: {len(d['partitions'])}"
        f" size: {sum(p['size'] for p in d['partitions'])}"
    ]
    for p in d["partitions"]:
        lines.append(
            f"  partition: {p['partition']} size: {p['size']} offsetLag: {p['offsetLag']}"
            f" isFuture: {str(p['isFuture']).lower()} logStartOffset: {p['logStartOffset']}"
            f" logEndOffset: {p['logEndOffset']} segments: {p['segments']}"
            + (f" state: {p['state']}" if p["state"] != "live" else "")
            + (f" dirtyRatio: {_ratio(p['dirtyRatio'])} firstDirtyOffset: {p['firstDirtyOffset']}"
               if "dirtyRatio" in p else "")
        )
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _describe_dir(raw: str, bar: Progress | None = None) -> tuple[int, dict[str, Any]]:
    path = os.path.abspath(raw)
    info: dict[str, Any] = {
        "logDir": path,
        "error": None,
        "offlineReason": None,
        "directoryId": None,
        "totalBytes": None,
        "usableBytes": None,
        "partitions": [],
        "refusedDirs": [],
    }
    broker = -1
    try:
        if not os.path.isdir(path):
            raise FileNotFoundError(
                2, "No such file or directory" if not os.path.exists(path) else "Not a directory", path
            )
        meta_path = os.path.join(path, "meta.properties")
        if os.path.exists(meta_path):
            meta = read_meta_properties(meta_path)
            info["directoryId"] = meta.directory_id
            broker = meta.node_id if meta.node_id is not None else -1
        usage = shutil.disk_usage(path)
        info["totalBytes"], info["usableBytes"] = usage.total, usage.free
        ckpts = read_log_dir_checkpoints(path, (*DEFAULT_CHECKPOINTS, CLEANER_OFFSET_CHECKPOINT))
        names = sorted(os.listdir(path))
        info["refusedDirs"] = [{"path": p, "reason": REFUSED_NAME} for p in refused_dirs(path)]
        bar = bar or Progress()
        bar.update(total=len(names))
        for name in names:
            bar.advance()
            full = os.path.join(path, name)
            if os.path.isdir(full):
                part = _describe_partition(full, name, ckpts)
                if part is not None:
                    info["partitions"].append(part)
    except Exception as exc:  # noqa: BLE001 - a dir we cannot read is described as offline
        code, message = classify(exc)
        info["error"] = "KafkaStorageException" if code == EXIT_USAGE else "CorruptRecordException"
        info["offlineReason"] = message
        info["partitions"] = []
    return broker, info


def _describe_partition(pdir: str, name: str, ckpts: dict[str, dict[tuple[str, int], int]]) -> dict[str, Any] | None:
    from kafkalog.verify import verify_log_file

    try:
        parsed = parse_partition_dir(name)
    except ValueError:
        return None
    logs = sorted(
        (p.offset, n)
        for n in os.listdir(pdir)
        if (p := parse_segment_file_name(n)) is not None and p.suffix == ".log" and not p.temp_suffix
    )
    sizes = [(base, os.path.getsize(os.path.join(pdir, n))) for base, n in logs]
    size = sum(s for _, s in sizes)
    key = (parsed.topic, parsed.partition)
    log_end = None
    if logs:
        last_base, last_name = logs[-1]
        report = verify_log_file(os.path.join(pdir, last_name), include_batches=False)
        log_end = report.last_offset + 1 if report.last_offset is not None else last_base
    lso_ckpt = ckpts["log-start-offset-checkpoint"].get(key)
    log_start = effective_log_start_offset(lso_ckpt, logs[0][0] if logs else None)
    out = {
        "partition": f"{parsed.topic}-{parsed.partition}",
        "size": size,
        "offsetLag": 0,
        "isFuture": parsed.kind == "future",
        "state": parsed.kind or "live",
        "segments": len(logs),
        "logStartOffset": log_start,
        "logEndOffset": log_end,
        "recoveryPoint": ckpts["recovery-point-offset-checkpoint"].get(key),
        "highWatermark": ckpts["replication-offset-checkpoint"].get(key),
    }
    cleaner = ckpts[CLEANER_OFFSET_CHECKPOINT]
    if (key in cleaner or parsed.topic in INTERNAL_COMPACTED_TOPICS) and log_start is not None and log_end is not None:
        # a compacted partition (the broker's cleaner checkpointed it): where cleaning would start and how dirty
        out["firstDirtyOffset"], out["dirtyRatio"] = dirty_ratio_from_sizes(sizes, log_start, log_end, cleaner.get(key))
    return out


dirs.add_command(assignments)
