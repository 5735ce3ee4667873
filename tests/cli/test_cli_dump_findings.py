"""The problem reports kafka-dump-log prints after the files (Kafka 4.0's DumpLogSegments), on hand-made segments:
text on stderr in Kafka's order and wording, one JSON object per finding with ``--json``."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.records import build_batch

T0 = 1_700_000_000_000


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _log(path: Path, batches: list[tuple[int, int, int]]) -> None:
    """(base offset, record count, timestamp) per batch."""
    path.write_bytes(
        b"".join(bytes(build_batch([(b"k", b"v")] * n, base_offset=base, timestamp=ts)) for base, n, ts in batches)
    )


def _json_findings(stdout: str, kind: str) -> list[dict]:
    return [o for o in map(json.loads, stdout.splitlines()) if o["type"] == kind]


def test_non_consecutive_offsets_are_reported_newest_first_and_not_at_the_segment_start(tmp_path: Path) -> None:
    first = tmp_path / "00000000000000000000.log"
    _log(first, [(0, 3, T0), (5, 2, T0), (9, 1, T0)])  # gaps 2 -> 5 and 6 -> 9
    compacted = tmp_path / "00000000000000000010.log"
    _log(compacted, [(13, 2, T0), (15, 1, T0)])  # starts past its base offset: Kafka reports no gap for that
    result = run("dump", "--deep-iteration", first, compacted)
    err = result.stderr.splitlines()
    start = err.index(f"Non-consecutive offsets in {first.resolve()}")
    assert err[start + 1 : start + 3] == ["  6 is followed by 9", "  2 is followed by 5"]
    assert not any(str(compacted.resolve()) in line for line in err)
    js = run("dump", "--json", "--deep-iteration", first, compacted)
    assert _json_findings(js.stdout, "non_consecutive_offsets") == [
        {"type": "non_consecutive_offsets", "file": str(first.resolve()), "offset": 6, "nextOffset": 9},
        {"type": "non_consecutive_offsets", "file": str(first.resolve()), "offset": 2, "nextOffset": 5},
    ]


def test_time_index_out_of_order_and_offsets_not_found(tmp_path: Path) -> None:
    _log(tmp_path / "00000000000000000000.log", [(0, 3, T0 + 50), (3, 4, T0 + 10), (7, 3, T0 + 60)])
    (tmp_path / "00000000000000000000.index").write_bytes(b"")
    ti = tmp_path / "00000000000000000000.timeindex"
    entries = [(T0 + 50, 2), (T0 + 10, 6), (T0 + 70, 8), (T0 + 80, 20)]
    ti.write_bytes(b"".join(struct.pack(">qi", ts, off) for ts, off in entries))
    result = run("dump", "--verify-index-only", ti)
    assert result.exit_code == 1
    err = result.stderr.splitlines()
    name = str(ti.resolve())
    i = err.index(f"Found out of order timestamp in :{name}")
    assert err[i + 1] == f"  Index timestamp: {T0 + 10}, Previously indexed timestamp: {T0 + 50}"
    j = err.index("The following indexed offsets are not found in the log.")
    assert err[j + 1 : j + 3] == ["Indexed offset: 8, found log offset: 9", "Indexed offset: 20, found log offset: -1"]
    assert not any(line.startswith("Found timestamp mismatch") for line in err)
    js = run("dump", "--json", "--verify-index-only", ti)
    assert _json_findings(js.stdout, "timeindex_out_of_order") == [
        {"type": "timeindex_out_of_order", "file": name, "indexTimestamp": T0 + 10, "previousTimestamp": T0 + 50}
    ]
    assert _json_findings(js.stdout, "timeindex_offset_not_found") == [
        {"type": "timeindex_offset_not_found", "file": name, "indexOffset": 8, "logOffset": 9},
        {"type": "timeindex_offset_not_found", "file": name, "indexOffset": 20, "logOffset": -1},
    ]


def test_offset_index_mismatches_are_reported_newest_first(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    batches = [bytes(build_batch([(b"k", b"v")] * n, base_offset=b, timestamp=T0)) for b, n in ((0, 3), (3, 4), (7, 3))]
    log.write_bytes(b"".join(batches))
    pos1 = len(batches[0])
    index = tmp_path / "00000000000000000000.index"
    # (relative offset, position): right, then two entries pointing one batch too early.
    index.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in ((2, 0), (6, 0), (9, pos1))))
    result = run("dump", "--verify-index-only", index)
    assert result.exit_code == 1
    err = result.stderr.splitlines()
    i = err.index(f"Mismatches in :{index.resolve()}")
    assert err[i + 1 : i + 3] == ["  Index offset: 9, log offset: 6", "  Index offset: 6, log offset: 2"]
    js = run("dump", "--json", "--verify-index-only", index)
    assert [(o["indexOffset"], o["logOffset"]) for o in _json_findings(js.stdout, "index_mismatch")] == [(9, 6), (6, 2)]
