"""``kafkalog spark validate``: the archive validation job, delegated to ``kafkalog.spark.run_validation``."""

from __future__ import annotations

import click

import kafkalog.spark as kafkalog_spark  # its functions import pyspark when called
from kafkalog.discovery import discover_segments
from kafkalog.errors import KafkaLogError

from .errors import CommandError
from .output import make_output
from .storage_opts import rsm_config_option, storage_option


@click.group()
def spark() -> None:
    """Spark jobs over archives of Kafka log dirs (needs the spark extra)."""


@spark.command("validate")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", required=True, type=click.Path(path_type=str), help="Dir or URL for the reports.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--format", "report_format", type=click.Choice(["parquet", "json"]), default=None,
              help="Report format (default parquet).")  # fmt: skip
@click.option("--deep", is_flag=True, help="Also decode every record (counts, offsets, varints) at decoder speed.")
@click.option("--json", "json_mode", is_flag=True, help="The summary (and any error) as JSON objects on stdout.")
@storage_option
@rsm_config_option
def validate(
    roots: tuple[str, ...], out: str, master: str | None, report_format: str | None, deep: bool, json_mode: bool,
    storage_opts: dict[str, str], rsm: object,
) -> None:
    """Validate every segment under ROOT... (paths or s3://, gs://, hdfs:// URLs) on Spark; write segments and
    partitions reports and a summary to --out.

    Exit 0 all ok, 1 corruption found, 2 usage or I/O error, or a ROOT holding no segment (the library's
    "nothing found", as for ``kafkalog verify``).
    """
    make_output(json_mode=json_mode)  # the job prints its own summary; this renders the command's errors
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CommandError("pyspark is not installed: pip install 'kafkalog[spark]'") from None

    kwargs: dict = {}
    if storage_opts:
        kwargs["options"] = storage_opts
    if report_format:
        kwargs["report_format"] = report_format
    if deep:
        kwargs["deep"] = True
    if json_mode:
        kwargs["json_mode"] = True
    if rsm is not None:
        kwargs["rsm"] = rsm
    click.get_current_context().exit(kafkalog_spark.run_validation(list(roots), out, master, **kwargs))


@spark.command("export")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", required=True, type=click.Path(path_type=str), help="Dir or URL for the Parquet files.")
@click.option("--master", default=None, help="Spark master URL (default: spark-submit's, else local[*]).")
@click.option("--option", "ds_options", multiple=True, metavar="KEY=VALUE",
              help="A kafkalog DataSource option (startingOffsets, endingOffsets, startingTimestamp, "
                   "endingTimestamp, isolation, onCorrupt, ...).")  # fmt: skip
@storage_option
def export(roots: tuple[str, ...], out: str, master: str | None, ds_options: tuple[str, ...],
           storage_opts: dict[str, str]) -> None:  # fmt: skip
    """Export every record under ROOT... to Parquet under --out (topic=T/partition=P dirs), written by the Spark
    tasks with pyarrow; read it back with spark.read.parquet(OUT).

    Exit 0 written, 1 a corrupt batch (onCorrupt=fail), 2 usage or I/O error or nothing to export.
    """
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CommandError("pyspark is not installed: pip install 'kafkalog[spark]'") from None
    options: dict[str, str] = dict(storage_opts)
    for pair in ds_options:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CommandError(f"--option takes KEY=VALUE, not {pair!r}")
        options[key.strip()] = value
    try:  # a bad root fails here, before a JVM starts
        found = discover_segments(list(roots), options=storage_opts)
    except (KafkaLogError, OSError) as exc:
        raise CommandError(str(exc)) from None
    if not found:
        raise CommandError(f"{', '.join(roots)}: no segments found")
    def progress(line: str) -> None:
        click.echo(f"kafkalog spark export: {line}", err=True)

    from pyspark.sql import SparkSession

    had_session = SparkSession.getActiveSession() is not None
    spark_session = kafkalog_spark.get_session(master, "kafkalog-export")
    try:
        files = kafkalog_spark.export_archive(spark_session, list(roots), out, progress=progress, **options)
    except Exception as exc:
        text = str(exc)
        if "CorruptRecordError" not in text:
            raise
        line = next((ln for ln in text.splitlines() if "CorruptRecordError" in ln), text.splitlines()[0])
        raise CommandError(line.strip()[:2000], code=1) from None
    finally:
        if not had_session:
            spark_session.stop()
    click.echo(f"{len(files)} Parquet files under {out}")
