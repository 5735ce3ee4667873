"""A real process under libfiu: EIO injected into write() while the manager appends to one dir.

The fault is process-wide, so it is switched on with ``fiu-ctrl`` only while the child appends to the partition
on dir B, and off again before the child touches dir A. The child signals with ``mkdir`` (not a write, so the
signal survives the fault) and prints its findings only after the fault is off.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

FIU_RUN = shutil.which("fiu-run")
FIU_CTRL = shutil.which("fiu-ctrl")

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from kafkalog.errors import KafkaStorageError
    from kafkalog.log.config import LogConfig
    from kafkalog.manager import LogManager

    a, b, flags = sys.argv[1:4]

    def signal(name):
        os.mkdir(os.path.join(flags, name))

    def wait(name):
        while not os.path.isdir(os.path.join(flags, name)):
            time.sleep(0.01)

    events = []
    m = LogManager([a, b], log_config=LogConfig.from_properties({"segment.bytes": 4096}))
    m.add_listener(events.append)
    m.startup()
    m.get_or_create_log("t", 0)
    m.get_or_create_log("t", 1)
    on = {m.log_dir_of("t", p): p for p in (0, 1)}
    for i in range(10):
        m.append("t", i % 2, [(b"k", b"v" * 100)])
    m.checkpoint_recovery_offsets()
    signal("ready")
    wait("fault-on")
    outcome = "no error"
    try:
        for _ in range(50):
            m.append("t", on[b], [(b"k", b"v" * 100)])
    except KafkaStorageError as e:
        outcome = repr(e.__cause__)
    signal("appended-b")
    wait("fault-off")
    info = m.append("t", on[a], [(b"after", b"x")])
    read_back = m.read("t", on[a], info.first_offset)[0].records()[0].key.decode()
    m.get_or_create_log("new", 0)
    result = {
        "outcome": outcome,
        "offline": m.offline_log_dirs,
        "live": m.live_log_dirs,
        "events": [[ev.log_dir, ev.directory_id, [list(p) for p in ev.partitions]] for ev in events],
        "dir_ids": {a: m.directory_id(a), b: m.directory_id(b)},
        "b_partition": on[b],
        "read_back": read_back,
        "new_in": m.log_dir_of("new", 0),
        "metrics": m.metrics(),
    }
    m.shutdown()
    print(json.dumps(result))
    """
)


@pytest.mark.skipif(FIU_RUN is None or FIU_CTRL is None, reason="libfiu's fiu-run/fiu-ctrl are not installed")
def test_eio_on_one_dir_under_libfiu(tmp_path: Path) -> None:
    a, b, flags = tmp_path / "a", tmp_path / "b", tmp_path / "flags"
    flags.mkdir()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                       os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [FIU_RUN, "-x", sys.executable, str(script), str(a), str(b), str(flags)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )

    def wait_for(name: str) -> None:
        while not (flags / name).is_dir():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)

    def ctrl(command: str) -> None:
        subprocess.run([FIU_CTRL, "-c", command, str(proc.pid)], check=True, timeout=60)

    try:
        wait_for("ready")
        rp_before = (b / "recovery-point-offset-checkpoint").read_bytes()
        ctrl("enable name=posix/io/rw/write,failinfo=5")  # EIO
        (flags / "fault-on").mkdir()
        wait_for("appended-b")
        ctrl("disable name=posix/io/rw/write")
        (flags / "fault-off").mkdir()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    r = json.loads(out.strip().splitlines()[-1])
    assert "Errno 5" in r["outcome"] or "Input/output" in r["outcome"], r["outcome"]
    assert r["offline"] == [str(b)] and r["live"] == [str(a)]
    assert r["events"] == [[str(b), r["dir_ids"][str(b)], [["t", r["b_partition"]]]]]
    assert r["read_back"] == "after" and r["new_in"] == str(a)
    assert r["metrics"]["OfflineLogDirectoryCount"] == 1 and r["metrics"]["OfflineReplicaCount"] == 1
    assert (a / ".kafka_cleanshutdown").exists() and not (b / ".kafka_cleanshutdown").exists()
    assert (b / "recovery-point-offset-checkpoint").read_bytes() == rp_before  # never rewritten, never torn
    assert not list(b.glob("*.tmp")) and not list(a.glob("*.tmp"))
