"""What the Spark benchmarks share: the generated archive (Kafka's layout and indexes, written by kafkalog), the
in-process library loop they are compared with, and best-of / in-turns timing of the same aggregate query."""

from __future__ import annotations

import os
import shutil
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafkalog.records import CompressionType, build_batch  # noqa: E402
from kafkalog.segment.log_segment import LogSegment  # noqa: E402
from kafkalog.verify import verify_segment  # noqa: E402


def generate(root: Path, partitions: int, segments: int, segment_bytes: int, values: str = "repeated",
             value_bytes: int | None = None) -> tuple[int, int]:
    """Write the archive; returns (total bytes, total batches). ``values="repeated"``: batches are built once
    and re-based (64 distinct values: Parquet dictionary-encodes them); ``"random"``: every record gets 180 random
    bytes (nothing for Parquet to dictionary-encode or compress). ``value_bytes``: each repeated value is that
    long (issue 44's archive: 1 KiB) instead of ~150 bytes."""
    import random

    records_per_batch = 16
    codecs = [CompressionType.NONE, CompressionType.NONE, CompressionType.LZ4, CompressionType.NONE]
    templates = []
    for i, codec in enumerate(codecs):
        recs = [
            (f"key-{i}-{j}".encode(), _value(i, j, value_bytes), [("h", b"v")])
            for j in range(records_per_batch)
        ]
        templates.append(build_batch(recs, base_offset=0, compression=codec, producer_id=-1))
    rng = random.Random(20)

    def random_batch(k: int, offset: int) -> bytes:
        recs = [(f"key-{k % 4}-{j}".encode(), rng.randbytes(180), [("h", b"v")]) for j in range(records_per_batch)]
        return build_batch(recs, base_offset=offset, compression=codecs[k % len(codecs)], producer_id=-1)

    logdir = root / "logdir"
    logdir.mkdir(parents=True)
    total = batches = total_0 = batches_0 = 0
    for p in range(partitions):
        pdir = logdir / f"bench-{p}"
        if p > 0:  # partitions are independent logs: copies of the first one are just as valid (and faster)
            shutil.copytree(logdir / "bench-0", pdir)
            total += total_0
            batches += batches_0
            continue
        pdir.mkdir()
        offset = 0
        for _s in range(segments):
            seg = LogSegment.open(pdir, offset)
            size = 0
            k = 0
            while size < segment_bytes:
                if values == "random":
                    t = random_batch(k, offset)
                else:
                    t = bytearray(templates[k % len(templates)])
                    struct.pack_into(">q", t, 0, offset)  # baseOffset is outside the CRC: re-basing keeps it valid
                seg.append(bytes(t))
                offset += records_per_batch
                size += len(t)
                k += 1
            batches += k
            total += size
            seg.close()
        total_0, batches_0 = total, batches
    return total, batches


def _value(i: int, j: int, size: int | None) -> bytes:
    text = f"value-{i}-{j}-".encode()
    return text * 12 if size is None else (text * (size // len(text) + 1))[:size]


def library_loop(items) -> float:
    t = time.perf_counter()
    bad = [s for s in (verify_segment(i) for i in items) if s.status != "ok"]
    assert not bad, bad[:3]
    return time.perf_counter() - t


def load_average() -> float:
    return os.getloadavg()[0]


def best_of(fn, rounds: int) -> tuple[float, object]:
    """(best seconds, result) over ``rounds`` calls of ``fn``."""
    best = None
    for _ in range(rounds):
        t = time.perf_counter()
        res = fn()
        s = time.perf_counter() - t
        if best is None or s < best[0]:
            best = (s, res)
    return best


def aggregates(df) -> tuple[int, int]:
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS v").collect()[0]
    return int(row.n), int(row.v or 0)


def in_turns(frames: dict, rounds: int) -> tuple[dict[str, float], dict[str, int]]:
    """({name: best seconds of :func:`aggregates`}, {name: tasks}) of warmed-up DataFrames run in turns."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name, df in frames.items():
            t = time.perf_counter()
            aggregates(df)
            best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
    return best, {name: df.rdd.getNumPartitions() for name, df in frames.items()}
