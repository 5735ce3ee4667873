"""``kafkalog spark validate --timings``: the phases account for the command's wall time, and the check job is
split into what happened before the first task, the tasks' span and the collection (from the tasks' own clocks)."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import GOLDEN, needs_golden

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


def test_clock_merges_task_reports_and_splits_the_job() -> None:
    from kafkalog.spark.task_clock import ClockParam, job_phases

    p = ClockParam()
    a = {"tasks": 1, "first": 10.0, "last": 11.0, "worker_start_max": 0.5, "work": 0.6, "encode": 0.1}
    b = {"tasks": 1, "first": 10.2, "last": 11.5, "worker_start_max": 0.3, "work": 0.8, "encode": 0.1}
    merged = p.addInPlace(p.addInPlace(p.zero({}), a), b)
    assert merged == {"tasks": 2, "first": 10.0, "last": 11.5, "worker_start_max": 0.5, "work": 1.4,
                      "encode": pytest.approx(0.2)}  # fmt: skip
    parts = job_phases(merged, 9.5, 12.0, cores=2)
    assert parts["to_first_task"] == 0.5 and parts["tasks"] == 1.5 and parts["collect"] == 0.5
    assert parts["work_per_core"] == pytest.approx(0.7) and parts["worker_start"] == 0.5
    assert job_phases({}, 1.0, 2.0, 2) == {"tasks_run": 0.0}


@needs_golden
def test_timings_account_for_the_wall_time(spark, tmp_path, capsys) -> None:
    from kafkalog.spark.validate import run_validation, validate_archive

    validate_archive(spark, str(GOLDEN / "logdir" / "golden-none-0")).collect()  # workers already started
    time.sleep(1.0)
    t = time.perf_counter()
    code = run_validation([str(GOLDEN / "logdir" / "golden-none-0"), str(GOLDEN / "logdir" / "golden-gzip-0")],
                          str(tmp_path / "out"), json_mode=True, timings=True)  # fmt: skip
    wall = time.perf_counter() - t
    assert code == 0
    timings = json.loads(capsys.readouterr().out)["timings"]
    phases = {k: v for k, v in timings.items() if "." not in k and k not in ("start", "total")}
    assert {"plan", "check_plan", "check_job", "continuity", "reports"} <= set(phases)
    assert 0.95 * wall <= sum(phases.values()) <= wall + 0.01
    parts = ("to_first_task", "tasks", "collect")
    inside = sum(timings[f"check_job.{p}"] for p in parts)
    assert 0.95 * timings["check_job"] - 0.005 <= inside <= timings["check_job"] + 0.005
    assert timings["check_job.tasks_run"] == 2  # a small archive on local[2]: one task per core
    assert timings["check_job.work_per_core"] > 0 and timings["check_job.encode_per_core"] > 0
    assert timings["check_job.tasks"] >= timings["check_job.work_per_core"] * 0.5
    assert timings["check_job.worker_start"] <= timings["check_job"]  # a reused worker started before the job


def test_render_indents_a_phase_parts() -> None:
    from kafkalog.spark.timings import PhaseTimer

    timer = PhaseTimer()
    timer.lap("check_job")
    timer.details("check_job", {"to_first_task": 0.25, "tasks_run": 2})
    text = timer.render()
    assert "  to_first_task" in text and "      2\n" in text
    assert set(timer.as_dict()) == {"check_job", "check_job.to_first_task", "check_job.tasks_run", "total"}


@needs_golden
def test_datasource_metrics_place_the_tasks_inside_the_query(spark, tmp_path) -> None:
    """metricsDir's lines say when the segments' scans ran (inside the query's wall time), how long the tasks'
    own work took and how long Spark held them at ``yield`` taking their batches to the JVM."""
    from kafkalog.spark.datasource import read_scan_metrics

    mdir = str(tmp_path / "m")
    spark.read.format("kafkalog").load(str(GOLDEN / "logdir")).count()  # workers already started
    time.sleep(1.0)
    df = spark.read.format("kafkalog").option("metricsDir", mdir).load(str(GOLDEN / "logdir"))
    submitted = time.time()
    n = df.selectExpr("count(*) AS n", "sum(length(value)) AS v").collect()[0].n
    returned = time.time()
    m = read_scan_metrics(mdir)
    assert n == m["records_returned"] > 0
    assert submitted - 0.01 <= m["first_started"] <= m["last_ended"] <= returned + 0.01
    assert m["scan_seconds"] > 0 and m["yield_seconds"] > 0
    assert m["scan_seconds"] + m["yield_seconds"] <= 2 * (m["last_ended"] - m["first_started"]) + 0.05
    assert m["worker_start"] <= returned - submitted
