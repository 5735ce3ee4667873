"""kafkalog's cleaner against Kafka's (``kafka-oracle clean``) on random partitions, run live: the same files and
bytes (re-compressed batches: same headers and records), mtimes and checkpoint; Kafka's loader accepts
kafkalog's output where batches were re-compressed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cleaner_cases import assert_same_partition, clean_like_oracle
from tests.cleaner_random import write_random_log
from tests.oracle import needs_oracle, run_oracle, run_oracle_json

SEEDS = [(1, 60, 0, None), (2, 80, 70_000, None), (3, 50, 1_000, 24 * 12), (4, 70, 200_000, None)]


@needs_oracle
@pytest.mark.parametrize(("seed", "batches", "later_ms", "dedupe"), SEEDS)
def test_random_log_cleans_as_kafka(seed: int, batches: int, later_ms: int, dedupe: int | None,
                                    tmp_path: Path) -> None:
    src = write_random_log(tmp_path / "src", seed, batches=batches)
    now = src.last_ms + later_ms
    ours = tmp_path / "ours"
    shutil.copytree(src.part.parent, ours)
    part = ours / src.part.name
    args = [a for k, v in src.topic_config.items() for a in ("--config", f"{k}={v}")]
    args += ["--now-ms", str(now)]
    if dedupe is not None:
        args += ["--dedupe-buffer-bytes", str(dedupe)]
    kafka = run_oracle_json("clean", src.part, *args, "--out", tmp_path / "kafka")
    assert "exception" not in kafka or kafka["exception"] is None
    report = clean_like_oracle(part, src.topic_config, now, dedupe_buffer_bytes=dedupe or 128 << 20)
    assert report.cleaned is kafka["cleaned"]
    if report.result is not None:
        assert report.result.end_offset == kafka["endOffset"]
        assert report.result.stats.messages_read == kafka["stats"]["messagesRead"]
        assert report.result.stats.messages_written == kafka["stats"]["messagesWritten"]
        assert report.result.stats.invalid_messages_read == kafka["stats"]["invalidMessagesRead"]
    assert_same_partition(part, tmp_path / "kafka" / src.part.name, kafka["filesAfter"])
    if (tmp_path / "kafka" / "cleaner-offset-checkpoint").exists():
        assert (ours / "cleaner-offset-checkpoint").read_bytes() == \
            (tmp_path / "kafka" / "cleaner-offset-checkpoint").read_bytes()
    # Kafka's loader takes kafkalog's output (re-compressed batches included) as it is
    proc = run_oracle("verify", *args[:-2], part)
    assert proc.returncode == 0, proc.stdout[-2000:]
