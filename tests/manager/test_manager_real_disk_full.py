"""A real disk-full: one log dir on a tiny tmpfs, appends through the Log objects the manager hands out.

Runs the manager in a child process so that a crash (a SIGBUS from an mmap'd index on a full filesystem, say)
fails the test instead of killing pytest. Needs root and permission to mount (CI has both).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from kafkalog.errors import KafkaStorageError
    from kafkalog.log.config import LogConfig
    from kafkalog.manager import LogManager

    a, b = sys.argv[1], sys.argv[2]
    # Small segments and a dense index: rolls, index pages and snapshots all compete for the last free blocks.
    cfg = LogConfig.from_properties({"segment.bytes": 64 * 1024, "index.interval.bytes": 64})
    m = LogManager([a, b], log_config=cfg)
    m.startup()
    events = []
    m.add_listener(events.append)
    logs = {p: m.get_or_create_log("t", p) for p in range(4)}
    on_b = [p for p in logs if m.log_dir_of("t", p) == b]
    on_a = [p for p in logs if m.log_dir_of("t", p) == a]
    victim = logs[on_b[0]]
    value = os.urandom(300)
    appended, error = 0, None
    for i in range(100_000):
        try:
            victim.append_as_leader([(b"k%d" % i, value)])
            appended += 1
        except KafkaStorageError as exc:
            error = exc
            break
    after = {}
    for p in on_a:
        info = logs[p].append_as_leader([(b"k", b"after")])
        after[p] = logs[p].read(info.first_offset)[0].records()[0].value.decode()
    try:
        victim.read(0)
        read_offline = "no error"
    except KafkaStorageError as exc:
        read_offline = type(exc).__name__
    out = {
        "appended": appended,
        "error": type(error).__name__ if error else None,
        "cause_errno": getattr(error.__cause__, "errno", None) if error else None,
        "offline": m.offline_log_dirs,
        "events": [[e.log_dir, sorted(p for _, p in e.partitions)] for e in events],
        "on_b": on_b,
        "after": after,
        "read_offline": read_offline,
        "metrics": {k: m.metrics()[k] for k in ("OfflineLogDirectoryCount", "OfflineReplicaCount")},
    }
    m.shutdown()
    out["marker_a"] = os.path.exists(os.path.join(a, ".kafka_cleanshutdown"))
    out["marker_b"] = os.path.exists(os.path.join(b, ".kafka_cleanshutdown"))
    print(json.dumps(out))
    """
)


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def test_real_enospc_on_direct_log_appends_takes_only_that_dir_offline(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    if not _mount_tmpfs(b, "512k"):
        pytest.skip("needs root and permission to mount a tmpfs (CI has both)")
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(a), str(b)], capture_output=True, text=True,
                           timeout=300)
    finally:
        subprocess.run(["umount", "-l", str(b)], capture_output=True)
    assert r.returncode == 0, f"child died ({r.returncode}): {r.stderr[-2000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["error"] == "KafkaStorageError" and out["cause_errno"] == 28, out
    assert out["appended"] > 100, out  # the dir really filled up, it did not fail at once
    assert out["offline"] == [str(b)]
    assert out["events"] == [[str(b), sorted(out["on_b"])]]
    assert out["after"] and set(out["after"].values()) == {"after"}
    assert out["read_offline"] == "KafkaStorageError"
    assert out["metrics"] == {"OfflineLogDirectoryCount": 1, "OfflineReplicaCount": len(out["on_b"])}
    assert out["marker_a"] and not out["marker_b"]
