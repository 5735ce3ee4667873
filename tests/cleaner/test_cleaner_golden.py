"""kafkalog's cleaner on the 18 cases Kafka's own ``Cleaner`` cleaned (``golden/compacted``): the same files, bytes
(re-compressed batches: same headers and records), mtimes, checkpoint and ``CleanerStats``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cleaner_cases import (
    CLEANER_PATHS,
    COMPACTED,
    assert_same_partition,
    clean_like_oracle,
    compacted_cases,
    option,
    prepare_case,
)
from tests.conftest import needs_golden

CASES = compacted_cases()


@needs_golden
def test_every_case_is_replayed() -> None:
    assert len(CASES) == 18


@needs_golden
@pytest.mark.parametrize("path", CLEANER_PATHS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_cleaner_matches_kafka(name: str, path: str, tmp_path: Path) -> None:
    """Both implementations of the cleaner (compiled core, pure Python) give Kafka's output."""
    case = CASES[name]
    expected = json.loads((COMPACTED / case["dir"] / "clean.json").read_text())
    part = prepare_case(case, tmp_path)
    report = clean_like_oracle(part, case["cleanConfig"], case["nowMs"],
                               dedupe_buffer_bytes=option(case["cleanArgs"], "--dedupe-buffer-bytes", 128 << 20),
                               path=path)
    assert report.cleaned is expected["cleaned"]
    assert report.to_clean.first_dirty_offset == case["firstDirtyOffset"]
    assert report.result is not None
    assert report.result.end_offset == case["endOffset"]
    assert report.result.delete_horizon_ms == case["deleteHorizonMs"]
    assert report.result.legacy_delete_horizon_ms == case["legacyDeleteHorizonMs"]
    stats = report.result.stats.to_json()
    # bytes written count re-compressed batches, whose size depends on the codec library
    if stats != expected["stats"]:
        assert {k: v for k, v in stats.items() if k != "bytesWritten"} == \
            {k: v for k, v in expected["stats"].items() if k != "bytesWritten"}
        assert any(c in name for c in ("gzip", "snappy", "zstd", "legacy")), stats
    out = COMPACTED / case["dir"] / "output"
    assert (part.parent / "cleaner-offset-checkpoint").read_bytes() == (out / "cleaner-offset-checkpoint").read_bytes()
    assert_same_partition(part, out / case["partition"], expected["filesAfter"])
