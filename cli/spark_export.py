"""``kafkalog spark export``: an archive to Parquet written by the Spark tasks (``kafkalog.spark.export_archive``).

The command finds the segments before it starts a JVM (a bad root or an empty archive is exit 2 at once), shows
one progress step at a time on a terminal (planning, writing with finished tasks out of all, committing) and
prints what was written: a line, or one JSON object with ``--json``. Errors are the library's, rendered by
:mod:`.errors` (a corrupt segment under ``onCorrupt=fail`` is exit 1 and names it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import click

import kafkalog.spark as kafkalog_spark  # its functions import pyspark when called
from kafkalog.archive import storage
from kafkalog.errors import KafkaLogError
from kafkalog.spark.channel import skipped_line
from kafkalog.spark.export import holds_files
from kafkalog.spark.options import check_options

from .errors import CliState, CommandError
from .output import Event, Output, Progress, make_output
from .storage_opts import storage_option
from .targets import parse_config_items

#: what each step of ``export_archive``'s progress is called on the bar
_STEPS = {"plan": "planning", "write": "writing Parquet", "commit": "committing"}


@dataclass
class ExportEvent(Event):
    """The export's result: one line, or ``{"type": "export", "out", "rows", "bytes", "files", ...}``."""

    result: dict[str, Any]
    type = "export"  # type: ignore[misc]

    def text(self) -> str:
        r = self.result
        line = (f"exported {r['rows']} records from {r['segments']} segments to {r['out']}: {len(r['files'])} "
                f"Parquet files, {r['bytes']} bytes, {r['tasks']} tasks, {r['seconds']:.2f}s")  # fmt: skip
        # onCorrupt=skip: what each cut segment lost, here and not only in the executors' logs
        return "\n".join([line, *(f"  {skipped_line(m)}" for m in r.get("skipped") or ())])

    def fields(self) -> dict[str, Any]:
        return dict(self.result)


@dataclass
class _StepBar:
    """``export_archive``'s ``on_progress`` on one bar and a note per step: the bar's label names the step, its
    count is the finished write tasks (planning and committing are single steps)."""

    out: Output
    bar: Progress
    step: str = ""
    done: int = 0
    noted: set[str] = field(default_factory=set)

    def __call__(self, step: str, done: int, total: int) -> None:
        if step != self.step:
            self.step = step
            self.bar.update(description=_STEPS.get(step, step), total=total if step == "write" else None)
        if step == "plan" and total and step not in self.noted:
            self.noted.add(step)
            self.out.note(f"kafkalog spark export: {total} segments to export")
        elif step == "write":
            if step not in self.noted:
                self.noted.add(step)
                self.out.note(f"kafkalog spark export: writing Parquet in {total} tasks")
            if done > self.done:
                self.bar.advance(done - self.done)
                self.done = done


def _check_roots(roots: list[str], options: dict[str, str]) -> None:
    """Fail before Spark starts: a missing root, a listing that fails, or no segment at all (exit 2)."""
    for root in roots:
        if not storage.is_remote(root) and not os.path.exists(storage.local_path(root)):
            raise CommandError(f"{root}: no such file or directory", path=root)
    try:
        items = kafkalog_spark.discover_segments(roots, options=options)
    except KafkaLogError as exc:
        if isinstance(exc, OSError):
            raise
        raise CommandError(str(exc)) from None
    if not items:
        raise CommandError(f"{', '.join(roots)}: no segments found to export")


@click.command("export")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", required=True, type=click.Path(path_type=str), help="Dir or URL for the Parquet files.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--partition-by", default="topic,partition", show_default=True,
              help="Hive-style dirs: a comma list of topic, partition; 'none' for files directly under --out.")
@click.option("--overwrite", is_flag=True, help="Replace what --out holds (refused when a ROOT lies inside it).")
@click.option("--compression", default="snappy", show_default=True, help="Parquet codec (snappy, zstd, gzip, none).")
@click.option("--timestamp-type", type=click.Choice(["long", "timestamp"]), default="long", show_default=True,
              help="timestamp as Parquet INT64 (the DataSource's long) or TIMESTAMP(MILLIS, UTC), same milliseconds.")
@click.option("--option", "ds_options", multiple=True, metavar="KEY=VALUE",
              help="A kafkalog DataSource option: isolation, onCorrupt, startingOffsets, endingOffsets, ...")
@click.option("--json", "json_mode", is_flag=True, help="One JSON object with the files written.")
@storage_option
@click.pass_obj
def export(
    state: CliState | None, roots: tuple[str, ...], out: str, master: str | None, partition_by: str, overwrite: bool,
    compression: str, timestamp_type: str, ds_options: tuple[str, ...], json_mode: bool,
    storage_opts: dict[str, str],
) -> None:  # fmt: skip
    """Export every record under ROOT... (paths or s3://, gs://, hdfs:// URLs) to Parquet under --out, written by
    the Spark tasks themselves; spark.read.parquet(OUT) then has the kafkalog DataSource's columns.

    Exit 0 exported, 1 a corrupt segment (onCorrupt=fail, the default), 2 usage or I/O error or nothing to export.
    """
    state = state or CliState()
    output = make_output(json_mode=json_mode, quiet=state.quiet)  # first: every error below is JSON too
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CommandError("pyspark is not installed: pip install 'kafkalog[spark]'") from None
    options = {**parse_config_items(ds_options, param_hint="--option"), **storage_opts}
    check_options(options)  # an unknown --option key or a bad value: exit 2 naming it, before Spark starts
    cols = () if partition_by.strip().lower() == "none" else tuple(c.strip() for c in partition_by.split(",") if c.strip())
    _check_roots(list(roots), storage_opts)
    if not overwrite and holds_files(out, storage_opts):
        raise CommandError(f"{out}: already holds files (--overwrite replaces them)")

    from pyspark.sql import SparkSession

    had_session = SparkSession.getActiveSession() is not None
    spark = kafkalog_spark.get_session(master or "local[*]", "kafkalog-export")
    try:
        with output.progress("planning") as bar:
            result = kafkalog_spark.export_archive(
                spark, list(roots), out, partition_by=cols, mode="overwrite" if overwrite else "error",
                compression=compression, timestamp_type=timestamp_type, on_progress=_StepBar(output, bar), **options,
            )  # fmt: skip
    finally:
        if not had_session:
            spark.stop()
    output.emit(ExportEvent(result.to_dict()))
