"""The zip shipped to Spark executors carries the compiled decoder: a worker Python without kafkalog (a venv that
sees the running interpreter's packages, kafkalog hidden) imports kafkalog from the zip and decodes with the
compiled module when its Python and platform match; a module built for another one gives one warning and the
pure-Python decoder. No Spark session: the worker's side of addPyFile is a zip on sys.path."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, needs_golden
from tests.spark_cluster import clean_venv

pytestmark = needs_golden

PROBE = """
import sys, warnings
sys.path.insert(0, {zip!r})
warnings.simplefilter("always")
import kafkalog
from kafkalog.records import native, read_record_columns
assert ".zip" in kafkalog.__file__, kafkalog.__file__
print(native.available(), getattr(native.compiled, "__file__", None))
cols = read_record_columns({log!r}, implementation="compiled" if native.available() else "python")
print(len(cols), int(cols.offset[-1]))
"""


def _run(python: str, zip_path: Path, cwd: Path) -> subprocess.CompletedProcess:
    log = str(GOLDEN / "logdir" / "golden-zstd-0" / "00000000000000000000.log")
    return subprocess.run([python, "-c", PROBE.format(zip=str(zip_path), log=log)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)  # fmt: skip


def test_the_shipped_zip_brings_the_compiled_decoder(tmp_path: Path) -> None:
    from kafkalog.records import native, read_record_columns
    from kafkalog.spark.session import package_zip

    if native.compiled is None:
        pytest.fail("this interpreter's kafkalog has no compiled decoder to ship (build it: pip install -e .)")
    built = Path(native.compiled.__file__).name
    zip_path = Path(package_zip())
    with zipfile.ZipFile(zip_path) as zf:
        assert f"kafkalog/records/{built}" in zf.namelist()
    python = clean_venv(tmp_path / "worker")
    want = read_record_columns(str(GOLDEN / "logdir" / "golden-zstd-0" / "00000000000000000000.log"))
    proc = _run(python, zip_path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded, counts = proc.stdout.splitlines()
    flag, where = loaded.split(" ", 1)
    assert flag == "True" and ".zip" not in where and where.endswith(built), loaded
    assert counts == f"{len(want)} {int(want.offset[-1])}"
    assert "RuntimeWarning" not in proc.stderr

    # built for another interpreter: one warning, the pure-Python decoder, the same records
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(zip_path) as src, zipfile.ZipFile(other, "w") as dst:
        for info in src.infolist():
            name = info.filename.replace(built, "_columns.cpython-39-sparc-linux-gnu.so")
            dst.writestr(name, src.read(info.filename))
    proc = _run(python, other, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded, counts = proc.stdout.splitlines()
    assert loaded == "False None" and counts == f"{len(want)} {int(want.offset[-1])}"
    assert proc.stderr.count("built for another Python or platform") == 1, proc.stderr
    shutil.rmtree(tmp_path / "worker")
