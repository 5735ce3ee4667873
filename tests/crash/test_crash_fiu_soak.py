"""Fault-injection soak with libfiu: random POSIX I/O faults (write, short write, read, fsync, open/close,
rename/unlink, truncate) hit one log dir of a 3-dir LogManager that keeps serving appends, reads, rolls, retention
and checkpoints (``tests/reliability/fiu_soak_child.py`` under ``fiu-run -x``).

Invariants: the faulting dir goes offline within the operation that hit the fault, with exactly one event; the
other dirs keep serving; ops on the offline dir answer KafkaStorageError; no unhandled exception; no thread left
after shutdown, no hang (child watchdog); no checkpoint/metadata file torn; after a restart without faults every
flushed record (journaled by the child) is recovered on every dir and the indexes pass the strict check.

``KAFKALOG_FIU_RUNS`` (default 8) sets the number of child runs; each uses another fault point, victim and seed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalog.checkpoint.leader_epoch import read_leader_epoch_checkpoint
from kafkalog.checkpoint.meta_properties import read_meta_properties
from kafkalog.checkpoint.offset_checkpoint import read_offset_checkpoint
from kafkalog.checkpoint.partition_metadata import read_partition_metadata
from kafkalog.manager.log_manager import LogManager
from tests.reliability.workload import read_journal, verify_log

FIU_RUN = shutil.which("fiu-run")
RUNS = int(os.environ.get("KAFKALOG_FIU_RUNS", "8"))
CHILD = Path(__file__).resolve().parents[1] / "reliability" / "fiu_soak_child.py"
TOPIC = "soak"
# (fault point, probability per call): all I/O, then one family at a time
POINTS = [
    ("posix/io/*", 0.003),
    ("posix/io/rw/*", 0.005),
    ("posix/io/sync/*", 0.05),
    ("posix/io/oc/*", 0.01),
    ("posix/io/dir/*", 0.05),
    ("posix/io/rw/write", 0.01),
    ("posix/io/rw/write/reduce", 0.3),
    ("posix/io/rw/ftruncate", 0.2),
]

pytestmark = pytest.mark.skipif(FIU_RUN is None, reason="libfiu's fiu-run not installed (Debian package fiu-utils)")


def check_metadata_files(dirs: list[Path]) -> int:
    """Every checkpoint and metadata file present parses (none is torn). Returns how many were checked."""
    n = 0
    for d in dirs:
        for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
            if (d / name).exists():
                read_offset_checkpoint(d / name)
                n += 1
        if (d / "meta.properties").exists():
            read_meta_properties(d / "meta.properties")
            n += 1
        for part in d.glob(f"{TOPIC}-*"):
            if (part / "leader-epoch-checkpoint").exists():
                read_leader_epoch_checkpoint(part / "leader-epoch-checkpoint")
                n += 1
            if (part / "partition.metadata").exists():
                read_partition_metadata(part / "partition.metadata")
                n += 1
    return n


@pytest.mark.parametrize("run", range(RUNS))
def test_fiu_soak(tmp_path: Path, run: int) -> None:
    point, prob = POINTS[run % len(POINTS)]
    dirs = [tmp_path / f"d{i}" for i in range(3)]
    cfg = {
        "dirs": [str(d) for d in dirs], "seed": 1000 + run, "partitions": 6, "journal": str(tmp_path / "journal"),
        "report": str(tmp_path / "report.json"), "fault_point": point, "probability": prob, "victim": run % 3,
        "rounds": 12, "window_ops": 150, "watchdog_s": 150,
    }
    proc = subprocess.run([FIU_RUN, "-x", sys.executable, str(CHILD), json.dumps(cfg)], capture_output=True,
                          timeout=300)
    assert proc.returncode == 0, f"child failed ({proc.returncode}): {proc.stderr.decode()[-4000:]}"
    report = json.loads((tmp_path / "report.json").read_text())
    print(f"fiu run {run} {point}@{prob}: {({k: v for k, v in report.items() if k != 'events'})}")
    assert report["unexpected"] == [], "\n".join(report["unexpected"])
    assert report["threads_alive_after_shutdown"] == []
    victim = report["victim"]
    assert report["offline_dirs"] in ([], [victim])
    if report["offline_dirs"]:
        assert report["offline_checks"] == 1 and report["post_offline_ops"] > 0
        assert [e["log_dir"] for e in report["events"]] == [victim]
    check_metadata_files(dirs)

    # restart without faults: every flushed record is back, on every dir
    flushed = read_journal(tmp_path / "journal")
    with LogManager(dirs, properties={"node.id": 1, "cluster.id": "fiu-soak-cluster-000"}) as mgr:
        assert mgr.offline_log_dirs == []
        for p in range(6):
            log = mgr.get_log(TOPIC, p)
            assert log is not None, f"{TOPIC}-{p} not loaded after restart"
            verify_log(log, TOPIC, p, flushed=flushed.get(p, 0), read=lambda off, p=p, m=mgr: m.read(TOPIC, p, off))
    check_metadata_files(dirs)
