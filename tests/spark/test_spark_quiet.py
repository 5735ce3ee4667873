"""Spark's own start-up WARN lines (loopback hostname, native-hadoop) and its log4j notice stay out of kafkalog's
commands' output unless ``KAFKALOG_SPARK_LOG`` asks for Spark's own logging."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, needs_golden

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]


def test_quiet_log_conf_points_the_driver_at_an_errors_only_config(monkeypatch) -> None:
    from kafkalog.spark import session

    monkeypatch.delenv(session.LOG_ENV, raising=False)
    conf = session.quiet_log_conf()
    opt = conf["spark.driver.extraJavaOptions"]
    path = opt.split("-Dlog4j2.configurationFile=file:", 1)[1]
    assert "rootLogger.level = error" in Path(path).read_text()
    monkeypatch.setenv(session.LOG_ENV, "warn")
    assert session.quiet_log_conf() == {}


@needs_golden
def test_spark_validate_prints_no_spark_warnings(tmp_path) -> None:
    env_python = sys.executable
    proc = subprocess.run(
        [env_python, "-c", "from kafkalog_cli.main import main; main()", "spark", "validate",
         str(GOLDEN / "logdir" / "golden-none-0"), "--out", str(tmp_path / "out"), "--master", "local[1]"],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "segments: ok 1" in proc.stdout
    spark_says = (" WARN ", "log4j", "Setting default log level", "setLogLevel")
    noise = [line for line in proc.stderr.splitlines() if any(s in line for s in spark_says)]
    assert noise == []
