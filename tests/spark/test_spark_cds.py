"""Class Data Sharing for the Spark driver's JVM (kafkalog/spark/cds.py): the archive is written by a first start,
adopted whole and mapped by the next; a partial, truncated, corrupt or mismatched archive never breaks a start nor
prints anything; ``KAFKALOG_SPARK_CDS=0`` turns it off."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.spark import cds
from tests.conftest import GOLDEN, needs_golden

ROOT = Path(__file__).resolve().parents[2]
MAGIC = struct.pack("<I", cds.DYNAMIC_MAGIC)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A private cache dir (the archives go to ``$XDG_CACHE_HOME/kafkalog``) and CDS on."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(cds.CDS_ENV, raising=False)
    monkeypatch.setattr(cds, "_claim", None)
    return tmp_path / "cache" / "kafkalog"


def _fake_jdk(root: Path, version: str = "17.0.9", base_archive: bool = True) -> str:
    """A JDK layout as cds reads it (release, libjvm.so, the default CDS archive); returns its bin/java."""
    (root / "bin").mkdir(parents=True)
    (root / "lib" / "server").mkdir(parents=True)
    (root / "release").write_text(f'JAVA_VERSION="{version}"\n')
    (root / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    if base_archive:
        (root / "lib" / "server" / "classes.jsa").write_bytes(b"base")
    java = root / "bin" / "java"
    java.write_text("#!/bin/sh\n")
    return str(java)


def _fake_spark(root: Path) -> str:
    (root / "jars").mkdir(parents=True)
    (root / "jars" / "spark-core.jar").write_bytes(b"jar")
    return str(root)


def _option(opts: list[str], name: str) -> str:
    (value,) = [o.split("=", 1)[1] for o in opts if o.startswith(f"-XX:{name}=")]
    return value


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_first_start_writes_the_archive_at_exit_and_one_start_at_a_time_does(cache, tmp_path) -> None:
    java, spark_home = _fake_jdk(tmp_path / "jdk"), _fake_spark(tmp_path / "spark")
    opts = cds.driver_options(java, spark_home)
    tmp = Path(_option(opts, "ArchiveClassesAtExit"))
    assert tmp.parent == cache and tmp.name.endswith(f".{os.getpid()}.tmp")
    assert cds.QUIET in opts
    claim = next(cache.glob("*.claim"))
    assert claim.read_text().split() == [str(os.getpid())]
    cds.note_driver_jvm(4242)  # the JVM writes the archive after this process exits: the claim names it too
    assert claim.read_text().split() == [str(os.getpid()), "4242"]
    # a second start while the claim's process lives: no second dump, a plain start
    assert cds.driver_options(java, spark_home) == []


def test_a_whole_archive_is_adopted_and_mapped_by_the_next_start(cache, tmp_path) -> None:
    java, spark_home = _fake_jdk(tmp_path / "jdk"), _fake_spark(tmp_path / "spark")
    tmp = Path(_option(cds.driver_options(java, spark_home), "ArchiveClassesAtExit"))
    tmp.write_bytes(MAGIC + b"\0" * 4092)  # the JDK writes the header (magic first) after the regions
    opts = cds.driver_options(java, spark_home)
    final = Path(_option(opts, "SharedArchiveFile"))
    assert final.name.endswith("-4096.jsa") and final.read_bytes()[:4] == MAGIC
    assert not tmp.exists() and list(cache.glob("*.claim")) == []
    assert "-Xshare:auto" in opts and cds.QUIET in opts
    assert cds.driver_options(java, spark_home) == opts  # and every start after it


def test_a_partial_archive_is_never_mapped(cache, tmp_path) -> None:
    """A temp archive without its header (still being written, or its JVM was killed) is not adopted; once its
    claim is dead it is removed and a new start writes the archive again."""
    java, spark_home = _fake_jdk(tmp_path / "jdk"), _fake_spark(tmp_path / "spark")
    tmp = Path(_option(cds.driver_options(java, spark_home), "ArchiveClassesAtExit"))
    tmp.write_bytes(b"\0" * 4096)
    assert cds.driver_options(java, spark_home) == []  # the claim's process (this one) lives
    claim = next(cache.glob("*.claim"))
    claim.write_text(f"{_dead_pid()}\n{_dead_pid()}\n")
    opts = cds.driver_options(java, spark_home)
    assert not tmp.exists() and "-XX:ArchiveClassesAtExit=" in " ".join(opts)
    assert claim.read_text().split() == [str(os.getpid())]


def test_a_truncated_or_corrupt_archive_is_removed_not_mapped(cache, tmp_path) -> None:
    """JDK 17 maps a truncated archive and dies of SIGBUS: its size must be the one recorded in its name."""
    java, spark_home = _fake_jdk(tmp_path / "jdk"), _fake_spark(tmp_path / "spark")
    tmp = Path(_option(cds.driver_options(java, spark_home), "ArchiveClassesAtExit"))
    tmp.write_bytes(MAGIC + b"\1" * 8188)
    final = Path(_option(cds.driver_options(java, spark_home), "SharedArchiveFile"))
    for damage in (MAGIC + b"\1" * 100, b"\xff" * 8192):  # cut short; right size but no archive
        final.write_bytes(damage)
        cds._claim = None
        opts = cds.driver_options(java, spark_home)
        assert not final.exists() and "-XX:ArchiveClassesAtExit=" in " ".join(opts), damage[:8]
        next(cache.glob("*.claim")).unlink()


def test_the_key_follows_java_and_spark(cache, tmp_path) -> None:
    java, spark_home = _fake_jdk(tmp_path / "jdk"), _fake_spark(tmp_path / "spark")
    home = str(tmp_path / "jdk")
    key = cds.archive_key(java, home, spark_home)
    assert cds.archive_key(java, home, spark_home) == key
    assert cds.archive_key(java, home, spark_home, "/extra.jar") != key
    (tmp_path / "spark" / "jars" / "more.jar").write_bytes(b"x")
    assert cds.archive_key(java, home, spark_home) != key
    (tmp_path / "jdk" / "release").write_text('JAVA_VERSION="17.0.10"\n')
    assert cds.archive_key(java, home, spark_home) != cds.archive_key(java, home, spark_home, "/extra.jar")


def test_off_by_env_and_where_the_jdk_cannot(cache, tmp_path, monkeypatch) -> None:
    spark_home = _fake_spark(tmp_path / "spark")
    monkeypatch.setenv(cds.CDS_ENV, "0")
    assert cds.driver_options(_fake_jdk(tmp_path / "jdk"), spark_home) == []
    monkeypatch.delenv(cds.CDS_ENV)
    assert cds.driver_options(_fake_jdk(tmp_path / "jdk11", version="11.0.2"), spark_home) == []
    assert cds.driver_options(_fake_jdk(tmp_path / "jlinked", base_archive=False), spark_home) == []
    assert not cache.exists() or list(cache.iterdir()) == []


# --- the real JVM: Spark's own launcher class (the first class of every Spark start), from Spark's jars ---------


def _launcher(java: str, opts: list[str], spark_home: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [java, *opts, *extra, "-cp", os.path.join(spark_home, "jars", "*"), "org.apache.spark.launcher.Main",
           "org.apache.spark.deploy.SparkSubmit", "--version"]  # fmt: skip
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_SCALA_VERSION": "2.13"}  # as bin/load-spark-env.sh sets
    return subprocess.run(cmd, capture_output=True, env=env, timeout=300)


def _java_and_spark() -> tuple[str, str]:
    import pyspark

    from kafkalog.spark.java import ensure_java

    return ensure_java(), os.path.dirname(os.path.abspath(pyspark.__file__))


def test_the_jvm_writes_the_archive_and_maps_it_or_quietly_refuses_a_bad_one(cache) -> None:
    java, spark_home = _java_and_spark()
    plain = _launcher(java, [], spark_home)
    assert plain.returncode == 0 and plain.stdout, plain.stderr[-2000:]
    opts = cds.driver_options(java, spark_home)
    assert opts, "this JDK has a default CDS archive: kafkalog writes a dynamic one over it"
    first = _launcher(java, opts, spark_home)
    assert (first.returncode, first.stdout, first.stderr) == (0, plain.stdout, plain.stderr)
    cds.note_driver_jvm(None)
    cds._claim = None
    opts = cds.driver_options(java, spark_home)
    archive = Path(_option(opts, "SharedArchiveFile"))  # adopted
    log = cache.parent / "class-load.log"
    used = _launcher(java, opts, spark_home, f"-Xlog:class+load=info:file={log}")
    assert "org.apache.spark.launcher.Main source: shared objects file (top)" in log.read_text()
    assert (used.returncode, used.stdout, used.stderr) == (0, plain.stdout, plain.stderr)
    # right size and magic, wrong version field: the JVM refuses it, says nothing, runs as without
    data = bytearray(archive.read_bytes())
    data[8:12] = b"\xee\xee\xee\xee"
    archive.chmod(0o644)
    archive.write_bytes(bytes(data))
    assert cds.driver_options(java, spark_home) == opts
    refused = _launcher(java, opts, spark_home)
    assert (refused.returncode, refused.stdout, refused.stderr) == (0, plain.stdout, plain.stderr)
    # an archive of another class path (the launcher's jar copied elsewhere): refused as quietly
    elsewhere = cache.parent / "elsewhere"
    (elsewhere / "jars").mkdir(parents=True)
    for jar in Path(spark_home, "jars").glob("spark-launcher*.jar"):
        shutil.copy(jar, elsewhere / "jars")
    other = cache.parent / "other.jsa"
    _launcher(java, [f"-XX:ArchiveClassesAtExit={other}", cds.QUIET], str(elsewhere))
    archive.unlink()
    mismatched = archive.with_name(archive.name.rsplit("-", 1)[0] + f"-{other.stat().st_size}.jsa")
    shutil.copyfile(other, mismatched)
    opts = cds.driver_options(java, spark_home)
    assert _option(opts, "SharedArchiveFile") == str(mismatched)
    refused = _launcher(java, opts, spark_home, f"-Xlog:class+load=info:file={log}")
    assert "launcher.Main source: shared objects file" not in log.read_text()
    assert (refused.returncode, refused.stdout, refused.stderr) == (0, plain.stdout, plain.stderr)


# --- one Spark start that writes the archive, one that maps it --------------------------------------------------

_CHILD = """
import sys
from pyspark import SparkContext
if sys.argv[1] == "start":
    from kafkalog.spark import get_session
    get_session("local[1]", "kafkalog-cds-test").stop()
    rc = 0
else:
    from kafkalog.spark.validate import main
    rc = main(sys.argv[2:])
with open(f"/proc/{SparkContext._gateway.proc.pid}/maps") as f:
    print("MAPPED=" + ",".join(sorted({line.split()[-1] for line in f if "spark-driver-" in line})))
sys.exit(rc)
"""


@needs_golden
def test_a_spark_start_writes_the_archive_and_the_next_maps_it(tmp_path) -> None:
    """The first start (a session, stopped) has its driver JVM write the archive as it exits; the next start (a
    ``spark validate``) maps it, and prints nothing of it."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop(cds.CDS_ENV, None)
    cache = tmp_path / "cache" / "kafkalog"

    def child(*args: str) -> str:
        # capture_output waits for the JVM too: it holds the pipes until it has written the archive and exited
        proc = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, cwd=ROOT,
                              env=env, timeout=900)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "cds" not in proc.stdout + proc.stderr and "warning" not in proc.stdout.lower()
        return proc.stdout

    assert child("start") == "MAPPED=\n"
    assert [p.name for p in cache.glob("*.tmp")] and list(cache.glob("*.jsa")) == []
    out = child("validate", str(GOLDEN / "logdir" / "golden-none-0"), "--master", "local[1]", "--out",
                str(tmp_path / "out"))  # fmt: skip
    (archive,) = cache.glob("spark-driver-*.jsa")
    assert not list(cache.glob("*.tmp")) and not list(cache.glob("*.claim"))
    assert out.endswith(f"MAPPED={archive}\n")
    assert "segments: ok 1" in out and "partitions: ok 1" in out
