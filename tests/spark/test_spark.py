"""Spark: the archive validation job and the ``kafkalog`` DataSource, against Kafka's golden partition logs.

One local[2] SparkSession for the module, small inputs: the whole file should take a minute or two.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, load_manifest, needs_golden

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.spark, needs_golden]



def _copy_logdir(dst: Path, cases: list[str] | None = None) -> Path:
    """A writable copy of golden/logdir (root checkpoint files + the chosen partition dirs)."""
    assert GOLDEN is not None
    src = GOLDEN / "logdir"
    dst.mkdir(parents=True)
    for entry in src.iterdir():
        if entry.is_file():
            shutil.copyfile(entry, dst / entry.name)
        elif cases is None or entry.name in cases:
            (dst / entry.name).mkdir()
            for f in entry.iterdir():
                shutil.copyfile(f, dst / entry.name / f.name)
    return dst


def _manifest_segments(case: str) -> dict[int, dict]:
    return {s["baseOffset"]: s for s in load_manifest(f"manifests/{case}.json")["segments"]}


def _manifest_records(case: str) -> list[tuple]:
    out = []
    for seg in load_manifest(f"manifests/{case}.json")["segments"]:
        for b in seg["log"]["batches"]:
            for r in b["records"]:
                headers = [(h["key"], h["value"]) for h in r["headers"]]
                out.append((r["offset"], r["timestamp"], r["key"], r["value"], headers))
    return out


def _rows_as_manifest(rows) -> list[tuple]:
    def hx(b):
        return None if b is None else bytes(b).hex()

    return [(r.offset, r.timestamp, hx(r.key), hx(r.value), [(h.key, hx(h.value)) for h in r.headers]) for r in rows]


# --------------------------------------------------------------------------------------------- validation job


def test_validate_golden_logdir_is_ok_and_matches_manifests(spark, tmp_path: Path) -> None:
    from kafkalog.spark import partition_continuity, validate_archive

    root = _copy_logdir(tmp_path / "logdir")
    df = validate_archive(spark, [str(root)]).cache()
    rows = df.collect()
    cases = sorted(p.name for p in root.iterdir() if p.is_dir())
    assert {Path(r.partition_dir).name for r in rows} == set(cases)
    for r in rows:
        assert r.status == "ok", (r.path, r.error)
        assert r.index_status == "ok", (r.path, r.index_error)
        assert r.corrupt_ranges == [] and r.invalid_bytes == 0 and r.valid_bytes == r.size_bytes
        seg = _manifest_segments(Path(r.partition_dir).name)[r.base_offset]
        batches = seg["log"]["batches"]
        assert r.batch_count == len(batches)
        assert r.record_count == sum(b["recordCount"] for b in batches)
        if batches:
            assert (r.first_offset, r.last_offset) == (batches[0]["baseOffset"], batches[-1]["lastOffset"])
            assert r.max_timestamp == max(b["maxTimestamp"] for b in batches)
            assert set(r.codecs) == {b["compression"] for b in batches}
        assert r.topic == Path(r.partition_dir).name.rsplit("-", 1)[0] and r.partition == 0
    parts = {Path(p.partition_dir).name: p for p in partition_continuity(df).collect()}
    assert set(parts) == set(cases)
    for name, p in parts.items():
        scenario = load_manifest(f"manifests/{name}.json")["scenario"]
        assert p.status == "ok", (name, p.problems)
        assert p.log_end_offset == scenario["logEndOffset"]
        assert p.segment_count == scenario["segments"]
        assert p.checkpoint_recovery_point == scenario["recoveryPoint"]
    assert parts["golden-deleterecords-0"].checkpoint_log_start_offset == 28


def test_validate_corrupted_copies_agree_with_verify(spark, tmp_path: Path) -> None:
    from kafkalog.spark import validate_archive
    from kafkalog.spark.validate import main
    from kafkalog.verify import verify_log_file

    root = _copy_logdir(tmp_path / "logdir", ["golden-none-0", "golden-segments-0", "golden-gzip-0"])
    # a flipped byte inside the 5th batch of golden-none: that batch's CRC fails, the rest stays readable
    none_log = root / "golden-none-0" / "00000000000000000000.log"
    bad_batch = _manifest_segments("golden-none-0")[0]["log"]["batches"][4]
    data = bytearray(none_log.read_bytes())
    data[bad_batch["position"] + bad_batch["sizeInBytes"] - 3] ^= 0xFF
    none_log.write_bytes(bytes(data))
    # a cut tail on the last segment of golden-segments: its last batch becomes unreadable
    seg_base = max(_manifest_segments("golden-segments-0"))
    seg_log = root / "golden-segments-0" / f"{seg_base:020d}.log"
    last_batch = _manifest_segments("golden-segments-0")[seg_base]["log"]["batches"][-1]
    with open(seg_log, "r+b") as f:
        f.truncate(seg_log.stat().st_size - 5)

    rows = {r.path: r for r in validate_archive(spark, str(root)).collect()}
    r = rows[str(none_log)]
    assert r.status == "corrupt"
    assert [tuple(x) for x in r.corrupt_ranges] == [(bad_batch["position"], bad_batch["sizeInBytes"])]
    t = rows[str(seg_log)]
    assert t.status == "corrupt"
    assert [tuple(x) for x in t.corrupt_ranges] == [(last_batch["position"], last_batch["sizeInBytes"] - 5)]
    assert (t.valid_bytes, t.invalid_bytes) == (last_batch["position"], last_batch["sizeInBytes"] - 5)
    for path in (none_log, seg_log):
        rep = verify_log_file(path)
        row = rows[str(path)]
        assert (row.valid_bytes, row.invalid_bytes, row.batch_count, row.record_count) == (
            rep.valid_bytes, rep.invalid_bytes, rep.batch_count, rep.record_count
        )  # fmt: skip
        bad = [(b.position, b.size) for b in rep.batches if not b.crc_valid]
        tail = [(rep.invalid_position, rep.invalid_bytes)] if rep.invalid_bytes else []
        assert [tuple(x) for x in row.corrupt_ranges] == bad + tail
    others = [r for p, r in rows.items() if p not in (str(none_log), str(seg_log))]
    assert others and all(r.status == "ok" for r in others)

    # the command-line entry: Parquet reports, a summary, exit code 1 on corruption and 0 on a clean archive
    out = tmp_path / "report"
    assert main([str(root), "--out", str(out)]) == 1
    assert (out / "segments.parquet").is_dir() and (out / "partitions.parquet").is_dir()
    summary = (out / "summary.txt").read_text()
    assert "corrupt 2" in summary and str(none_log) in summary
    report = spark.read.parquet(str(out / "segments.parquet"))
    assert report.filter("status = 'corrupt'").count() == 2
    clean = _copy_logdir(tmp_path / "clean", ["golden-gzip-0"])
    assert main([str(clean), "--out", str(tmp_path / "clean-report")]) == 0
    assert main([str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    # an unreadable segment (here a dangling symlink: FileNotFoundError on the executor) is an I/O error: exit 2,
    # as `kafkalog verify` says for the same dir
    from click.testing import CliRunner
    from kafkalog_cli.main import main as cli_main

    (clean / "golden-gzip-0" / f"{10**12:020d}.log").symlink_to(tmp_path / "nowhere.log")
    unreadable = {r.path: r for r in validate_archive(spark, str(clean)).collect()}
    assert [r.status for r in unreadable.values()].count("unreadable") == 1
    assert main([str(clean), "--out", str(tmp_path / "unreadable-report")]) == 2
    assert CliRunner().invoke(cli_main, ["verify", str(clean)]).exit_code == 2


def test_report_status_is_verifys_segment_verdict(spark, tmp_path: Path) -> None:
    """``segments.parquet``'s ``status`` is ``kafkalog verify``'s verdict, not the ``.log``'s alone: a segment
    whose only damage is a corrupt ``.index`` or ``.txnindex`` is corrupt, one with a missing time index a warning;
    the summary's counts are verify's."""
    import pyarrow.parquet as pq
    from click.testing import CliRunner
    from kafkalog_cli.main import main as cli_main

    from kafkalog.spark.validate import main

    root = _copy_logdir(tmp_path / "logdir", ["golden-segments-0", "golden-txn-0"])
    index = root / "golden-segments-0" / "00000000000000000000.index"
    data = bytearray(index.read_bytes())
    data[0:8], data[8:16] = data[8:16], data[0:8]  # two entries swapped: out of order
    index.write_bytes(bytes(data))
    txn = root / "golden-txn-0" / "00000000000000000000.txnindex"
    txn.write_bytes(txn.read_bytes()[:-5])  # not a whole number of entries
    (root / "golden-segments-0" / "00000000000000000040.timeindex").unlink()
    res = CliRunner().invoke(cli_main, ["verify", str(root), "--json"])
    objs = [json.loads(x) for x in res.stdout.splitlines()]
    verify = {o["path"]: o["status"] for o in objs if o["type"] == "segment"}
    (summary,) = [o for o in objs if o["type"] == "summary"]
    out = tmp_path / "report"
    assert main([str(root), "--out", str(out)]) == res.exit_code == 1
    rows = pq.read_table(out / "segments.parquet").to_pylist()
    assert {r["path"]: r["status"] for r in rows} == verify
    assert sorted(verify.values()).count("ok") == len(verify) - 3
    logs = {str(index)[: -len(".index")] + ".log", str(txn)[: -len(".txnindex")] + ".log"}
    assert {r["path"] for r in rows if r["status"] == "corrupt"} == logs
    assert all(r["log_status"] == "ok" for r in rows)
    assert "segments: corrupt 2, ok 13, warning 1" in (out / "summary.txt").read_text()
    assert summary["counts"]["segment"] == {"corrupt": 2, "ok": 13, "warning": 1}


def test_run_validation_continuity_on_the_driver_matches_the_spark_job(spark, tmp_path: Path, monkeypatch,
                                                                      capsys) -> None:  # fmt: skip
    """A small local archive's partition rows come from the driver (no second job): the same rows, summary and exit
    code as :func:`partition_continuity`'s Spark job, whose path larger or remote archives keep; ``timings``
    adds the phases to the JSON summary."""
    import json

    import kafkalog.spark.validate as v
    from kafkalog.spark import partition_continuity, validate_archive

    root = _copy_logdir(tmp_path / "logdir", ["golden-none-0", "golden-segments-0", "golden-gzip-0"])
    log = root / "golden-segments-0" / f"{max(_manifest_segments('golden-segments-0')):020d}.log"
    with open(log, "r+b") as f:  # one corrupt partition among ok ones
        f.truncate(log.stat().st_size - 5)
    job_rows = partition_continuity(validate_archive(spark, str(root))).collect()

    def run(limit: int, out: str, timings: bool = False) -> tuple[int, dict, list[str], list[str]]:
        monkeypatch.setattr(v, "DRIVER_CONTINUITY_MAX_DIRS", limit)
        code = v.run_validation([str(root)], str(tmp_path / out), report_format="json", json_mode=True,
                                timings=timings)  # fmt: skip
        summary = json.loads(capsys.readouterr().out)
        lines = (tmp_path / out / "partitions.json" / "part-00000.json").read_text().splitlines()
        return code, summary, sorted(lines), (tmp_path / out / "summary.txt").read_text().splitlines()

    job = run(0, "job")
    driver = run(v.DRIVER_CONTINUITY_MAX_DIRS, "driver", timings=True)
    assert job[0] == driver[0] == 1
    assert len(driver[2]) == 3 and driver[2] == job[2]
    assert sorted(json.loads(x)["status"] for x in driver[2]) == ["corrupt", "ok", "ok"]
    assert sorted(driver[3]) == sorted(job[3])  # the same lines (the job's partition order is its shuffle's)
    assert sorted(json.dumps(r.asDict(recursive=True)) for r in job_rows) == sorted(
        json.dumps(d) for d in map(json.loads, driver[2]))  # fmt: skip
    timings = driver[1].pop("timings")
    assert job[1] == {**driver[1], "out": str(tmp_path / "job")}
    assert "timings" not in job[1]
    assert {"plan", "session", "check_job", "continuity", "reports", "total"} <= set(timings)
    assert "stop" not in timings  # the caller's session is left running
    assert timings["total"] >= timings["check_job"] > 0


def test_reports_to_arrow_keeps_every_field(tmp_path: Path) -> None:
    """The job's Arrow results hold exactly ``SegmentReport.to_row()`` (no Spark session needed)."""
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.spark.validate import SEGMENT_SCHEMA, _n_tasks, group_for_tasks, reports_to_arrow
    from kafkalog.verify import SEGMENT_FIELDS, verify_segment

    root = _copy_logdir(tmp_path / "logdir", ["golden-none-0", "golden-segments-0"])
    log = root / "golden-none-0" / "00000000000000000000.log"
    with open(log, "r+b") as f:
        f.truncate(log.stat().st_size - 7)
    (root / "golden-none-0" / f"{10**12:020d}.log").symlink_to(tmp_path / "nowhere.log")
    items = discover_segments(str(root))
    reports = [verify_segment(i) for i in items]
    assert {r.status for r in reports} == {"ok", "corrupt", "unreadable"}
    batch = reports_to_arrow(reports)
    assert batch.schema.names == list(SEGMENT_FIELDS) == [c.split(" ")[0] for c in SEGMENT_SCHEMA.split(", ")]
    got = [tuple(d[n] for n in SEGMENT_FIELDS) for d in batch.to_pylist()]
    want = [r.to_row() for r in reports]
    ranges = SEGMENT_FIELDS.index("corrupt_ranges")
    got = [g[:ranges] + ([(x["position"], x["size"]) for x in g[ranges]],) + g[ranges + 1 :] for g in got]
    assert got == want
    assert reports_to_arrow([]).num_rows == 0
    # tasks sized by bytes: one per core for a small archive, 2 per core once each gets MIN_TASK_BYTES, never
    # more than the segments
    from dataclasses import replace

    from kafkalog.spark.validate import MIN_TASK_BYTES

    assert _n_tasks(items, 2) == 2 and _n_tasks(items[:3], 8) == 3
    big = [replace(i, size_bytes=MIN_TASK_BYTES) for i in items]
    assert _n_tasks(big, 2) == 4 and _n_tasks(big[:3], 2) == 3
    groups = group_for_tasks(items, 4)
    assert sorted(i.path for g in groups for i in g) == sorted(i.path for i in items)


def test_validation_tasks_carry_only_their_own_segments(spark, tmp_path: Path) -> None:
    """The job's function holds no plan (its pickled size does not grow with the archive: the plans are a
    broadcast); the job runs one Spark partition per group, and its rows are the library's reports."""
    from pyspark import cloudpickle

    from kafkalog.archive.discovery import discover_segments
    from kafkalog.spark.validate import _check_tasks, group_for_tasks, task_plans, validate_items
    from kafkalog.verify import verify_segment

    items = discover_segments(str(GOLDEN / "logdir"))
    groups = group_for_tasks(items, 4)
    assert len(groups) == 4 and len(items) > 8
    tasks, plans = task_plans(spark, groups)
    assert b"golden-" not in cloudpickle.dumps(_check_tasks(True, {}, False, None, plans))
    assert tasks.rdd.glom().collect() == [[(i,)] for i in range(4)]
    df = validate_items(spark, items, tasks_per_core=4)
    assert df.rdd.getNumPartitions() == 2  # a small archive: one task per core
    got = sorted((r.path, r.status, r.record_count, r.valid_bytes, r.index_status) for r in df.collect())
    reports = [verify_segment(i) for i in items]
    assert got == sorted((r.item.path, r.status, r.record_count, r.valid_bytes, r.index_status) for r in reports)


# ------------------------------------------------------------------------------------------------ DataSource


@pytest.mark.parametrize("case", ["golden-none-0", "golden-zstd-0", "golden-txn-0", "golden-logappendtime-0"])
def test_datasource_returns_manifest_records(spark, case: str) -> None:
    df = spark.read.format("kafkalog").load(str(GOLDEN / "logdir" / case))
    rows = df.orderBy("offset").collect()
    assert _rows_as_manifest(rows) == _manifest_records(case)
    assert {(r.topic, r.partition) for r in rows} == {(case.rsplit("-", 1)[0], 0)}
    batches = [b for s in load_manifest(f"manifests/{case}.json")["segments"] for b in s["log"]["batches"]]
    by_offset = {rec["offset"]: b for b in batches for rec in b["records"]}
    for r in rows[:: max(1, len(rows) // 25)]:
        b = by_offset[r.offset]
        assert (r.producer_id, r.leader_epoch, r.is_transactional, r.is_control, r.timestamp_type) == (
            b["producerId"], b["partitionLeaderEpoch"], b["isTransactional"], b["isControl"], b["timestampType"]
        )  # fmt: skip


def test_datasource_same_dataframe_same_answer_around_filtered_queries(spark) -> None:
    """Spark 4.x keeps a Python DataSource's pushdown result on the DataFrame's shared PythonDataSourceV2: a reader
    that took pushed filters answered a later unfiltered count with the filtered rows. With pushdown on (as the
    user may set it) or off, the same DataFrame answers the same before and after any filtered query."""
    root = str(GOLDEN / "logdir")
    offsets = [r[0] for p in (GOLDEN / "logdir").iterdir() if p.is_dir() for r in _manifest_records(p.name)]
    below = {n: sum(o < n for o in offsets) for n in (1, 3)}
    assert 0 < below[1] < below[3] < len(offsets)
    key = "spark.sql.python.filterPushdown.enabled"
    try:
        for pushdown in ("true", "false"):
            spark.conf.set(key, pushdown)
            df = spark.read.format("kafkalog").schema("topic string, offset long, timestamp long").load(root)
            assert df.count() == len(offsets), pushdown
            assert df.filter("offset < 1").count() == below[1], pushdown
            assert df.count() == len(offsets), pushdown
            assert df.filter("offset < 3").count() == below[3] and df.count() == len(offsets), pushdown
            ranged = spark.read.format("kafkalog").option("endingOffsets", "3").load(root)
            assert ranged.count() == below[3]
            assert ranged.filter("offset < 1").count() == below[1] and ranged.count() == below[3], pushdown
    finally:
        spark.conf.unset(key)


def test_datasource_range_options_read_fewer_batches(spark, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from kafkalog.spark.datasource import read_scan_metrics

    root = str(GOLDEN / "logdir")
    full_metrics, ranged_metrics = str(tmp_path / "full"), str(tmp_path / "ranged")
    seg = str(GOLDEN / "logdir" / "golden-segments-0")
    full = spark.read.format("kafkalog").option("metricsDir", full_metrics).load(seg)
    expected = full.filter((F.col("offset") >= 200) & (F.col("offset") < 260))
    expected_rows = sorted(_rows_as_manifest(expected.collect()))
    assert len(expected_rows) == 60
    ranged = (
        spark.read.format("kafkalog")
        .options(metricsDir=ranged_metrics, startingOffsets="200", endingOffsets="260")
        .load(seg)
    )
    assert sorted(_rows_as_manifest(ranged.collect())) == expected_rows
    f, p = read_scan_metrics(full_metrics), read_scan_metrics(ranged_metrics)
    assert 0 < p["segments"] < f["segments"]  # whole segments pruned at planning
    assert 0 < p["batches_read"] < f["batches_read"] / 3  # the .index seek and the upper bound's stop
    assert p["bytes_read"] < f["bytes_read"] / 3

    # timestamps resolve to offsets (Kafka's ListOffsets: the earliest offset whose timestamp is >= T) and the
    # partition is read over [start, end) by offset: golden-none-0's out-of-order timestamps come back by offset
    records = _manifest_records("golden-none-0")
    ts = sorted(r[1] for r in records)
    lo, hi = ts[len(ts) // 4], ts[3 * len(ts) // 4]

    def first_at(recs: list[tuple], t: int) -> int:
        return min(r[0] for r in recs if r[1] >= t)

    tdf = spark.read.format("kafkalog").options(startingTimestamp=str(lo), endingTimestamp=str(hi))
    want = sorted(r for r in records if first_at(records, lo) <= r[0] < first_at(records, hi))
    assert want and sorted(_rows_as_manifest(tdf.load(str(GOLDEN / "logdir" / "golden-none-0")).collect())) == want
    # a timestamp lower bound drops the segments before the one holding its offset and seeks in that one
    srecs = _manifest_records("golden-segments-0")
    tlo = sorted(r[1] for r in srecs)[len(srecs) * 4 // 5]
    tmetrics = str(tmp_path / "ts")
    tseg = spark.read.format("kafkalog").options(startingTimestamp=str(tlo), metricsDir=tmetrics).load(seg)
    assert sorted(_rows_as_manifest(tseg.collect())) == sorted(r for r in srecs if r[0] >= first_at(srecs, tlo))
    assert 0 < read_scan_metrics(tmetrics)["segments"] < f["segments"] / 2
    # a whole archive: every partition gets the same offset range
    both = spark.read.format("kafkalog").options(startingOffsets="5", endingOffsets="7").load(root)
    assert {r.offset for r in both.collect()} == {5, 6}
    with pytest.raises(Exception, match="startingOffsets must be an integer"):
        spark.read.format("kafkalog").option("startingOffsets", "earliest").load(root).count()


def test_datasource_read_committed_drops_aborted_records(spark) -> None:
    case = "golden-txn-0"
    manifest = load_manifest(f"manifests/{case}.json")
    aborted = [
        (e["producerId"], e["firstOffset"], e["lastOffset"])
        for s in manifest["segments"]
        for e in s["txnIndex"]["entries"]
    ]
    assert aborted
    # a read_committed consumer stops at the last stable offset: the first offset of a transaction still open
    open_txns: dict[int, int] = {}
    for seg in manifest["segments"]:
        for b in seg["log"]["batches"]:
            if b["isTransactional"] and b["isControl"]:
                open_txns.pop(b["producerId"], None)
            elif b["isTransactional"]:
                open_txns.setdefault(b["producerId"], b["baseOffset"])
    lso = min(open_txns.values(), default=1 << 62)
    assert lso < (1 << 62)  # the golden partition ends inside a transaction
    want = []
    dropped = 0
    for seg in manifest["segments"]:
        for b in seg["log"]["batches"]:
            in_aborted = b["isTransactional"] and any(
                pid == b["producerId"] and first <= b["baseOffset"] <= last for pid, first, last in aborted
            )
            for r in b["records"]:
                if b["isControl"] or in_aborted or r["offset"] >= lso:
                    dropped += not b["isControl"]
                    continue
                want.append(
                    (r["offset"], r["timestamp"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
                )
    assert dropped > 0
    df = spark.read.format("kafkalog").option("isolation", "read_committed").load(str(GOLDEN / "logdir" / case))
    rows = df.orderBy("offset").collect()
    assert _rows_as_manifest(rows) == want
    assert not any(r.is_control for r in rows)


def test_datasource_user_schema_reads_only_its_columns(spark, tmp_path: Path) -> None:
    """A user-specified schema (subset, any order, any case) gives exactly the full read's values for those
    columns, with filters, the range options and read_committed still working."""
    from pyspark.sql import functions as F

    from kafkalog.spark.datasource import read_scan_metrics

    root = str(GOLDEN / "logdir")
    cols = ["Value", "offset", "topic", "timestamp", "headers", "leader_epoch"]
    ddl = "Value binary, offset long, topic string, timestamp long, headers array<struct<key:string,value:binary>>, " \
          "leader_epoch int"  # fmt: skip
    ts = sorted(r[1] for r in _manifest_records("golden-none-0"))[100]

    def rows(df):
        return sorted((r.topic, r.offset, r.timestamp, hx(r[0]), str(r.headers), r.leader_epoch) for r in df.collect())

    def hx(b):
        return None if b is None else bytes(b).hex()

    filters = [
        None,
        "topic = 'golden-segments' AND offset >= 200 AND offset < 260",
        f"topic IN ('golden-none', 'golden-zstd') AND timestamp >= {ts}",
    ]
    cases = [(root, "read_uncommitted", f) for f in filters] + [(f"{root}/golden-txn-0", "read_committed", None)]
    for where, isolation, flt in cases:
        full = spark.read.format("kafkalog").option("isolation", isolation).load(where).select(*cols)
        pruned = spark.read.format("kafkalog").option("isolation", isolation).schema(ddl).load(where)
        assert pruned.columns == cols
        if flt is not None:
            full, pruned = full.filter(flt), pruned.filter(flt)
        want = rows(full)
        assert want and rows(pruned) == want, (isolation, flt)
    # a schema holding nothing but partition, and the range options still skip batches
    part = spark.read.format("kafkalog").schema("partition int").load(root)
    assert part.filter(F.col("partition") == 0).count() == spark.read.format("kafkalog").load(root).count()
    assert part.filter(F.col("partition") == 1).count() == 0
    seg = f"{root}/golden-segments-0"
    full_m, pushed_m = str(tmp_path / "full"), str(tmp_path / "pushed")
    spark.read.format("kafkalog").schema("offset long").option("metricsDir", full_m).load(seg).count()
    pushed = spark.read.format("kafkalog").schema("offset long").option("metricsDir", pushed_m)
    assert pushed.options(startingOffsets="200", endingOffsets="260").load(seg).count() == 60
    f, p = read_scan_metrics(full_m), read_scan_metrics(pushed_m)
    assert 0 < p["batches_read"] < f["batches_read"] / 3
    assert f["scan_seconds"] > 0 and f["records_returned"] > p["records_returned"] == 60


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("offset int", "kafkalog column 'offset' is bigint, not int"),
        ("offset long, nope string", "kafkalog has no column 'nope'"),
        ("offset long, OFFSET long", "column 'OFFSET' appears twice"),
    ],
)
def test_datasource_user_schema_is_checked(spark, ddl: str, message: str) -> None:
    df = spark.read.format("kafkalog").schema(ddl).load(str(GOLDEN / "logdir" / "golden-none-0"))
    with pytest.raises(Exception, match=message) as err:
        df.collect()
    assert "InvalidArgumentError" in str(err.value)


def test_datasource_min_partitions(spark) -> None:
    """register() makes the session's parallelism the default task spread; minPartitions overrides it."""
    from kafkalog.spark.datasource import KafkaLogDataSource, _with_parallelism

    root = str(GOLDEN / "logdir")
    def reader(**options: str):  # a DataFrameReader's option() changes it in place: a fresh one each time
        return spark.read.format("kafkalog").schema("offset long").options(**options).load(root)

    n_default, n_8 = reader().rdd.getNumPartitions(), reader(minPartitions="8").rdd.getNumPartitions()
    one = reader(minPartitions="1", maxPartitionBytes=str(1 << 30))
    assert spark.sparkContext.defaultParallelism == 2
    assert one.rdd.getNumPartitions() == 1 < n_default < n_8
    assert one.count() == reader().count()
    with pytest.raises(Exception, match="minpartitions must be a positive integer"):
        reader(minPartitions="0").collect()
    # the subclass register() makes travels by value: the planning worker sees its parallelism
    from pyspark import cloudpickle

    cls = cloudpickle.loads(cloudpickle.dumps(_with_parallelism(3)))
    assert issubclass(cls, KafkaLogDataSource) and cls.default_min_partitions == 3 and cls.name() == "kafkalog"
    assert _with_parallelism(KafkaLogDataSource.default_min_partitions) is KafkaLogDataSource


def test_big_segments_are_split_at_batch_starts(spark, tmp_path: Path) -> None:
    """A segment above maxPartitionBytes becomes byte ranges cut at offset index entries (each checked to start a
    whole CRC-valid batch), read by several tasks with the same rows; a damaged entry means no split."""
    from kafkalog.log.index_check import batch_cuts
    from kafkalog.spark.datasource import read_scan_metrics

    case = GOLDEN / "logdir" / "golden-index-dense-0"
    logs = sorted(case.glob("*.log"))
    log = logs[0]
    cuts = batch_cuts(str(log), 0, log.stat().st_size, 2048)
    assert len(cuts) >= 4 and cuts == sorted(set(cuts)) and all(0 < c < log.stat().st_size for c in cuts)
    ranges = sum(1 + len(batch_cuts(str(p), int(p.stem), p.stat().st_size, 2048)) for p in logs)
    whole = spark.read.format("kafkalog").load(str(case))
    metrics = str(tmp_path / "m")
    split = spark.read.format("kafkalog").options(maxPartitionBytes="2048", minPartitions="1", metricsDir=metrics)
    split = split.load(str(case))
    assert split.rdd.getNumPartitions() >= 2
    rows = split.collect()  # the one query writing metrics
    assert sorted(rows) == sorted(whole.collect()) and len(rows) == len(_manifest_records(case.name))
    assert read_scan_metrics(metrics)["segments"] == ranges
    bad = _copy_logdir(tmp_path / "bad", [case.name]) / case.name
    idx = bad / "00000000000000000000.index"
    data = bytearray(idx.read_bytes())
    used = [int.from_bytes(data[8 * i + 4 : 8 * i + 8], "big") for i in range(len(data) // 8)].index(cuts[0])
    data[8 * used + 7] ^= 0x01  # the first cut's entry now points one byte off its batch
    idx.write_bytes(bytes(data))
    assert batch_cuts(str(bad / log.name), 0, log.stat().st_size, 2048) == []


def test_import_without_spark_use_is_cheap() -> None:
    import kafkalog.spark as ks

    assert callable(ks.validate_archive) and callable(ks.register) and callable(ks.get_session)
    assert os.path.basename(ks.discover_segments(str(GOLDEN / "logdir" / "golden-txn-0"))[0].path).endswith(".log")


def test_export_archive_applies_the_datasource_range_options(spark, tmp_path: Path) -> None:
    """The export reads through the DataSource's reader, so its range options apply (the round trip, S3, corrupt
    segments and the command: tests/spark/test_spark_export.py)."""
    from kafkalog.spark import export_archive, read_export

    roots = [str(GOLDEN / "logdir" / c) for c in ("golden-segments-0", "golden-txn-0", "golden-zstd-0")]
    ds = spark.read.format("kafkalog").load(roots)
    ranged = export_archive(spark, roots, str(tmp_path / "ranged"), endingOffsets="10")
    want = ds.filter("offset < 10")
    assert ranged.rows == want.count() > 0
    key = ["topic", "partition", "offset"]
    assert read_export(spark, str(tmp_path / "ranged")).orderBy(*key).collect() == want.orderBy(*key).collect()


def test_a_point_query_brings_little_of_its_segment_into_memory(spark, tmp_path: Path) -> None:
    """startingOffsets=X, endingOffsets=X+1 on an 8 MiB segment: the task checks the index entries it uses and
    reads one range; measured as page-cache residency (fincore) after evicting the file (POSIX_FADV_DONTNEED)."""
    import subprocess

    from tests.layouts import big_segment, evict_from_page_cache

    seg = big_segment(tmp_path)
    evict_from_page_cache(seg)

    def resident() -> int:
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(seg)], check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        return int(out.split()[0])

    size = seg.stat().st_size
    assert resident() < size // 10
    df = spark.read.format("kafkalog").options(startingOffsets="1234", endingOffsets="1235").load(str(tmp_path))
    assert [r.offset for r in df.select("offset").collect()] == [1234]
    assert resident() <= size // 4, (resident(), size)
