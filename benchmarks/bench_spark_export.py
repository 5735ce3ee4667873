"""Export to Parquet and tiny segments, the DataSource sections of ``bench_spark.py`` (``--sections export,tiny``)
that compare it with other paths to the same records: ``export_archive`` against the DataSource +
``df.write.parquet``, queries on the export against the same queries on the archive, and 1,000 tiny segments
against the same records in one segment. Run them through ``bench_spark.py``, which makes the archive."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from spark_bench_common import aggregates, best_of, in_turns, load_average

from kafkalog.archive.discovery import discover_segments


def export_section(scan_roots: list[str], workdir: Path, rounds: int) -> None:
    """export_archive vs the DataSource + ``df.write.parquet`` (local[2], same records, same layouts, best of
    ``rounds``, the two in turns), then queries on the export vs on the archive."""
    from kafkalog.spark import export_archive, get_session, register

    items = discover_segments(scan_roots)
    total = sum(max(i.size_bytes, 0) for i in items)
    topic = items[0].topic
    spark = get_session("local[2]", "bench-export")
    register(spark)
    ours: dict[str, float] = {}
    theirs: dict[str, float] = {}
    try:
        ds = spark.read.format("kafkalog").load(scan_roots)
        n, v = aggregates(ds)  # warm: workers, imports
        point = n // len(scan_roots) // 2  # an offset in the middle of the first partition dir

        def ours_once(layout: str) -> float:
            out = workdir / f"ours-{layout}"
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            r = export_archive(spark, scan_roots, str(out), partition_by=("topic", "partition") if layout == "dirs"
                               else ())  # fmt: skip
            took = time.perf_counter() - t
            assert r.rows == n, (r.rows, n)
            return took

        def theirs_once(layout: str) -> float:
            out = workdir / f"theirs-{layout}"
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            w = spark.read.format("kafkalog").load(scan_roots).write
            (w.partitionBy("topic", "partition") if layout == "dirs" else w).parquet(str(out))
            return time.perf_counter() - t

        for layout in ("dirs", "flat"):
            ours_once(layout)  # warm both paths once
            theirs_once(layout)
            ours[layout] = theirs[layout] = float("inf")
            for _ in range(rounds):
                ours[layout] = min(ours[layout], ours_once(layout))
                theirs[layout] = min(theirs[layout], theirs_once(layout))
        exported = spark.read.parquet(str(workdir / "ours-dirs"))
        assert aggregates(exported) == (n, v)
        where = f"topic = '{topic}' AND partition = {items[0].partition} AND offset = {point}"
        queries = {
            "count+sum(length(value))": lambda df: aggregates(df),
            "point filter": lambda df: len(df.filter(where).collect()),
            "count(*)": lambda df: df.count(),  # Parquet: footers only, Spark's cost per query and per file
            # queries on the narrow columns, which Parquet reads alone and the DataSource decodes with the rest
            "max(timestamp) by partition": lambda df: tuple(sorted(
                tuple(r) for r in df.groupBy("topic", "partition").agg({"timestamp": "max"}).collect())),
            "count by key": lambda df: tuple(sorted(tuple(r) for r in df.groupBy("key").count().collect())),
        }
        q_results = []
        for label, q in queries.items():
            # one DataFrame each, queried again and again, as the queries that follow an export are
            frames = {"archive": spark.read.format("kafkalog").load(scan_roots)}
            frames.update({lay: spark.read.parquet(str(workdir / f"ours-{lay}")) for lay in ("dirs", "flat")})
            answers = {q(df) for df in frames.values()}
            assert len(answers) == 1, (label, answers)
            best = dict.fromkeys(frames, float("inf"))
            for _ in range(rounds):  # in turns
                for name, df in frames.items():
                    best[name] = min(best[name], best_of(lambda q=q, df=df: q(df), 1)[0])
            q_results.append((label, best, {name: df.rdd.getNumPartitions() for name, df in frames.items()}))
    finally:
        spark.stop()
    size = sum(p.stat().st_size for p in (workdir / "ours-dirs").rglob("*.parquet"))
    print(f"export (local[2]): {n} records, {total / 1e6:.1f} MB of segments in {len(items)} segments -> "
          f"{size / 1e6:.1f} MB of Parquet; load {load_average():.2f} (best of {rounds})")
    for layout, label in (("dirs", "topic=/partition= dirs"), ("flat", "flat")):
        print(f"  {label:<24} export_archive {ours[layout]:.2f}s ({n / ours[layout] / 1e6:.2f}M rows/s), DataSource + "
              f"write.parquet {theirs[layout]:.2f}s: {ours[layout] / theirs[layout]:.2f}x (goal <= 0.5x)")
    files = {lay: len(list((workdir / f"ours-{lay}").rglob("*.parquet"))) for lay in ("dirs", "flat")}
    for label, best, tasks in q_results:
        a_s = best["archive"]
        print(f"  {label:<28} archive (DataSource, {tasks['archive']} tasks) {a_s:.2f}s; export "
              + "; ".join(f"{lay} ({files[lay]} files, {tasks[lay]} tasks) {best[lay]:.2f}s: {a_s / best[lay]:.1f}x faster"
                          for lay in ("dirs", "flat")) + " (goal >= 2x)")


def tiny_section(workdir: Path, rounds: int, n_segments: int = 1000, *, records: int = 30, value_bytes: int = 200,
                 segment_bytes: int = 8 << 10, goal: str = "") -> None:  # fmt: skip
    """``n_segments`` tiny segments (one ``records``-record batch of ``value_bytes`` values each, segments of
    ``segment_bytes``) against the same records in one segment: ``count`` + ``sum(length(value))`` on local[2],
    in turns, best of ``rounds`` after a warm-up query each. ``goal``: a prefix for the ratio's line."""
    from kafkalog.log import Log
    from kafkalog.spark import get_session, register

    shutil.rmtree(workdir, ignore_errors=True)
    for name, seg in (("tiny-0", segment_bytes), ("one-0", 1 << 30)):
        with Log.open(workdir / name, {"segment.bytes": str(seg)}) as log:
            for i in range(n_segments):
                log.append_as_leader([(b"k%d" % j, b"v" * value_bytes) for j in range(records)], timestamp=1000 + i)
            log.flush()
    segments = len(list((workdir / "tiny-0").glob("*.log")))
    spark = get_session("local[2]", "bench-tiny")
    register(spark)
    try:
        frames = {name: spark.read.format("kafkalog").schema("offset long, value binary").load(str(workdir / name))
                  for name in ("tiny-0", "one-0")}  # fmt: skip
        for df in frames.values():
            aggregates(df)  # warm-up: the planner worker, the JVM's first query
        best, tasks = in_turns(frames, rounds)
    finally:
        spark.stop()
    print(f"tiny segments, local[2], {n_segments * records} records; load {load_average():.2f}")
    print(f"{goal + ' ' if goal else '  '}{segments} segments: {best['tiny-0']:.2f}s ({tasks['tiny-0']} tasks); "
          f"one segment: {best['one-0']:.2f}s ({tasks['one-0']} tasks): {best['tiny-0'] / best['one-0']:.1f}x "
          f"(goal <= 3x); load {load_average():.2f}")
