"""``kafkalog dirs assignments``: KIP-858 directory assignments of offline log dirs, checked against metadata.

Read-only: each LOGDIR's ``meta.properties`` gives its ``directory.id`` and its partition dirs give the replicas
(``<t>-<p>`` current, ``.<uuid>-future`` a move in progress). No lock is taken and nothing is written, so it is
safe on the dirs of a stopped broker or a copy. A dir that cannot be read counts as offline (as the broker would
see it). With ``--expected FILE.json`` (``{"t-0": "<dir id>"}`` or a list of ``{"topic", "partition",
"directoryId"}``) every difference is printed in KIP-858's terms and the exit code is 1.
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from kafkalog.checkpoint.meta_properties import read_meta_properties
from kafkalog.errors import KafkaLogError, NothingToCheckError
from kafkalog.metadata.image import read_metadata_log
from kafkalog.names import parse_partition_dir
from kafkalog.verify.startup import REFUSED_NAME, refused_dirs

from .errors import EXIT_CORRUPT, EXIT_OK, CommandError
from .output import make_output


def _scan(raw: str) -> tuple[Any, str | None]:
    """DirState of one dir plus an error message if it could not be read (then it is offline)."""
    from kafkalog.manager.assignments import DirState

    path = os.path.abspath(raw)
    state = DirState(path, None, True)
    try:
        meta_path = os.path.join(path, "meta.properties")
        if os.path.exists(meta_path):
            state.directory_id = read_meta_properties(meta_path).directory_id
        with os.scandir(path) as it:
            for entry in it:
                if not entry.is_dir(follow_symlinks=False):
                    continue
                try:
                    p = parse_partition_dir(entry.name)
                except ValueError:
                    continue
                if p.kind == "":
                    state.current.add((p.topic, p.partition))
                elif p.kind == "future":
                    state.future.add((p.topic, p.partition))
    except (OSError, KafkaLogError) as exc:
        state.online = False
        return state, f"{path}: {exc}"
    return state, None


@click.command("assignments")
@click.argument("log_dirs", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--expected", "expected_file", type=click.Path(dir_okay=False, path_type=str),
              help="JSON map of topic-partition to directory id, as the cluster metadata holds it.")
@click.option("--metadata-log", "metadata_log", type=click.Path(file_okay=False, path_type=str),
              help="A __cluster_metadata-0 dir: compare with what the controller recorded (needs --broker-id).")
@click.option("--broker-id", type=click.IntRange(min=0), default=None, help="This broker's node id.")
@click.option("--all", "show_all", is_flag=True, help="With --metadata-log: every replica, not only differences.")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object: assignments and mismatches.")
def assignments(log_dirs: tuple[str, ...], expected_file: str | None, metadata_log: str | None,
                broker_id: int | None, show_all: bool, json_mode: bool) -> None:
    """Which directory id holds each replica in LOGDIR...; with --expected or --metadata-log, the KIP-858
    differences (exit 1)."""
    from kafkalog.manager.assignments import compare_assignments, parse_expected

    make_output(json_mode=json_mode)  # the command prints its own document; this renders its errors (--json)
    if metadata_log is not None and (broker_id is None or expected_file is not None):
        raise click.UsageError("--metadata-log needs --broker-id and excludes --expected")
    states, errors = [], []
    floor = EXIT_OK  # the least exit code: 1 when Kafka refuses a dir in a LOGDIR (a missing LOGDIR: 2, raised)
    for raw in log_dirs:
        if not os.path.exists(raw):  # a typo is not an offline dir: nothing was checked
            raise FileNotFoundError(2, "No such file or directory", raw)
        st, err = _scan(raw)
        states.append(st)
        if err is not None:
            errors.append(err)
            click.echo(f"kafkalog: warning: log dir offline: {err}", err=True)
        for path in refused_dirs(st.path) if err is None else []:
            floor = max(floor, EXIT_CORRUPT)
            click.echo(f"kafkalog: error: {path}: {REFUSED_NAME}", err=True)
    if metadata_log is not None:
        _against_metadata(states, metadata_log, broker_id, show_all, json_mode, floor)  # type: ignore[arg-type]
        return
    rows = []
    seen: dict[tuple[str, int], list[str]] = {}
    for st in states:
        for kind, parts in (("current", st.current), ("future", st.future)):
            for tp in sorted(parts):
                rows.append({"topic": tp[0], "partition": tp[1], "directoryId": st.directory_id,
                             "logDir": st.path, "isFuture": kind == "future"})
                if kind == "current":
                    seen.setdefault(tp, []).append(st.path)
    duplicates = {tp: paths for tp, paths in seen.items() if len(paths) > 1}
    mismatches = []
    if expected_file is not None:
        with open(expected_file, encoding="utf-8") as f:  # an OSError: the funnel's `PATH: reason` line
            try:
                expected = parse_expected(json.load(f))
            except ValueError as exc:
                raise CommandError(f"{expected_file}: not expected assignments: {exc}", path=expected_file) from exc
        mismatches = compare_assignments(states, expected)
    if json_mode:
        click.echo(json.dumps({
            "logDirs": [{"logDir": s.path, "directoryId": s.directory_id, "online": s.online} for s in states],
            "assignments": rows,
            "duplicates": [{"topic": tp[0], "partition": tp[1], "logDirs": p} for tp, p in sorted(duplicates.items())],
            "mismatches": [m.to_json() for m in mismatches],
        }))
    else:
        for s in states:
            click.echo(f"logDir: {s.path} directoryId: {s.directory_id} {'online' if s.online else 'offline'}")
        for r in rows:
            click.echo(f"  {r['topic']}-{r['partition']} directoryId: {r['directoryId']}"
                       + (" (future)" if r["isFuture"] else ""))
        for tp, paths in sorted(duplicates.items()):
            click.echo(f"duplicate: {tp[0]}-{tp[1]} is a current replica in {', '.join(paths)}")
        for m in mismatches:
            click.echo(f"mismatch: {m.kind.value} {m.topic}-{m.partition} expected: {m.expected_dir_id} "
                       f"actual: {m.actual_dir_id} ({m.detail})")
    click.get_current_context().exit(max(floor, EXIT_CORRUPT if (mismatches or duplicates) else EXIT_OK))


def _against_metadata(states: list, metadata_log: str, broker_id: int, show_all: bool, json_mode: bool,
                      floor: int = EXIT_OK) -> None:
    """KIP-858 from the controller's records: the report is the library's (kafkalog.metadata.dir_assignments)."""
    from kafkalog.metadata.dir_assignments import check_broker_dirs

    if not os.path.isdir(metadata_log):
        raise CommandError(f"{metadata_log}: not a directory")
    try:
        image = read_metadata_log(metadata_log)
        if not image.topics and not image.brokers:
            raise NothingToCheckError("no metadata records found", path=metadata_log)
        report = check_broker_dirs(states, image, broker_id)
    except NothingToCheckError:
        raise
    except (OSError, KafkaLogError) as exc:
        raise CommandError(f"{metadata_log}: {exc}") from exc
    if json_mode:
        click.echo(json.dumps({**report.to_json(include_all=show_all), "metadataProblems": image.problems}))
    else:
        for problem in image.problems:  # what the replay could not read; the image stops before it
            click.echo(f"kafkalog: warning: metadata log: {problem}", err=True)
        registered = ", ".join(report.registered_dirs) or "none"
        click.echo(f"broker: {broker_id} registered log dirs: {registered} fenced: {str(report.fenced).lower()}")
        for s in states:
            reg = "registered" if s.directory_id in report.registered_dirs else "not registered"
            click.echo(f"logDir: {s.path} directoryId: {s.directory_id} {'online' if s.online else 'offline'} {reg}")
        if show_all:
            for r in report.replicas:
                click.echo(f"  {r.topic}-{r.partition} assigned: {r.to_json()['assigned']} "
                           f"actual: {r.actual_dir_id if r.log_dir else 'none'}")
        for m in report.mismatches:
            click.echo(f"mismatch: {m['kind']} {m['topic']}-{m['partition']} expected: {m['expectedDirectoryId']} "
                       f"actual: {m['actualDirectoryId']} ({m['detail']})")
        for f in report.dir_findings:
            click.echo(f"mismatch: {f.kind} {f.log_dir} directoryId: {f.directory_id} ({f.detail})")
    click.get_current_context().exit(max(floor, EXIT_OK if report.consistent else EXIT_CORRUPT))
