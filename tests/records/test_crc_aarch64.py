"""The CRC32C core (``kafkalog/records/_columns_crc_core.h``) outside Python: ``tests/c/crc_harness.c`` checks every
path the CPU runs against a bit-at-a-time reference at every length 0..4200 from 16 alignments and against published
check values. Built natively (x86-64 here: avx512/avx2/sse42/portable as the CPU allows) and, with Debian's
``gcc-aarch64-linux-gnu`` and ``qemu-user``, for aarch64 and run under ``qemu-aarch64`` (arm-pmull, arm-crc,
portable): the aarch64 paths' only test on an x86 machine. Correctness only: qemu says nothing about speed.
The whole decoder (the record walk included) is cross-compiled for aarch64 too, not run: no aarch64 Python here."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "tests" / "c" / "crc_harness.c"
INCLUDE = ROOT / "kafkalog" / "records"
CROSS = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
NATIVE = shutil.which("cc") or shutil.which("gcc")


def _build_and_run(compiler: str, out: Path, *runner: str) -> str:
    build = subprocess.run([compiler, "-O2", "-Wall", "-Werror", "-static", "-I", str(INCLUDE), str(HARNESS), "-o",
                            str(out)], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert build.returncode == 0, build.stderr
    run = subprocess.run([*runner, str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.mark.skipif(NATIVE is None, reason="no C compiler")
def test_native_harness_passes_every_path(tmp_path: Path) -> None:
    out = _build_and_run(NATIVE, tmp_path / "crc_harness")
    assert "portable ok" in out and out.rstrip().endswith("0 failed"), out


@pytest.mark.skipif(CROSS is None or QEMU is None,
                    reason="needs Debian's aarch64 cross compiler and qemu-user "
                           "(apt-get install gcc-aarch64-linux-gnu qemu-user)")  # fmt: skip
def test_aarch64_paths_under_qemu(tmp_path: Path) -> None:
    out = _build_and_run(CROSS, tmp_path / "crc_harness_arm64", QEMU)
    # qemu's default CPU ("max") has the CRC32 and PMULL extensions: both aarch64 paths run
    assert "arm-pmull ok" in out and "arm-crc ok" in out and "portable ok" in out, out
    assert out.rstrip().endswith("3 paths, 0 failed"), out


@pytest.mark.skipif(CROSS is None, reason="needs Debian's aarch64 cross compiler (apt-get install gcc-aarch64-linux-gnu)")
def test_aarch64_builds_the_record_walk(tmp_path: Path) -> None:
    """The whole decoder (record walk and its dispatch included) compiles for aarch64 without warnings, with only
    the portable walk (the avx2 one is x86-64 code). Compiled, not run: no aarch64 Python here (CPython's headers
    of this x86-64 interpreter serve: both are LP64 little-endian Linux)."""
    include = sysconfig.get_paths()["include"]
    out = tmp_path / "_columns_arm64.o"
    build = subprocess.run([CROSS, "-O2", "-fwrapv", "-Wall", "-Werror", "-c", "-I", include,
                            str(INCLUDE / "_columns.c"), "-o", str(out)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert build.returncode == 0, build.stderr
    nm = shutil.which("aarch64-linux-gnu-nm") or shutil.which("nm")
    symbols = subprocess.run([nm, str(out)], capture_output=True, text=True, check=True).stdout
    assert "decode_records_portable" in symbols and "decode_records_avx2" not in symbols, symbols
