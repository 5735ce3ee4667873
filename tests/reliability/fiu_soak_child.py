"""Child process for the libfiu soak: a 3-dir LogManager serving appends, reads, rolls, retention and checkpoints
while random POSIX I/O faults are injected, confined to one "victim" dir.

Run under ``fiu-run -x`` (which preloads libfiu); faults are switched on with libfiu's own control API
(``fiu_enable_random`` via ctypes) only while the child operates on the victim dir's partitions, so every other
dir must keep serving. Usage: ``fiu-run -x python fiu_soak_child.py CONFIG_JSON``; writes a JSON report to
``cfg["report"]`` and appends ``"<partition> <flushed offset>"`` lines to ``cfg["journal"]`` (outside fault
windows only).
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import random
import sys
import threading
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalog.errors import KafkaStorageError, ResourceExhaustedError  # noqa: E402
from kafkalog.manager.log_manager import LogManager  # noqa: E402
from reliability.workload import append_random, log_config, record_for  # noqa: E402

TOPIC = "soak"


class Fiu:
    """libfiu's control API in this process (present only under ``fiu-run``)."""

    def __init__(self) -> None:
        if "fiu" not in os.environ.get("LD_PRELOAD", ""):
            raise SystemExit("run me under fiu-run -x")
        self.lib = ctypes.CDLL("libfiu.so.0")
        self.lib.fiu_enable_random.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint,
                                               ctypes.c_float]
        self.lib.fiu_disable.argtypes = [ctypes.c_char_p]

    def on(self, name: str, probability: float) -> None:
        self.lib.fiu_enable_random(name.encode(), 1, None, 0, ctypes.c_float(probability))

    def off(self, name: str) -> None:
        self.lib.fiu_disable(name.encode())


def main(cfg: dict) -> int:
    faulthandler.dump_traceback_later(cfg.get("watchdog_s", 120), exit=True)  # a hang ends the child with stacks
    fiu = Fiu()
    rng = random.Random(cfg["seed"])
    point, prob = cfg["fault_point"], cfg["probability"]
    events: list = []
    report: dict = {"unexpected": [], "ops": 0, "window_ops": 0, "storage_errors": 0, "offline_checks": 0,
                    "post_offline_ops": 0, "other_dir_ops_after": 0}
    mgr = LogManager(
        cfg["dirs"],
        log_config=log_config(),
        topic_configs={TOPIC: {**{"segment.bytes": 16384, "segment.index.bytes": 1024, "index.interval.bytes": 512},
                               "retention.bytes": 40000}},
        properties={"log.flush.offset.checkpoint.interval.ms": 3_600_000, "log.retention.check.interval.ms": 3_600_000,
                    "file.delete.delay.ms": 0, "node.id": 1, "cluster.id": "fiu-soak-cluster-000"},
    )
    mgr.add_listener(events.append)
    mgr.startup()
    parts = list(range(cfg["partitions"]))
    logs = {p: mgr.get_or_create_log(TOPIC, p) for p in parts}
    by_dir: dict[str, list[int]] = {}
    for p in parts:
        by_dir.setdefault(str(Path(logs[p].dir).parent), []).append(p)
    victim = sorted(by_dir)[cfg["victim"] % len(by_dir)]
    report["victim"] = victim
    journal = open(cfg["journal"], "a")  # noqa: SIM115

    def op(p: int) -> None:
        """One random operation on partition p through the manager."""
        r = rng.random()
        if r < 0.55:
            append_random(logs[p], TOPIC, p, rng, append=lambda recs, **kw: mgr.append(TOPIC, p, recs, **kw))
        elif r < 0.70:
            log = logs[p]
            off = rng.randint(log.log_start_offset, log.log_end_offset)
            for b in mgr.read(TOPIC, p, off, 4096):
                for rec in b.records():
                    if (rec.key, rec.value) != record_for(TOPIC, p, rec.offset):
                        raise AssertionError(f"{TOPIC}-{p}: read a changed record at {rec.offset}")
        elif r < 0.76:
            mgr.roll(TOPIC, p)
        elif r < 0.84:
            mgr.delete_old_segments(TOPIC, p)
            mgr.delete_logs()
        elif r < 0.92:
            mgr.flush(TOPIC, p)
        else:
            d = str(Path(logs[p].dir).parent)
            mgr.checkpoint_recovery_offsets([d])
            mgr.checkpoint_log_start_offsets([d])

    def safe_op(p: int, *, faulty: bool) -> bool:
        """Run op(p); True if it raised KafkaStorageError. A process limit libfiu made up (EMFILE, ENFILE, ENOMEM
        from open/mmap) is the retriable ResourceExhaustedError and leaves the dir online. Anything else
        unexpected is recorded."""
        try:
            op(p)
            return False
        except KafkaStorageError:
            return True
        except ResourceExhaustedError:
            report["resource_errors"] = report.get("resource_errors", 0) + 1
            return False
        except BaseException as exc:  # noqa: BLE001
            if faulty:
                fiu.off(point)
            report["unexpected"].append(f"partition {p}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            if faulty:
                fiu.on(point, prob)
            return False

    def journal_flushed() -> None:
        for d, ps in by_dir.items():
            if d in mgr.live_log_dirs:
                for p in ps:
                    mgr.flush(TOPIC, p)
                    journal.write(f"{p} {logs[p].recovery_point}\n")
        journal.flush()
        os.fsync(journal.fileno())

    # warm-up without faults: every code path (and every lazy import) once
    for p in parts:
        for _ in range(6):
            op(p)
    journal_flushed()

    offline_seen = False
    for rnd in range(cfg["rounds"]):
        for d, ps in by_dir.items():
            if d == victim:
                continue
            for _ in range(5):
                p = rng.choice(ps)
                if safe_op(p, faulty=False):
                    report["unexpected"].append(f"round {rnd}: healthy dir {d} raised KafkaStorageError")
                report["ops"] += 1
                if offline_seen:
                    report["other_dir_ops_after"] += 1
        if not offline_seen:
            fiu.on(point, prob)
            try:
                for _ in range(cfg["window_ops"]):
                    p = rng.choice(by_dir[victim])
                    failed = safe_op(p, faulty=True)
                    report["window_ops"] += 1
                    report["ops"] += 1
                    now_offline = victim in mgr.offline_log_dirs
                    if failed:
                        report["storage_errors"] += 1
                    if failed and not now_offline:
                        report["unexpected"].append(f"KafkaStorageError on {victim} but the dir is still online")
                    if now_offline:
                        report["offline_checks"] += 1
                        offline_seen = True
                        break
            finally:
                fiu.off(point)
            mine = [e for e in events if e.log_dir == victim]
            if offline_seen and len(mine) != 1:
                report["unexpected"].append(f"{len(mine)} offline events for {victim}, expected 1")
        else:
            for p in by_dir[victim]:  # an offline dir answers with KafkaStorageError, no new event
                for name, call in (
                    ("append", lambda p=p: mgr.append(TOPIC, p, [(b"k", b"v")])),
                    ("read", lambda p=p: mgr.read(TOPIC, p, 0)),
                    ("roll", lambda p=p: mgr.roll(TOPIC, p)),
                    ("flush", lambda p=p: mgr.flush(TOPIC, p)),
                ):
                    try:
                        call()
                        report["unexpected"].append(f"{name} on offline partition {p} succeeded")
                    except KafkaStorageError:
                        report["post_offline_ops"] += 1
                    except BaseException as exc:  # noqa: BLE001
                        report["unexpected"].append(f"{name} on offline partition {p}: {type(exc).__name__}: {exc}")
        if rnd % 3 == 2:
            journal_flushed()
    journal_flushed()
    report["offline_dirs"] = list(mgr.offline_log_dirs)
    report["events"] = [{"log_dir": e.log_dir, "partitions": [list(x) for x in e.partitions]} for e in events]
    others = [e for e in events if e.log_dir != victim]
    if others:
        report["unexpected"].append(f"offline events for healthy dirs: {others}")
    mgr.shutdown()
    alive = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
    report["threads_alive_after_shutdown"] = alive
    if alive:
        report["unexpected"].append(f"threads alive after shutdown: {alive}")
    faulthandler.cancel_dump_traceback_later()
    Path(cfg["report"]).write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
