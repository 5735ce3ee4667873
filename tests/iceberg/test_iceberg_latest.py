"""The latest-value-per-key view (``sync(..., latest_table=...)``, ``--latest-by-key``) against Kafka's own logs:
the golden compacted partitions before and after Kafka's cleaner, read with ``kafka-oracle dump``."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")

from click.testing import CliRunner  # noqa: E402
from kafkalog_cli.main import main  # noqa: E402

from kafkalog.errors import IcebergConfigError, InvalidArgumentError  # noqa: E402
from kafkalog.iceberg import NEXT_OFFSETS, sync  # noqa: E402
from tests.conftest import GOLDEN, needs_golden  # noqa: E402
from tests.iceberg.test_iceberg_sync import open_table  # noqa: E402
from tests.iceberg_expect import consumer_view, table_rows  # noqa: E402
from tests.oracle import needs_oracle, run_oracle_json  # noqa: E402

pytestmark = [needs_golden, needs_oracle]

COMPACTED = GOLDEN / "compacted"


def _dir(case: str, side: str = "input") -> Path:
    return next(p for p in (COMPACTED / case / side).iterdir() if p.is_dir())


def kafka_batches(part: Path, bases: set[int] | None = None) -> list[dict]:
    """Every batch of the partition's .log files (only those with base offsets in ``bases``), as Kafka reads them."""
    logs = sorted(p for p in part.glob("*.log") if bases is None or int(p.name[:20]) in bases)
    dumps = run_oracle_json("dump", *logs)
    return [b for d in (dumps if isinstance(dumps, list) else [dumps]) for b in d["batches"]]


def latest_view(rows: list) -> list:
    """A consumer's map after reading ``rows`` in order: key -> last row, a tombstone (null value) deleting it;
    records without a key left out. Sorted like ``table_rows``."""
    last: dict = {}
    for r in rows:
        if r[4] is not None:
            last[(r[0], r[1], r[4])] = r
    return sorted((r for r in last.values() if r[5] is not None), key=lambda r: (r[0], r[1], r[2]))


def expected(part: Path, bases: set[int] | None = None) -> list:
    topic, _, p = part.name.rpartition("-")
    return latest_view(consumer_view(kafka_batches(part, bases), topic, int(p)))


CASES = ["compact-tombstones-pass1", "compact-tombstones-pass2", "compact-txn-pass1", "compact-txn-pass2",
         "compact-null-keys", "compact-updates-gzip", "compact-legacy-v1-pass2", "compact-partial"]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_view_is_kafkas_latest_value_per_key_before_and_after_compaction(tmp_path, case):
    """The view of the log as written and of the log Kafka's cleaner made of it are the same rows: each key's
    latest record, none for a key whose latest record is a tombstone (also after the cleaner removed it)."""
    want = expected(_dir(case))
    assert want
    for side in ("input", "output"):
        wh = tmp_path / side
        result = sync([_dir(case, side)], "kafka.history", warehouse=wh, latest_table="kafka.latest")
        view = open_table(wh, "kafka.latest")
        assert table_rows(view) == want, side
        assert result.latest is not None and result.latest["table"] == "kafka.latest"
        assert json.loads(view.current_snapshot().summary[NEXT_OFFSETS]) == result.next_offsets
        assert [(f.name, str(f.transform)) for f in view.spec().fields] == [("topic", "identity"),
                                                                            ("partition", "identity")]  # fmt: skip


def test_tombstones_delete_keys_the_view_held_on_an_incremental_sync(tmp_path):
    """Sync pass 1's log, then the log after Kafka compacted it and new tombstones arrived (pass 2's input): the
    second sync adds only the new records, and the view deletes the keys they tombstone."""
    first, second = _dir("compact-tombstones-pass1"), _dir("compact-tombstones-pass2")
    wh = tmp_path / "wh"
    one = sync([first], "kafka.history", warehouse=wh, latest_table="kafka.latest")
    before = {r[4] for r in table_rows(open_table(wh, "kafka.latest"))}
    assert table_rows(open_table(wh, "kafka.latest")) == expected(first)
    two = sync([second], "kafka.history", warehouse=wh, latest_table="kafka.latest")
    stop = one.next_offsets["compact-tombstones-0"]
    assert two.rows == len([r for r in consumer_view(kafka_batches(second), "compact-tombstones", 0) if r[2] >= stop])
    rows = table_rows(open_table(wh, "kafka.latest"))
    assert rows == expected(second)
    deleted = before - {r[4] for r in rows}
    assert deleted and two.latest["tombstones"] >= len(deleted)


def test_incremental_syncs_of_a_growing_log_keep_the_view_exact(tmp_path):
    src = _dir("compact-txn-pass1")
    part = tmp_path / "logdir" / src.name
    part.mkdir(parents=True)
    bases = sorted(int(p.name[:20]) for p in src.glob("*.log"))
    assert len(bases) >= 3
    wh = tmp_path / "wh"
    for upto in (bases[1], bases[-1], None):
        for f in src.iterdir():
            if f.name[:20].isdigit() and (upto is None or int(f.name[:20]) <= upto):
                shutil.copy2(f, part / f.name)
        sync([part], "kafka.history", warehouse=wh, latest_table="kafka.latest")
        have = {int(p.name[:20]) for p in part.glob("*.log")}
        assert table_rows(open_table(wh, "kafka.latest")) == expected(src, have)


def test_a_sync_killed_between_the_two_commits_is_completed_by_the_next(tmp_path):
    """The table commits first; a sync SIGKILLed right before the view's commit leaves the view behind (never
    wrong); the next sync, with nothing new in the archive, folds in what the view lacks."""
    src = _dir("compact-updates-gzip")
    killed = subprocess.run([sys.executable, "-c", f"""
import os, signal
from kafkalog.iceberg import latest, sync
latest.update_latest = lambda main, view: os.kill(os.getpid(), signal.SIGKILL)
sync([{str(src)!r}], "kafka.history", warehouse={str(tmp_path / "wh")!r}, latest_table="kafka.latest")
"""], capture_output=True, timeout=600)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert open_table(tmp_path / "wh").current_snapshot() is not None
    assert open_table(tmp_path / "wh", "kafka.latest").current_snapshot() is None
    again = sync([src], "kafka.history", warehouse=tmp_path / "wh", latest_table="kafka.latest")
    assert again.snapshot_id is None and again.rows == 0
    assert again.latest["snapshot_id"] is not None
    assert table_rows(open_table(tmp_path / "wh", "kafka.latest")) == expected(src)
    third = sync([src], "kafka.history", warehouse=tmp_path / "wh", latest_table="kafka.latest")
    assert third.latest["snapshot_id"] is None


def test_the_view_is_refused_as_a_main_table_and_the_main_table_as_a_view(tmp_path):
    src = _dir("compact-updates-none")
    sync([src], "kafka.history", warehouse=tmp_path / "wh", latest_table="kafka.latest")
    with pytest.raises(IcebergConfigError, match="latest-value-per-key view of kafka.history"):
        sync([src], "kafka.latest", warehouse=tmp_path / "wh")
    with pytest.raises(IcebergConfigError, match="not the latest-value-per-key view"):
        sync([src], "kafka.other", warehouse=tmp_path / "wh", latest_table="kafka.history")
    with pytest.raises(InvalidArgumentError):
        sync([src], "kafka.history", warehouse=tmp_path / "wh", latest_table="kafka.history")


def test_cli_latest_by_key(tmp_path):
    src = _dir("compact-tombstones-pass1")
    res = CliRunner().invoke(main, ["iceberg", "sync", str(src), "--table", "kafka.history", "--warehouse",
                                    str(tmp_path / "wh"), "--latest-by-key", "kafka.latest", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["latest"]["table"] == "kafka.latest" and out["latest"]["keys_written"] == len(expected(src))
    again = CliRunner().invoke(main, ["iceberg", "sync", str(src), "--table", "kafka.history", "--warehouse",
                                      str(tmp_path / "wh"), "--latest-by-key", "kafka.latest"])  # fmt: skip
    assert again.exit_code == 0 and "nothing new" in again.output and "kafka.latest: up to date" in again.output
