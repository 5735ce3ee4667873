"""Random compacted partitions for the cleaner tests: keys with updates and tombstones, every codec, committed,
aborted and open transactions whose markers land in other segments, idempotent producers, keyless records, small
and explicitly rolled segments. Written through kafkalog's follower append (batches built with ``build_batch``);
one seed, one history, which can be continued after a pass."""

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
from kafkalog.records.legacy import build_legacy_batch
from kafkalog.records.reader import read_batches
from kafkalog.records.record import Record

BASE_MS = 1_700_000_000_000


@dataclass
class RandomHistory:
    """The writes of one seed: what was appended, which data offsets were aborted, which are still open."""

    seed: int
    txns: bool = True
    rng: random.Random = field(init=False)
    topic_config: dict[str, str] = field(init=False)
    clock_ms: int = BASE_MS
    offset: int = 0
    records: dict[int, tuple[bytes | None, bytes | None]] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    txn_open: dict[int, list[int]] = field(default_factory=dict)
    seqs: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        rng = self.rng
        self.topic_config = {
            "cleanup.policy": "compact", "segment.bytes": str(rng.choice([600, 1200, 2500, 6000])),
            "index.interval.bytes": str(rng.choice([1, 256, 4096])), "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "60000",
        }
        self.keys = [f"k{i}".encode() for i in range(rng.randint(3, 12))]
        self.codec = CompressionType(self.seed % 5)

    @property
    def open_txn_first(self) -> int | None:
        return min((min(v) for v in self.txn_open.values()), default=None)

    def append(self, part: Path, batches: int) -> None:
        """Append ``batches`` random batches to the partition dir ``part`` (created if absent)."""
        rng = self.rng
        clock = [self.clock_ms]
        log = Log.open(part, LogConfig.from_properties(self.topic_config), clock=lambda: clock[0])
        try:
            for _ in range(batches):
                clock[0] += rng.randint(1, 20)
                if rng.random() < 0.08 and log.active_segment.size:
                    log.roll()
                self._one_batch(log, clock[0])
        finally:
            log.close()
        self.clock_ms = clock[0]
        _stamp_mtimes(part)

    def _one_batch(self, log: Log, now: int) -> None:
        rng = self.rng
        kind = rng.random()
        pid, txnal = -1, False
        if self.txns and kind < 0.35:
            pid, txnal = rng.choice([1000, 1001, 1002]), True
            if pid in self.txn_open and rng.random() < 0.4:
                abort = rng.random() < 0.5
                marker = EndTransactionMarker(ControlRecordType.ABORT if abort else ControlRecordType.COMMIT, 0)
                log.append_as_follower(build_end_txn_marker_batch(marker, offset=self.offset, timestamp=now,
                                                                  producer_id=pid, producer_epoch=0))
                if abort:
                    self.aborted.update(self.txn_open[pid])
                del self.txn_open[pid]
                self.offset += 1
                return
        elif kind < 0.5:
            pid = 2000 + rng.randint(0, 1)
        recs = []
        for _ in range(rng.randint(1, 4)):
            key = None if rng.random() < 0.03 else rng.choice(self.keys)
            value = None if rng.random() < 0.15 else rng.randbytes(rng.randint(0, 30))
            recs.append(Record(self.offset + len(recs), now - rng.randint(0, 3), key, value))
        seq = self.seqs.get(pid, 0) if pid >= 0 else -1
        log.append_as_follower(build_batch(
            recs, base_offset=self.offset, compression=self.codec, producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, is_transactional=txnal,
            partition_leader_epoch=0))
        if pid >= 0:
            self.seqs[pid] = seq + len(recs)
        for r in recs:
            self.records[r.offset] = (r.key, r.value)
        if txnal:
            self.txn_open.setdefault(pid, []).extend(r.offset for r in recs)
        self.offset += len(recs)


def _stamp_mtimes(part: Path) -> None:
    """Each segment's files get the time of its last batch, as a broker's writes leave them."""
    for name in os.listdir(part):
        if not name.endswith(".log"):
            continue
        stamps = [b.max_timestamp for b in read_batches((part / name).read_bytes())]
        if not stamps:
            continue
        ns = max(stamps) * 1_000_000
        for other in os.listdir(part):
            if other.startswith(name[:-4]) and not other.endswith(".snapshot"):
                os.utime(part / other, ns=(ns, ns))


def write_legacy_log(part: Path, seed: int, magic: int, topic_config: dict[str, str], batches: int = 60) -> int:
    """A magic 0 or 1 partition (plain messages and gzip/lz4/snappy wrappers, tombstones), appended as a follower;
    returns the clock of the last write. Magic 0 has no timestamps: its files get the write clock as mtime."""
    rng = random.Random(seed)
    clock = [BASE_MS]
    log = Log.open(part, LogConfig.from_properties(topic_config), clock=lambda: clock[0])
    offset = 0
    codecs = [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.SNAPPY]
    try:
        for _ in range(batches):
            clock[0] += 10
            recs = [Record(offset + j, clock[0], rng.choice([b"a", b"b", b"c", b"d", b"e"]),
                           None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 20)))
                    for j in range(rng.randint(1, 4))]
            log.append_as_follower(build_legacy_batch(recs, magic=magic, base_offset=offset,
                                                      compression=rng.choice(codecs), timestamp=clock[0]))
            offset += len(recs)
    finally:
        log.close()
    _stamp_mtimes(part)
    for f in part.iterdir():
        if not f.name[:20].isdigit() or f.name.endswith(".snapshot"):
            continue
        if f.stat().st_mtime_ns < 0 or magic == 0:
            ns = (BASE_MS + int(f.name[:20]) * 10) * 1_000_000
            os.utime(f, ns=(ns, ns))
    return clock[0]
