"""An install without a C compiler still works: the optional extensions are skipped and the pure-Python decoder
and cleaner run.

The package is built from a copy of the source with ``CC``/``LDSHARED`` pointing at ``false`` (a compiler that
always fails), offline through ``setup.py build``, and the built tree is imported in a child process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import GOLDEN, REPO_ROOT, needs_golden

_PROBE = textwrap.dedent(
    """
    import sys
    # an editable install of the repo (CI's) answers for any kafkalog module the built tree lacks: hide it
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
    import kafkalog
    from kafkalog.records import columns, read_batches, read_record_columns
    assert kafkalog.__file__.startswith(sys.argv[1]), kafkalog.__file__
    path = sys.argv[2]
    data = open(path, "rb").read()
    cols = read_record_columns(path)
    records = [r for b in read_batches(data) for r in b.records()]
    assert cols.values() == [r.value for r in records] and len(cols) == len(records) > 0
    from kafkalog.cleaner import OffsetMap, native
    assert native.compiled is None and not native.available() and OffsetMap(240).table is None  # the dict map
    print(columns._compiled is None, len(cols))
    """
)


@needs_golden
def test_build_without_a_compiler_skips_the_extension_and_decodes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy2(REPO_ROOT / name, src / name)
    skip = shutil.ignore_patterns("*.so", "__pycache__", "*.pyc")
    for name in ("kafkalog", "cli"):
        shutil.copytree(REPO_ROOT / name, src / name, ignore=skip)
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    build = subprocess.run([sys.executable, "setup.py", "build", "--build-base", str(tmp_path / "build")], cwd=src,
                           env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    # setuptools' warning names what it skipped
    assert "kafkalog.records._columns" in build.stdout + build.stderr
    assert "kafkalog.cleaner._cleaner" in build.stdout + build.stderr
    lib = next((tmp_path / "build").glob("lib*"))
    assert (lib / "kafkalog" / "records" / "columns.py").is_file()
    assert not list(lib.rglob("_columns*.so")) and not list(lib.rglob("_cleaner*.so"))
    log = GOLDEN / "logdir" / "golden-lz4-0" / "00000000000000000000.log"
    probe = subprocess.run([sys.executable, "-c", _PROBE, str(lib), str(log)], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(lib)})  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.split()[0] == "True"
