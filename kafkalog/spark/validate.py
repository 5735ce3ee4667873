"""Validate a whole archive of Kafka partition logs with Spark: one row per segment, one per partition.

This module only distributes: the driver lists file names (:func:`kafkalog.discovery.discover_segments`), segments
are grouped into tasks of similar size (a segment is never split, a partition dir may span tasks) and each is checked
on the executors with :func:`kafkalog.verify.verify_segment`; partition rows come from
:func:`kafkalog.verify.verify_partition`. The checks, the result types, the summary and the exit code are the
library's (:mod:`kafkalog.verify`), shared with ``kafkalog verify``.

Run as ``python -m kafkalog.spark.validate ROOT... --out DIR [--master URL]`` (or via ``spark-submit``); the CLI's
``kafkalog spark validate`` calls :func:`run_validation`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterable, Iterator, Sequence

from kafkalog.discovery import SegmentItem, discover_segments
from kafkalog.errors import KafkaLogError
from kafkalog.verify import (
    PARTITION_FIELDS,
    exit_code,
    summarize,
    verify_partition,
    verify_segment,
)

__all__ = [
    "PARTITION_SCHEMA",
    "SEGMENT_SCHEMA",
    "group_for_tasks",
    "main",
    "partition_continuity",
    "run_validation",
    "validate_archive",
]

SEGMENT_SCHEMA = (
    "path string, partition_dir string, topic string, partition int, base_offset long, layout string, "
    "dir_state string, first_offset long, last_offset long, batch_count long, record_count long, size_bytes long, "
    "valid_bytes long, invalid_bytes long, min_timestamp long, max_timestamp long, codecs array<string>, "
    "magics array<int>, index_status string, index_error string, status string, "
    "corrupt_ranges array<struct<position:long,size:long>>, error string"
)

PARTITION_SCHEMA = (
    "partition_dir string, topic string, partition int, segment_count long, corrupt_segments long, "
    "log_start_offset long, log_end_offset long, gaps array<struct<from_offset:long,to_offset:long>>, "
    "overlaps array<struct<segment_base_offset:long,previous_last_offset:long>>, "
    "checkpoint_recovery_point long, checkpoint_log_start_offset long, checkpoint_high_watermark long, "
    "status string, problems array<string>"
)
# The two DDLs type the library's result rows: column names and order are ``kafkalog.verify.SEGMENT_FIELDS`` and
# ``PARTITION_FIELDS`` (``SegmentReport.to_row()``, ``PartitionReport.to_row()``); tests/test_verify.py checks it.


def _check_group(group: Iterable[SegmentItem], index_check: bool) -> Iterator[tuple]:
    for item in group:
        yield verify_segment(item, index_check=index_check).to_row()


def group_for_tasks(items: list[SegmentItem], n_groups: int) -> list[list[SegmentItem]]:
    """Split segments into ``n_groups`` groups of similar total size (longest-processing-time-first).

    Segments stay the unit of work (a group never splits one, a dir may span groups); grouping only amortises
    per-task overhead when an archive has many small segments.
    """
    n_groups = max(1, min(n_groups, len(items)))
    bins: list[list[SegmentItem]] = [[] for _ in range(n_groups)]
    loads = [0] * n_groups
    for item in sorted(items, key=lambda s: -max(s.size_bytes, 0)):
        i = loads.index(min(loads))
        bins[i].append(item)
        loads[i] += max(item.size_bytes, 0) + 4096  # a fixed cost per segment: open, mmap, index checks
    return [b for b in bins if b]


def _n_tasks(items: Sequence[SegmentItem], parallelism: int) -> int:
    """Tasks of ~32 MiB, at least one per core and at most 4 per core (enough to even out skew) unless the
    archive is big (then ~128 MiB each): a Spark task costs tens of ms, a 32 MiB segment group ~100 ms to check."""
    total = sum(max(i.size_bytes, 0) + 4096 for i in items)
    n = min(max(parallelism, math.ceil(total / (32 << 20))), parallelism * 4)
    n = max(n, math.ceil(total / (128 << 20)))
    return max(1, min(len(items), n))


def validate_archive(spark, roots, *, index_check: bool = True):
    """A DataFrame with one row per segment under ``roots`` (columns: SEGMENT_SCHEMA).

    ``status`` is ``ok``, ``corrupt`` (see ``corrupt_ranges``/``error``) or ``unreadable``; ``index_status`` is
    ``ok``, ``missing``, ``corrupt`` or ``not_checked``. The DataFrame is lazy: each action re-runs the checks, so
    cache it when you use it twice.
    """
    items = discover_segments(roots)
    sc = spark.sparkContext
    if not items:
        return spark.createDataFrame([], SEGMENT_SCHEMA)
    groups = group_for_tasks(items, _n_tasks(items, sc.defaultParallelism))
    rdd = sc.parallelize(groups, len(groups)).flatMap(lambda g: _check_group(g, index_check))
    return spark.createDataFrame(rdd, SEGMENT_SCHEMA)


def partition_continuity(df):
    """One row per partition dir (columns: PARTITION_SCHEMA) from :func:`validate_archive`'s DataFrame: each
    group of segment rows goes through :func:`kafkalog.verify.verify_partition` (gaps reported, overlaps and
    checkpoints beyond the data are errors)."""
    cols = ["partition_dir", "topic", "partition", "base_offset", "first_offset", "last_offset", "status"]
    return df.select(*cols).groupBy("partition_dir").applyInPandas(_continuity_pdf, PARTITION_SCHEMA)


def _continuity_pdf(pdf):
    import pandas as pd

    rows = pdf.sort_values("base_offset").to_dict("records")
    return pd.DataFrame([verify_partition(rows).to_row()], columns=list(PARTITION_FIELDS))


def run_validation(roots: str | Sequence[str], out: str, master: str | None = None, *, index_check: bool = True) -> int:
    """Validate ``roots``, write ``out/segments.parquet``, ``out/partitions.parquet`` and ``out/summary.txt``,
    print the summary; return 0 (all ok), 1 (corruption found) or 2 (usage or I/O error)."""
    if isinstance(roots, str):
        roots = [roots]
    try:
        discover_segments(roots)  # fail fast on a bad root, before starting a JVM
    except KafkaLogError as exc:
        print(f"kafkalog spark validate: {exc}", file=sys.stderr)
        return 2
    from pyspark.sql import SparkSession

    from kafkalog.spark.session import get_session

    had_session = SparkSession.getActiveSession() is not None
    spark = get_session(master or "local[*]", "kafkalog-validate")
    try:
        seg_df = validate_archive(spark, list(roots), index_check=index_check).cache()
        part_df = partition_continuity(seg_df).cache()
        os.makedirs(out, exist_ok=True)
        seg_df.coalesce(1).write.mode("overwrite").parquet(os.path.join(out, "segments.parquet"))
        part_df.coalesce(1).write.mode("overwrite").parquet(os.path.join(out, "partitions.parquet"))
        seg_rows = seg_df.select(
            "path", "status", "index_status", "index_error", "size_bytes", "invalid_bytes", "error", "corrupt_ranges"
        ).collect()
        part_rows = part_df.select("partition_dir", "status", "problems").collect()
        text = summarize(seg_rows, part_rows)
        with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as f:
            f.write(text)
        sys.stdout.write(text)
        return exit_code(seg_rows, part_rows)
    except OSError as exc:
        print(f"kafkalog spark validate: {exc}", file=sys.stderr)
        return 2
    finally:
        if not had_session:
            spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kafkalog.spark.validate ROOT... --out DIR [--master URL] [--no-index-check]``."""
    parser = argparse.ArgumentParser(prog="kafkalog spark validate", description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="+", metavar="ROOT", help="log dir, partition dir, segment or tree of them")
    parser.add_argument("--out", required=True, help="directory for segments.parquet, partitions.parquet, summary.txt")
    parser.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    parser.add_argument("--no-index-check", action="store_true", help="skip the .index/.timeindex/.txnindex checks")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    return run_validation(args.roots, args.out, args.master, index_check=not args.no_index_check)


if __name__ == "__main__":
    sys.exit(main())
