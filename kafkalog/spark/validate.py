"""Validate a whole archive of Kafka partition logs with Spark: one row per segment, one per partition.

The driver only lists file names (:mod:`kafkalog.spark.discovery`); segments are grouped into tasks of similar size
(a segment is never split, a partition dir may span tasks) and checked on the executors with the library: the
``.log`` is mapped with mmap and walked batch by batch (headers and CRC32C; nothing decompressed), and the
indexes get kafkalog's strict check against the batches actually found.

Run as ``python -m kafkalog.spark.validate ROOT... --out DIR [--master URL]`` (or via ``spark-submit``); the CLI's
``kafkalog spark validate`` calls :func:`run_validation`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kafkalog.errors import KafkaLogError
from kafkalog.spark.discovery import SegmentItem, discover_segments, group_for_tasks, index_class

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

_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


@dataclass
class SegmentFacts:
    """What one segment check found; field order is SEGMENT_SCHEMA's."""

    item: SegmentItem
    first_offset: int | None = None
    last_offset: int | None = None
    batch_count: int = 0
    record_count: int = 0
    size_bytes: int = 0
    valid_bytes: int = 0
    invalid_bytes: int = 0
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    codecs: set[str] = field(default_factory=set)
    magics: set[int] = field(default_factory=set)
    index_status: str = "not_checked"
    index_error: str | None = None
    status: str = "ok"
    corrupt_ranges: list[tuple[int, int]] = field(default_factory=list)
    error: str | None = None

    def to_row(self) -> tuple:
        i = self.item
        return (
            i.path, i.partition_dir, i.topic, i.partition, i.base_offset, i.layout, i.dir_state,
            self.first_offset, self.last_offset, self.batch_count, self.record_count, self.size_bytes,
            self.valid_bytes, self.invalid_bytes, self.min_timestamp, self.max_timestamp, sorted(self.codecs),
            sorted(self.magics), self.index_status, self.index_error, self.status,
            [(p, s) for p, s in self.corrupt_ranges], self.error,
        )  # fmt: skip


def check_segment(item: SegmentItem, *, index_check: bool = True) -> SegmentFacts:
    """Check one segment's ``.log`` with :func:`kafkalog.verify.verify_log_file` (and its indexes); never raises
    for bad data or I/O errors.

    The facts are verify's, so this job, ``kafkalog verify`` and ``kafkalog dump`` agree: ``valid_bytes`` and
    ``invalid_bytes`` are the structurally readable prefix and the unreadable tail; ``corrupt_ranges`` lists every
    batch failing its CRC (position, size), the first batch moving offsets backwards, and the unreadable tail.
    """
    from kafkalog.verify import verify_log_file

    facts = SegmentFacts(item, size_bytes=max(item.size_bytes, 0))
    if item.layout == "tiered-aiven" and _aiven_transformed(item):
        facts.status, facts.error = "unreadable", "tiered segment stored compressed/encrypted (see .rsm-manifest)"
        return facts
    try:
        rep = verify_log_file(item.path, include_batches=True)
    except (OSError, KafkaLogError, ValueError) as exc:
        facts.status, facts.error = "unreadable", f"{type(exc).__name__}: {exc}"
        return facts
    facts.size_bytes = rep.file_size
    facts.valid_bytes, facts.invalid_bytes = rep.valid_bytes, rep.invalid_bytes
    facts.first_offset, facts.last_offset = rep.first_offset, rep.last_offset
    facts.batch_count, facts.record_count = rep.batch_count, rep.record_count
    facts.min_timestamp, facts.max_timestamp = rep.min_timestamp, rep.max_timestamp
    errors: list[str] = []
    prev_last = item.base_offset - 1
    backwards_seen = False
    for b in rep.batches:
        facts.codecs.add(b.compression)
        facts.magics.add(b.magic)
        if not b.crc_valid:
            facts.corrupt_ranges.append((b.position, b.size))
        elif not backwards_seen and b.base_offset <= prev_last:
            backwards_seen = True
            facts.corrupt_ranges.append((b.position, b.size))
            errors.append(f"offset {b.base_offset} at position {b.position} does not follow {prev_last}")
        prev_last = max(prev_last, b.last_offset)
    if rep.bad_crc_count:
        errors.insert(0, f"{rep.bad_crc_count} batch(es) fail their CRC, first at position {rep.first_bad_crc_position}")
    if rep.invalid_bytes:
        facts.corrupt_ranges.append((rep.invalid_position, rep.invalid_bytes))
        errors.append(rep.error or f"{rep.invalid_bytes} unreadable bytes at position {rep.invalid_position}")
    if facts.corrupt_ranges or not rep.ok:
        facts.status = "corrupt"
        facts.error = "; ".join(errors) or rep.error or "corrupt"
    if index_check:
        _check_indexes(facts, [b.position for b in rep.batches if b.crc_valid])
    return facts


def _check_indexes(facts: SegmentFacts, starts: list[int]) -> None:
    """Strict checks of .index/.timeindex/.txnindex against the batches found (sets index_status/index_error)."""
    import numpy as np

    item = facts.item
    if item.layout == "tiered-aiven":
        facts.index_status = "not_checked"  # indexes live in one .indexes blob described by the manifest
        return
    next_offset = (facts.last_offset + 1) if facts.last_offset is not None else item.base_offset
    problems: list[str] = []
    missing: list[str] = []
    checks = [
        (".index", item.index_size, "OffsetIndex"),
        (".timeindex", item.timeindex_size, "TimeIndex"),
        (".txnindex", item.txnindex_size, "TransactionIndex"),
    ]
    for suffix, size, cls_name in checks:
        if size < 0:
            if suffix != ".txnindex" and facts.batch_count:
                missing.append(suffix)
            continue
        try:
            idx = index_class(cls_name)(item.sibling(suffix), item.base_offset, writable=False)
        except ImportError:
            continue
        try:
            if cls_name == "OffsetIndex":
                # Entries must point at batch starts. Batch last offsets are not passed: the log cleaner indexes the
                # largest *retained* offset, which can differ from the batch header's last offset (Kafka-written
                # compacted segments would fail that stricter rule).
                idx.strict_check(facts.valid_bytes, np.asarray(starts, dtype=np.int64))
            else:
                idx.strict_check(next_offset)
        except (KafkaLogError, ValueError) as exc:
            problems.append(f"{suffix}: {exc}")
        except OSError as exc:
            problems.append(f"{suffix}: unreadable: {exc}")
        finally:
            idx.close()
    if problems and item.is_last and not _clean_shutdown(item):
        # The active segment of a broker that crashed keeps its preallocated indexes (zero-filled tail entries) or
        # indexes lagging the data; Kafka's unclean-shutdown recovery rebuilds them, so this is not damage.
        facts.index_status, facts.index_error = "stale", "; ".join(problems)
    elif problems:
        facts.index_status, facts.index_error = "corrupt", "; ".join(problems)
    elif missing:
        facts.index_status, facts.index_error = "missing", "missing " + ", ".join(missing) + " (Kafka rebuilds it)"
    else:
        facts.index_status = "ok"


def _clean_shutdown(item: SegmentItem) -> bool:
    """Whether the log dir above the partition dir has Kafka's clean-shutdown marker (then no recovery runs)."""
    logdir = os.path.dirname(os.path.normpath(item.partition_dir))
    return os.path.exists(os.path.join(logdir, ".kafka_cleanshutdown"))


def _aiven_transformed(item: SegmentItem) -> bool:
    manifest = item.sibling(".rsm-manifest")
    try:
        with open(manifest, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    return bool(m.get("compression") or m.get("encryption"))


def _check_group(group: Iterable[SegmentItem], index_check: bool) -> Iterator[tuple]:
    for item in group:
        yield check_segment(item, index_check=index_check).to_row()


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
    """One row per partition dir (columns: PARTITION_SCHEMA) from :func:`validate_archive`'s DataFrame.

    Segments are put in base-offset order; an overlap (a segment starting at or below the previous one's last
    offset) is an error, a gap is reported (compaction and retention legitimately leave gaps). When the partition
    dir's parent holds Kafka's checkpoints, the recovery point, log start offset and high watermark must not lie
    beyond the data.
    """
    cols = ["partition_dir", "topic", "partition", "base_offset", "first_offset", "last_offset", "status"]
    return df.select(*cols).groupBy("partition_dir").applyInPandas(_continuity_pdf, PARTITION_SCHEMA)


def _continuity_pdf(pdf):
    import pandas as pd

    rows = pdf.sort_values("base_offset").to_dict("records")
    return pd.DataFrame([continuity_of(rows)], columns=[c.split(" ")[0] for c in PARTITION_SCHEMA.split(", ")])


def continuity_of(rows: list[dict]) -> tuple:
    """The PARTITION_SCHEMA row for one partition dir's segment rows (dicts sorted by base offset)."""
    first = rows[0]
    pdir, topic, partition = first["partition_dir"], first["topic"], int(first["partition"])
    gaps: list[tuple[int, int]] = []
    overlaps: list[tuple[int, int]] = []
    problems: list[str] = []
    corrupt = sum(1 for r in rows if r["status"] != "ok")
    prev_last: int | None = None
    log_start = None
    log_end = None
    for r in rows:
        lo = _int_or_none(r["first_offset"])
        hi = _int_or_none(r["last_offset"])
        base = int(r["base_offset"])
        start = lo if lo is not None else base
        if log_start is None and lo is not None:
            log_start = lo
        if prev_last is not None:
            if base <= prev_last:
                overlaps.append((base, prev_last))
            elif start > prev_last + 1:
                gaps.append((prev_last + 1, start - 1))
        if hi is not None:
            prev_last = hi if prev_last is None else max(prev_last, hi)
    if prev_last is not None:
        log_end = prev_last + 1
    elif rows:
        log_end = int(rows[-1]["base_offset"])
    if log_start is None:
        log_start = int(rows[0]["base_offset"])
    recovery, lso, hwm = _checkpoints(pdir, topic, partition)
    if overlaps:
        problems.append(f"{len(overlaps)} segment(s) overlap the previous one")
    if gaps:
        problems.append(f"{len(gaps)} offset gap(s) between segments (normal after compaction)")
    if corrupt:
        problems.append(f"{corrupt} segment(s) not ok")
    ck = []
    if recovery is not None and log_end is not None and recovery > log_end:
        ck.append(f"recovery point {recovery} is beyond the log end offset {log_end}")
    if lso is not None and log_end is not None and lso > log_end:
        ck.append(f"log start offset checkpoint {lso} is beyond the log end offset {log_end}")
    if hwm is not None and log_end is not None and hwm > log_end:
        ck.append(f"high watermark {hwm} is beyond the log end offset {log_end}")
    problems.extend(ck)
    if corrupt:
        status = "corrupt"
    elif overlaps:
        status = "overlap"
    elif ck:
        status = "checkpoint_mismatch"
    elif gaps:
        status = "gap"
    else:
        status = "ok"
    return (
        pdir, topic, partition, len(rows), corrupt, log_start, log_end, gaps, overlaps, recovery, lso, hwm, status,
        problems,
    )  # fmt: skip


def _int_or_none(v) -> int | None:
    if v is None:
        return None
    try:
        if isinstance(v, float) and math.isnan(v):
            return None
    except TypeError:
        pass
    return int(v)


def _checkpoints(partition_dir: str, topic: str, partition: int) -> tuple[int | None, int | None, int | None]:
    """(recovery point, log start offset, high watermark) from the log dir's checkpoints, None where absent."""
    from kafkalog.checkpoint import read_offset_checkpoint

    logdir = os.path.dirname(os.path.normpath(partition_dir))
    out: list[int | None] = []
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        path = os.path.join(logdir, name)
        value = None
        if os.path.isfile(path):
            try:
                value = read_offset_checkpoint(path).get((topic, partition))
            except (KafkaLogError, OSError):
                value = None
        out.append(value)
    return out[0], out[1], out[2]


# --------------------------------------------------------------------------------------------------- the job


def summarize(seg_rows: list, part_rows: list) -> str:
    """A short human summary of the two reports (rows as pyspark Rows or dicts)."""
    get = _getter
    n = len(seg_rows)
    by_status: dict[str, int] = {}
    for r in seg_rows:
        by_status[get(r, "status")] = by_status.get(get(r, "status"), 0) + 1
    idx_bad = [r for r in seg_rows if get(r, "index_status") == "corrupt"]
    total = sum(get(r, "size_bytes") or 0 for r in seg_rows)
    invalid = sum(get(r, "invalid_bytes") or 0 for r in seg_rows)
    lines = [
        f"kafkalog archive validation: {n} segment(s), {len(part_rows)} partition dir(s), {total} bytes",
        "segments: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())),
        f"invalid bytes: {invalid}; corrupt indexes: {len(idx_bad)}",
    ]
    p_status: dict[str, int] = {}
    for r in part_rows:
        p_status[get(r, "status")] = p_status.get(get(r, "status"), 0) + 1
    lines.append("partitions: " + ", ".join(f"{k} {v}" for k, v in sorted(p_status.items())))
    bad = [r for r in seg_rows if get(r, "status") != "ok"]
    for r in bad[:20]:
        ranges = ", ".join(f"{p}+{s}" for p, s in (tuple(x) for x in get(r, "corrupt_ranges") or []))
        lines.append(f"  {get(r, 'status').upper()} {get(r, 'path')}: {get(r, 'error')} [{ranges}]")
    for r in idx_bad[:20]:
        lines.append(f"  INDEX {get(r, 'path')}: {get(r, 'index_error')}")
    for r in part_rows:
        if get(r, "status") not in ("ok", "gap"):
            lines.append(f"  PARTITION {get(r, 'partition_dir')}: {'; '.join(get(r, 'problems') or [])}")
    if len(bad) > 20:
        lines.append(f"  ... and {len(bad) - 20} more segment(s)")
    return "\n".join(lines) + "\n"


def _getter(r, name: str):
    return r[name] if isinstance(r, dict) else getattr(r, name)


def exit_code(seg_rows: list, part_rows: list) -> int:
    """1 when any segment is not ok, any index is corrupt, or a partition overlaps/contradicts its checkpoints."""
    get = _getter
    if any(get(r, "status") != "ok" or get(r, "index_status") == "corrupt" for r in seg_rows):
        return 1
    if any(get(r, "status") not in ("ok", "gap") for r in part_rows):
        return 1
    return 0


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
