"""A venv that is not activated: the validation job from ``VENV/bin/python`` with the venv's bin not on PATH.

Spark would start ``python3`` from PATH for its workers (the system interpreter, without kafkalog); get_session
makes local workers run the driver's own interpreter. One fresh venv (the running interpreter's packages through a
``.pth``, kafkalog installed editable, no deps) and one small job.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import GOLDEN, REPO_ROOT, needs_golden
from tests.spark_cluster import clean_venv, env_venv

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.spark, needs_golden]


def test_not_activated_venv_runs_the_validation_job(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env_venv(venv, hide_kafkalog=False, pip=True)  # the dependencies; kafkalog comes from the install below
    # the editable install pip would make, offline (no wheel package needed): kafkalog and the kafkalog script
    subprocess.run([str(venv / "bin" / "python"), "setup.py", "-q", "develop", "--no-deps"], cwd=REPO_ROOT,
                   check=True, timeout=300, capture_output=True)  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith("/work/venvs"))
    # a python3 without kafkalog comes first on PATH (the machine's own may have it: CI installs it there)
    bare = Path(clean_venv(tmp_path / "bare")).parent
    env["PATH"] = os.pathsep.join([str(bare), env["PATH"]])
    probe = subprocess.run(["python3", "-c", "import kafkalog"], env=env, capture_output=True, cwd=tmp_path)
    assert probe.returncode != 0  # the interpreter Spark would pick from PATH lacks kafkalog
    out = tmp_path / "report"
    job = (
        "import sys; from kafkalog.spark import run_validation; "
        f"sys.exit(run_validation([{str(GOLDEN / 'logdir' / 'golden-gzip-0')!r}], {str(out)!r}, 'local[1]'))"
    )
    # the venv's interpreter by path, as its bin/kafkalog script runs it (the script's kafkalog_cli package
    # mapping needs pip's editable install, which this offline test cannot build)
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", job], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert (out / "summary.txt").is_file() and (out / "segments.parquet").is_dir()
