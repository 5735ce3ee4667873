"""``kafkalog clean`` makes Kafka's cleaner round, not only its pass: after the pass (or when nothing is dirty
enough) ``deleteOldSegments`` deletes the segments wholly below the log start offset of every compacted log and,
for ``cleanup.policy=compact,delete``, the segments past ``retention.ms`` / ``retention.bytes``. Each case is
cleaned by ``kafka-oracle clean`` (Kafka's cleaner thread round) and by the CLI, and the segments left compared;
the dry run says the same."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.checkpoint.clean_shutdown import write_clean_shutdown
from tests.cleaner_cases import compacted_cases, prepare_case
from tests.conftest import needs_golden
from tests.oracle import needs_oracle, run_oracle

pytestmark = [needs_golden, needs_oracle]
CASE = "compact-updates-none"  # segments 0, 60, 116, 173, 231 and the active 291; newest timestamps ..230 to ..1190
NOW = 1700000002200

ROUNDS = {
    # nothing dirty enough; the log start offset (a DeleteRecords) moved past two segments
    "log-start": ({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99"}, 120, 291),
    # nothing dirty enough; three segments are older than retention.ms
    "retention-ms": ({"cleanup.policy": "compact,delete", "retention.ms": "1500",
                      "min.cleanable.dirty.ratio": "0.99"}, 0, 291),
    # nothing dirty enough; the log is over retention.bytes by two segments
    "retention-bytes": ({"cleanup.policy": "compact,delete", "retention.bytes": "9000",
                         "min.cleanable.dirty.ratio": "0.99"}, 0, 291),
    # a pass, then the segments below the log start offset (the cleaned ones included)
    "clean-then-log-start": ({"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                              "segment.bytes": "4096"}, 120, None),
}


def _prepare(tmp_path: Path, log_start: int, first_dirty: int | None) -> Path:
    part = prepare_case(compacted_cases()[CASE], tmp_path)
    topic = part.name.rpartition("-")[0]
    (part.parent / "log-start-offset-checkpoint").write_text(f"0\n1\n{topic} 0 {log_start}\n")
    if first_dirty is not None:
        (part.parent / "cleaner-offset-checkpoint").write_text(f"0\n1\n{topic} 0 {first_dirty}\n")
    return part


def _segments(part: Path) -> list[tuple[int, int]]:
    return sorted((int(n[:20]), os.path.getsize(part / n)) for n in os.listdir(part) if n.endswith(".log"))


@pytest.mark.parametrize("name", sorted(ROUNDS))
def test_a_round_deletes_what_kafkas_round_deletes(name: str, tmp_path: Path) -> None:
    config, log_start, first_dirty = ROUNDS[name]
    args = [a for k, v in config.items() for a in ("--config", f"{k}={v}")]
    theirs = _prepare(tmp_path / "kafka", log_start, first_dirty)
    kafka = json.loads(run_oracle("clean", theirs, *args, "--now-ms", NOW).stdout)
    assert kafka.get("exception") is None
    expected = [(s["baseOffset"], s["sizeBytes"]) for s in kafka["segmentsAfter"]]
    deleted = sum(kafka["deleteOldSegments"])
    assert deleted > 0 and len(expected) < len(kafka["segmentsBefore"])

    ours = _prepare(tmp_path / "ours", log_start, first_dirty)
    write_clean_shutdown(ours.parent, 1)
    before = _segments(ours)
    dry = CliRunner().invoke(main, ["clean", str(ours), *args, "--now-ms", str(NOW), "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    assert _segments(ours) == before
    result = CliRunner().invoke(main, ["clean", str(ours), *args, "--now-ms", str(NOW), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output.splitlines()[0])
    assert doc["cleaned"] is kafka["cleaned"]
    assert doc["retentionSegmentsDeleted"] == deleted == json.loads(dry.output.splitlines()[0])[
        "retentionSegmentsDeleted"]
    assert _segments(ours) == expected
    assert json.loads(result.output.splitlines()[-1])["retentionSegmentsDeleted"] == deleted  # the summary
    assert not [n for n in os.listdir(ours) if n.endswith(".deleted")]
    text = CliRunner().invoke(main, ["clean", str(ours), *args, "--now-ms", str(NOW)])
    assert text.exit_code == 0 and "deleted" not in text.output.splitlines()[0]  # a second round: nothing left
