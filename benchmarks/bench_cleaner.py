"""Benchmark: kafkalog's log cleaner against Kafka's (``kafka-oracle clean``) on the same dirty log, in the same run.

    python benchmarks/bench_cleaner.py [--mb 1024] [--keys 1000000] [--value-bytes 100] [--codec none]
                                       [--segment-bytes 104857600] [--dedupe-mb 128]

A compacted partition of about ``--mb`` MB gets updates of ``--keys`` keys (uniformly random, 10 records a batch)
in segments of ``--segment-bytes``; its last segment stays active. On fresh copies (mtimes kept) it times:

* ``plain_read``: reading every ``.log`` byte of the partition once (the physical reference);
* ``kafkalog_clean``: ``clean_partition`` on an open log (one pass, the loading excluded), in a child process
  whose peak RSS is reported (bounded by the offset map and I/O buffers, not by the log);
* ``kafka_clean``: ``kafka-oracle clean --in-place`` (JVM start and Kafka's load included: the figure is a lower
  bound of Kafka's cleaning speed; ``kafka_jvm_start`` is ``kafka-oracle version`` for scale).

MB/s are cleanable MB (the segments below the active one) per second. Figures are wall-clock on the current
machine, for comparison between runs, not thresholds. Keep sizes small on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkalog.cleaner import CleanerConfig, clean_partition
from kafkalog.log import Log, LogConfig
from kafkalog.records.batch import build_batch
from kafkalog.records.compression import CompressionType
from kafkalog.records.record import Record

T0 = 1_700_000_000_000
ORACLE = Path(__file__).resolve().parents[2] / "shared" / "kafka-oracle" / "bin" / "kafka-oracle"


def _write(part: Path, cfg: dict[str, str], mb: int, keys: int, value_bytes: int, codec: CompressionType) -> int:
    rng = random.Random(1)
    log = Log.open(part, LogConfig.from_properties(cfg), clock=lambda: T0)
    offset, target = 0, mb * 1_000_000
    value = b"v" * value_bytes
    while log.size < target:
        recs = [Record(offset + i, T0 + offset, b"key-%d" % rng.randrange(keys), value) for i in range(10)]
        log.append_as_follower(build_batch(recs, base_offset=offset, compression=codec))
        offset += 10
    log.roll()
    log.append_as_follower(build_batch([Record(offset, T0 + offset, b"last", value)], base_offset=offset))
    log.close()
    return sum(s.size for s in _segments_below_active(part))


def _segments_below_active(part: Path) -> list:
    logs = sorted(part.glob("*.log"))

    class _S:
        def __init__(self, p: Path) -> None:
            self.size = p.stat().st_size

    return [_S(p) for p in logs[:-1]]


def _plain_read(part: Path) -> None:
    for p in sorted(part.glob("*.log")):
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass


def _ours(part: str, cfg: dict[str, str], dedupe: int, now: int) -> None:
    log = Log.open(part, LogConfig.from_properties(cfg), clock=lambda: now)
    t = time.perf_counter()
    clean_partition(log, checkpointed=None, now_ms=now, config=CleanerConfig(dedupe_buffer_size=dedupe))
    elapsed = time.perf_counter() - t
    log.close()
    print(f"@elapsed {elapsed}", flush=True)


def _copy(src: Path, root: Path, name: str) -> Path:
    dst = root / name / src.name
    shutil.copytree(src, dst)
    return dst


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--codec", default="none", choices=[c.name.lower() for c in CompressionType])
    ap.add_argument("--segment-bytes", type=int, default=100 << 20)
    ap.add_argument("--dedupe-mb", type=int, default=128)
    args = ap.parse_args()
    cfg = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_bytes), "min.cleanable.dirty.ratio": "0.01"}
    dedupe = args.dedupe_mb << 20
    now = T0 + 10_000_000
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "src" / "bench-0"
        cleanable = _write(src, cfg, args.mb, args.keys, args.value_bytes, CompressionType[args.codec.upper()])
        figures: dict[str, float] = {"cleanable_MB": cleanable / 1e6}

        t = time.perf_counter()
        _plain_read(_copy(src, root, "read"))
        figures["plain_read_s"] = time.perf_counter() - t

        part = _copy(src, root, "ours")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import bench_cleaner as b; "
                f"b._ours({str(part)!r}, {cfg!r}, {dedupe}, {now})")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        figures["kafkalog_clean_s"] = float(out.stdout.split("@elapsed ")[1])
        figures["kafkalog_peak_rss_MB"] = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024

        if ORACLE.exists():
            kpart = _copy(src, root, "kafka")
            args_k = [a for k, v in cfg.items() for a in ("--config", f"{k}={v}")]
            t = time.perf_counter()
            subprocess.run([str(ORACLE), "clean", str(kpart), *args_k, "--now-ms", str(now), "--dedupe-buffer-bytes",
                            str(dedupe), "--in-place"], capture_output=True, check=True, env=dict(os.environ))
            figures["kafka_clean_s"] = time.perf_counter() - t
            t = time.perf_counter()
            subprocess.run([str(ORACLE), "version"], capture_output=True, check=True)
            figures["kafka_jvm_start_s"] = time.perf_counter() - t
        for name in ("plain_read", "kafkalog_clean", "kafka_clean"):
            if f"{name}_s" in figures:
                figures[f"{name}_MBps"] = cleanable / figures[f"{name}_s"] / 1e6
        if "kafka_clean_s" in figures:
            figures["kafkalog_vs_kafka"] = figures["kafka_clean_s"] / figures["kafkalog_clean_s"]
    for k, v in figures.items():
        print(f"{k:28s} {v:12.3f}")


if __name__ == "__main__":
    main()
