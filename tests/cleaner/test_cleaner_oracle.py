"""kafkalog's cleaner against Kafka's (``kafka-oracle clean``) on random partitions, run live: the same files and
bytes (re-compressed batches: same headers and records), mtimes and checkpoint, over two passes (the second
after more writes, past the first pass's delete horizons), by both implementations (compiled core, pure Python);
Kafka's checks accept kafkalog's output."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kafkalog.records.compression import CompressionType
from tests.cleaner_cases import assert_same_partition, clean_like_oracle
from tests.cleaner_random import RandomHistory, write_legacy_log
from tests.oracle import needs_oracle, run_oracle, run_oracle_json

#: seed, batches before the first pass, how long after the last write each pass runs, dedupe buffer bytes
#: (the seed picks the codec: seed % 5 is its id)
SEEDS = [(5, 60, 61_000, 24 * 40), pytest.param(2, 80, 70_000, None, marks=pytest.mark.slow),
         pytest.param(3, 50, 1_000, 24 * 12, marks=pytest.mark.slow),
         pytest.param(4, 70, 200_000, None, marks=pytest.mark.slow)]
#: codecs whose bytes kafkalog's libraries reproduce exactly, so byte counts of a second pass match too
_SAME_BYTES = ("NONE", "LZ4")


def _clean_both(history: RandomHistory, kafka_in: Path, ours: Path, kafka_out: Path, now: int,
                dedupe: int | None, *, verify: bool) -> None:
    args = [a for k, v in history.topic_config.items() for a in ("--config", f"{k}={v}")]
    extra = ["--dedupe-buffer-bytes", str(dedupe)] if dedupe is not None else []
    kafka = run_oracle_json("clean", kafka_in, *args, "--now-ms", str(now), *extra, "--out", kafka_out)
    assert kafka.get("exception") is None, kafka.get("exception")
    # the pure-Python path cleans a copy of the same input; both must give Kafka's output
    py_copy = ours.parent.parent / f"{ours.parent.name}-python" / ours.name
    shutil.rmtree(py_copy.parent, ignore_errors=True)
    shutil.copytree(ours.parent, py_copy.parent)
    py_report = clean_like_oracle(py_copy, history.topic_config, now, dedupe_buffer_bytes=dedupe or 128 << 20,
                                  path="python")
    assert_same_partition(py_copy, kafka_out / ours.name, kafka["filesAfter"])
    report = clean_like_oracle(ours, history.topic_config, now, dedupe_buffer_bytes=dedupe or 128 << 20,
                               path="compiled")
    assert py_report.result is None or py_report.result.stats == report.result.stats
    assert report.cleaned is kafka["cleaned"]
    if report.result is not None:
        assert report.result.end_offset == kafka["endOffset"]
        ours_stats, kafka_stats = report.result.stats.to_json(), dict(kafka["stats"])
        # re-compressed sizes differ by codec library (and so do the bytes a second pass reads)
        for key in ("bytesWritten",) if history.codec.name in _SAME_BYTES else ("bytesWritten", "bytesRead",
                                                                               "mapBytesRead"):
            ours_stats.pop(key), kafka_stats.pop(key)
        assert ours_stats == kafka_stats
    assert_same_partition(ours, kafka_out / ours.name, kafka["filesAfter"])
    ckpt = kafka_out / "cleaner-offset-checkpoint"
    if ckpt.exists():
        assert (ours.parent / "cleaner-offset-checkpoint").read_bytes() == ckpt.read_bytes()
    if verify:
        proc = run_oracle("verify", *args, ours)
        assert proc.returncode == 0, proc.stdout[-2000:]


@needs_oracle
@pytest.mark.parametrize(("seed", "batches", "later_ms", "dedupe"), SEEDS)
def test_random_log_cleans_as_kafka(seed: int, batches: int, later_ms: int, dedupe: int | None,
                                    tmp_path: Path) -> None:
    history = RandomHistory(seed)
    src = tmp_path / "src" / f"random{seed}-0"
    history.append(src, batches)
    ours = tmp_path / "ours" / src.name
    shutil.copytree(src.parent, ours.parent)
    _clean_both(history, src, ours, tmp_path / "kafka1", history.clock_ms + later_ms, dedupe,
                verify=False)
    # second pass: Kafka's output and ours continue with the same writes, cleaned past the first horizons
    kafka_part = tmp_path / "kafka1" / src.name
    state = history.rng.getstate(), history.clock_ms, history.offset, dict(history.seqs), \
        {k: list(v) for k, v in history.txn_open.items()}
    history.append(kafka_part, batches // 2)
    history.rng.setstate(state[0])
    history.clock_ms, history.offset, history.seqs, history.txn_open = state[1:]
    history.append(ours, batches // 2)
    _clean_both(history, kafka_part, ours, tmp_path / "kafka2", history.clock_ms + later_ms + 61_000,
                dedupe, verify=True)


@needs_oracle
@pytest.mark.parametrize("magic", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_random_legacy_log_cleans_as_kafka(magic: int, tmp_path: Path) -> None:
    """Magic 0/1 message sets (plain and compressed wrappers, tombstones; golden/compacted has magic 1 only)."""
    config = {"cleanup.policy": "compact", "segment.bytes": "700", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "60000"}
    src = tmp_path / "src" / f"legacy{magic}-0"
    last = write_legacy_log(src, 7 + magic, magic, config)
    ours = tmp_path / "ours" / src.name
    shutil.copytree(src.parent, ours.parent)
    history = RandomHistory(0)  # its codec (none) says which byte counts must match: legacy wrappers re-compress
    history.topic_config = config
    history.codec = CompressionType.GZIP
    _clean_both(history, src, ours, tmp_path / "kafka", last + 100_000, None, verify=True)
