"""Child process for the kill -9 crash harness: appends random batches through a ``LogManager`` until killed.

Usage: ``python crash_child.py CONFIG_JSON`` with keys ``dirs`` (log dirs), ``seed``, ``partitions``, ``journal``
(path), ``max_ops``. After each flush + recovery-point checkpoint it appends ``"<partition> <flushed offset>"``
to the journal and fsyncs it, so the parent knows which records were durable when the kill landed. Prints
``ready`` once startup (which may be a recovery) is done.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalog.manager.log_manager import LogManager  # noqa: E402
from reliability.workload import TOPIC, append_random, log_config  # noqa: E402


def main(cfg: dict) -> int:
    rng = random.Random(cfg["seed"])
    mgr = LogManager(
        cfg["dirs"],
        log_config=log_config(),
        properties={"log.flush.offset.checkpoint.interval.ms": 3_600_000, "log.retention.check.interval.ms": 3_600_000,
                    "node.id": 1, "cluster.id": "crash-harness-cluster0"},
    )
    mgr.startup()
    parts = list(range(cfg["partitions"]))
    logs = {p: mgr.get_or_create_log(TOPIC, p) for p in parts}
    journal = os.open(cfg["journal"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    print("ready", flush=True)
    for _ in range(cfg["max_ops"]):
        p = rng.choice(parts)
        append_random(logs[p], TOPIC, p, rng, append=lambda recs, p=p, **kw: mgr.append(TOPIC, p, recs, **kw))
        r = rng.random()
        if r < 0.08:
            mgr.flush(TOPIC, p)
            mgr.checkpoint_recovery_offsets()
            os.write(journal, f"{p} {logs[p].recovery_point}\n".encode())
            os.fsync(journal)
        elif r < 0.10:
            mgr.roll(TOPIC, p)
    mgr.shutdown()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
