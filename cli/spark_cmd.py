"""``kafkalog spark validate``: the archive validation job, delegated to ``kafkalog.spark.run_validation``."""

from __future__ import annotations

import click

from kafkalog.errors import KafkaLogError
from kafkalog.storage import parse_storage_options

from .main import CommandError


@click.group()
def spark() -> None:
    """Spark jobs over archives of Kafka log dirs (needs the spark extra)."""


@spark.command("validate")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", required=True, type=click.Path(path_type=str), help="Dir or URL for the reports.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--format", "report_format", type=click.Choice(["parquet", "json"]), default=None,
              help="Report format (default parquet).")  # fmt: skip
@click.option("--storage-option", "storage_opts", multiple=True, metavar="KEY=VALUE",
              help="Credentials/endpoint for remote URLs (endpoint_url, region, access_key, secret_key, ...).")  # fmt: skip
def validate(
    roots: tuple[str, ...], out: str, master: str | None, report_format: str | None, storage_opts: tuple[str, ...]
) -> None:
    """Validate every segment under ROOT... (paths or s3://, gs://, hdfs:// URLs) on Spark; write segments and
    partitions reports and a summary to --out.

    Exit 0 all ok, 1 corruption found, 2 usage or I/O error.
    """
    try:
        options = parse_storage_options(storage_opts)
    except KafkaLogError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CommandError("pyspark is not installed: pip install 'kafkalog[spark]'") from None
    from kafkalog.spark import run_validation

    kwargs: dict = {}
    if options:
        kwargs["options"] = options
    if report_format:
        kwargs["report_format"] = report_format
    click.get_current_context().exit(run_validation(list(roots), out, master, **kwargs))
