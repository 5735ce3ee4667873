"""``kafkalog spark validate``: the archive validation job, delegated to ``kafkalog.spark.run_validation``;
``kafkalog spark export`` lives in :mod:`.spark_export`."""

from __future__ import annotations

import click

import kafkalog.spark as kafkalog_spark  # its functions import pyspark when called

from .errors import CommandError
from .output import make_output
from .spark_export import export
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
@click.option("--timings", is_flag=True,
              help="Print where the wall time went (start, plan, JVM, jobs, reports, stop) on stderr, or in the "
                   "--json summary.")  # fmt: skip
@storage_option
@rsm_config_option
def validate(
    roots: tuple[str, ...], out: str, master: str | None, report_format: str | None, deep: bool, json_mode: bool,
    timings: bool, storage_opts: dict[str, str], rsm: object,
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
    if timings:
        kwargs["timings"] = True
    click.get_current_context().exit(kafkalog_spark.run_validation(list(roots), out, master, **kwargs))


spark.add_command(export)
