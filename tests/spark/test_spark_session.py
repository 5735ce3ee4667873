"""Local Spark workers run the driver's interpreter, so a venv that is not activated still works."""

from __future__ import annotations

import sys

from kafkalog.spark.session import worker_python_conf


def test_local_master_uses_the_driver_interpreter(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    conf = worker_python_conf("local[2]")
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.pyspark.driver.python"] == sys.executable


def test_pyspark_python_and_clusters_are_left_alone(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert worker_python_conf("local[*]") == {}
    monkeypatch.delenv("PYSPARK_PYTHON")
    assert worker_python_conf("spark://127.0.0.1:7077") == {}
