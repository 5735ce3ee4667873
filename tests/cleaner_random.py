"""Random compacted partitions for the cleaner tests: keys with updates and tombstones, every codec, committed,
aborted and open transactions whose markers land in other segments, idempotent producers, keyless records, small
segments. Written through kafkalog's follower append (batches built with ``build_batch``), one seed one log."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.batch import build_batch, build_end_txn_marker_batch
from kafkalog.records.compression import CompressionType
from kafkalog.records.control import ControlRecordType, EndTransactionMarker
from kafkalog.records.record import Record

BASE_MS = 1_700_000_000_000


@dataclass
class RandomLog:
    part: Path
    topic_config: dict[str, str]
    #: the clock of the last append
    last_ms: int
    #: offset -> (key, value) of every data record appended, and the offsets of aborted data
    records: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    open_txn_first: int | None = None


def write_random_log(log_dir: Path, seed: int, *, batches: int = 60, txns: bool = True) -> RandomLog:
    rng = random.Random(seed)
    topic_config = {
        "cleanup.policy": "compact", "segment.bytes": str(rng.choice([700, 1200, 2500])),
        "index.interval.bytes": str(rng.choice([1, 256, 4096])), "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "60000",
    }
    part = log_dir / f"random{seed}-0"
    clock = [BASE_MS]
    log = Log.open(part, LogConfig.from_properties(topic_config), clock=lambda: clock[0])
    out = RandomLog(part, topic_config, BASE_MS)
    keys = [f"k{i}".encode() for i in range(rng.randint(3, 12))]
    codec = rng.choice(list(CompressionType))
    seqs: dict[int, int] = {}
    txn_open: dict[int, list[int]] = {}  # producer -> offsets of its open transaction
    offset = 0
    for _ in range(batches):
        clock[0] += rng.randint(1, 20)
        kind = rng.random()
        pid, txnal = -1, False
        if txns and kind < 0.35:
            pid = rng.choice([1000, 1001, 1002])
            txnal = True
            if pid in txn_open and rng.random() < 0.4:
                abort = rng.random() < 0.5
                marker = EndTransactionMarker(ControlRecordType.ABORT if abort else ControlRecordType.COMMIT, 0)
                log.append_as_follower(build_end_txn_marker_batch(marker, offset=offset, timestamp=clock[0],
                                                                  producer_id=pid, producer_epoch=0))
                if abort:
                    out.aborted.update(txn_open[pid])
                del txn_open[pid]
                offset += 1
                continue
        elif kind < 0.5:
            pid = 2000 + rng.randint(0, 1)
        recs = []
        for _ in range(rng.randint(1, 4)):
            key = None if rng.random() < 0.03 else rng.choice(keys)
            value = None if rng.random() < 0.15 else os.urandom(rng.randint(0, 30))
            recs.append(Record(offset + len(recs), clock[0] - rng.randint(0, 3), key, value))
        seq = seqs.get(pid, 0) if pid >= 0 else -1
        data = build_batch(recs, base_offset=offset, compression=codec, producer_id=pid,
                           producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=txnal,
                           partition_leader_epoch=0)
        log.append_as_follower(data)
        if pid >= 0:
            seqs[pid] = seq + len(recs)
        for r in recs:
            out.records[r.offset] = (r.key, r.value)
        if txnal:
            txn_open.setdefault(pid, []).extend(r.offset for r in recs)
        offset += len(recs)
    log.close()
    if txn_open:
        out.open_txn_first = min(min(v) for v in txn_open.values())
    out.last_ms = clock[0]
    # each segment's files carry the time of its last write, as on a broker
    for name in os.listdir(part):
        if name.endswith((".log", ".index", ".timeindex", ".txnindex")):
            path = part / name
            ms = _last_batch_ms(path) if name.endswith(".log") else None
            if ms is not None:
                for other in os.listdir(part):
                    if other.startswith(name[:-4]) and not other.endswith(".snapshot"):
                        os.utime(part / other, ns=(ms * 1_000_000, ms * 1_000_000))
    return out


def _last_batch_ms(path: Path) -> int | None:
    from kafkalog.records.reader import read_batches

    last = None
    for batch in read_batches(path.read_bytes()):
        last = max(last or 0, batch.max_timestamp)
    return last
