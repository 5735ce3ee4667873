"""``kafkalog verify``: check segments, indexes and checkpoints under any path, report every problem, keep going.

Every check and every verdict is the library's (:mod:`kafkalog.verify`: :func:`~kafkalog.verify.plan_paths` finds
what lies under the paths, :func:`~kafkalog.verify.run_plan` yields one :class:`~kafkalog.verify.Finding` per
segment, partition dir, log dir and loose file, :class:`~kafkalog.verify.Tally` counts them and gives the exit
code), the same functions the Spark job runs, so ``kafkalog verify`` and ``kafkalog spark validate`` give the same
verdict on the same files. This module renders the findings (text or ``--json``), prints errors the way every
command prints them and shows progress on a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from kafkalog.verify import Finding, Tally

from .errors import EXIT_CORRUPT, EXIT_OK, EXIT_USAGE, CliState, report_error
from .output import Event, Output, make_output
from .storage_opts import rsm_config_option, storage_option


@dataclass
class FindingEvent(Event):
    """One library :class:`Finding` as a line (``segment PATH: CORRUPT (summary)`` and its problems) or object."""

    finding: Finding

    @property
    def type(self) -> str:  # type: ignore[override]
        return self.finding.kind

    @property
    def is_data(self) -> bool:
        # --quiet keeps only what needs attention.
        return self.finding.status != "ok"

    def text(self) -> str:
        f = self.finding
        label = {"ok": "ok", "warning": "WARNING", "corrupt": "CORRUPT", "error": "ERROR"}[f.status]
        line = f"{f.kind} {f.path}: {label}"
        if f.summary:
            line += f" ({f.summary})"
        return line + "".join(f"\n  {p}" for p in f.problems)

    def fields(self) -> dict[str, Any]:
        f = self.finding
        return {"path": f.path, "status": f.status, "problems": f.problems, **f.data}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.finding.kind, **self.fields()}


#: the order of the kinds in the summary line
_KINDS = ("segment", "partition", "logdir", "file", "dir")
_MAX_NAMED = 10


@dataclass
class Summary(Event):
    """The last line: the verdict, what was checked by kind and status, and what was not checked (named)."""

    counts: dict[str, dict[str, int]]
    exit_code: int
    bytes_checked: int
    not_checked: list[str]
    type = "summary"  # type: ignore[misc]

    def text(self) -> str:
        parts = []
        for kind in sorted(self.counts, key=lambda k: (_KINDS.index(k) if k in _KINDS else len(_KINDS), k)):
            c = self.counts[kind]
            label = "log dirs" if kind == "logdir" else f"{kind}s"
            parts.append(f"{sum(c.values())} {label} (" + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + ")")
        verdict = {EXIT_OK: "OK", EXIT_CORRUPT: "CORRUPTION FOUND", EXIT_USAGE: "ERRORS"}[self.exit_code]
        line = f"Summary: {verdict}: " + "; ".join(parts or ["nothing checked"]) + f"; {self.bytes_checked} bytes read"
        if self.not_checked:
            named = ", ".join(self.not_checked[:_MAX_NAMED])
            more = len(self.not_checked) - _MAX_NAMED
            line += f"; not checked ({len(self.not_checked)}): {named}" + (f" and {more} more" if more > 0 else "")
        return line

    def fields(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == EXIT_OK,
            "exitCode": self.exit_code,
            "bytesChecked": self.bytes_checked,
            "counts": self.counts,
            "notChecked": self.not_checked,
        }


def render(out: Output, tally: Tally, finding: Finding) -> None:
    """Count one finding and print it. A check that failed with an error (I/O, usage) is one line on stderr, as
    every command prints errors, and an ``error`` object in JSON; a finding that was partly checked (a segment
    whose index could not be read) is printed too."""
    tally.add(finding)
    if finding.exception is None or finding.summary:
        out.emit(FindingEvent(finding))
    if finding.exception is not None:
        report_error(finding.exception, out=out, path=finding.path)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--no-index-check", is_flag=True, help="Skip the strict .index/.timeindex/.txnindex checks.")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object per segment/partition/file and a summary.")
@storage_option
@rsm_config_option
@click.pass_obj
def verify(
    state: CliState | None, paths: tuple[str, ...], no_index_check: bool, json_mode: bool, storage_opts: dict,
    rsm: Any,
) -> None:
    """Verify segment files, partition dirs, log dirs or whole trees of them.

    Checks every batch CRC and offset, the strict sanity of every index against its log, the segments of each
    partition against each other and against the log dir's checkpoints, and parses every checkpoint, metadata
    and producer-snapshot file. Reports every corrupt range and keeps going; the summary names what could not be
    checked. Exit 0 clean, 1 corruption found, 2 usage or I/O error, or nothing found to check.

    Segments stored by Aiven's tiered-storage plugin (``.log`` + ``.indexes`` + ``.rsm-manifest``) are restored
    chunk by chunk and checked with their indexes; encrypted ones need ``--rsm-config``.
    """
    from kafkalog.verify.remote import remote_plan  # numpy and pyarrow: loaded by the command, not by --help

    # a remote segment is checked over its fetched bytes; only its partition's small files are copied
    with remote_plan(paths, storage_opts) as (plan, shown_as):
        _verify(state, plan, no_index_check, json_mode, shown_as=shown_as, rsm=rsm)


def _verify(state: CliState | None, plan: Any, no_index_check: bool, json_mode: bool, *,
            shown_as: dict[str, str] | None = None, rsm: Any = None) -> None:
    from kafkalog.verify import run_plan  # the checks themselves import numpy

    state = state or CliState()
    out = make_output(json_mode=json_mode, quiet=state.quiet)
    out.show_as(shown_as or {})
    tally = Tally()
    for finding in plan.errors:
        render(out, tally, finding)
    with out.progress("verifying", total=plan.total_bytes) as bar:
        for finding in run_plan(plan, index_check=not no_index_check, on_segment=bar.advance, rsm=rsm):
            render(out, tally, finding)
    out.emit(Summary(tally.plain_counts(), tally.exit_code, tally.checked_bytes, tally.not_checked))
    click.get_current_context().exit(tally.exit_code)
