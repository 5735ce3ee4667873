"""``kafkalog spark validate``: the archive validation job, delegated to ``kafkalog.spark.run_validation``."""

from __future__ import annotations

import click

from .errors import CommandError


@click.group()
def spark() -> None:
    """Spark jobs over archives of Kafka log dirs (needs the spark extra)."""


@spark.command("validate")
@click.argument("roots", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--out", required=True, type=click.Path(path_type=str), help="Directory for the parquet reports.")
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
def validate(roots: tuple[str, ...], out: str, master: str | None) -> None:
    """Validate every segment under ROOT... on Spark; write segments/partitions reports and a summary to --out.

    Exit 0 all ok, 1 corruption found, 2 usage or I/O error.
    """
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise CommandError("pyspark is not installed: pip install 'kafkalog[spark]'") from None
    from kafkalog.spark import run_validation

    click.get_current_context().exit(run_validation(list(roots), out, master))
