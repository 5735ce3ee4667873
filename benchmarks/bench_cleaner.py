"""Benchmark: kafkalog's log cleaner against Kafka's (``kafka-oracle clean``) on the same dirty log, in the same run.

    python benchmarks/bench_cleaner.py [--mb 1024] [--keys 1000000] [--value-bytes 100] [--codec none]
                                       [--segment-bytes 104857600] [--dedupe-mb 128] [--python] [--no-kafka]

A compacted partition of about ``--mb`` MB gets updates of ``--keys`` keys (uniformly random, 10 records a batch)
in segments of ``--segment-bytes``; its last segment stays active. On fresh copies (mtimes kept) it measures, each
in its own child process (wall time, and CPU time = user + system of that process from ``wait4``, which on a
loaded shared machine is the steadier figure; peak RSS from the same ``wait4``):

* ``plain_read``: reading every ``.log`` byte of the partition once (the physical reference; the child also
  reports the reading alone);
* ``kafkalog_clean``: ``clean_partition`` on an open log (one pass; the child also reports the pass alone, wall
  and CPU, without interpreter start and log loading, and its RSS before the pass);
* ``kafka_clean``: ``kafka-oracle clean --in-place`` (JVM start, Kafka's load and close included);
  ``kafka_load`` is ``kafka-oracle load --in-place`` of another copy (JVM start, load, close, no cleaning), so
  ``kafka_clean - kafka_load`` estimates Kafka's pass alone; ``kafka_jvm_start`` is ``kafka-oracle version``.

``--python`` runs kafkalog's pass with ``KAFKALOG_NO_EXTENSIONS=1`` (the pure-Python path). MB/s are cleanable
MB (the segments below the active one) per second. The output of both cleaners is compared file by file (sha256:
the same bytes for uncompressed and lz4 logs). Figures are for comparison between runs on one machine, not
thresholds. Keep sizes small on a shared machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    return sum(p.stat().st_size for p in sorted(part.glob("*.log"))[:-1])


def _plain_read(part: str) -> None:
    """The child: read every .log byte once; print the read's wall and CPU time."""
    wall, cpu = time.perf_counter(), time.process_time()
    for p in sorted(Path(part).glob("*.log")):
        with open(p, "rb") as f:
            while f.read(1 << 20):
                pass
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print("@" + json.dumps({"wall": wall, "cpu": cpu}), flush=True)


def _ours(part: str, cfg: dict[str, str], dedupe: int, now: int) -> None:
    """The child: open the log, run one pass, print the pass's wall and CPU time, RSS before it, its stats."""
    import resource

    from kafkalog.cleaner import CleanerConfig, clean_partition

    log = Log.open(part, LogConfig.from_properties(cfg), clock=lambda: now)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, cpu = time.perf_counter(), time.process_time()
    report = clean_partition(log, checkpointed=None, now_ms=now, config=CleanerConfig(dedupe_buffer_size=dedupe))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    log.close()
    stats = report.result.stats.to_json() if getattr(report, "result", None) else {}
    print("@" + json.dumps({"wall": wall, "cpu": cpu, "rss_before_kb": rss_before, "stats": stats}), flush=True)


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of one child process."""
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, text


def _copy(src: Path, root: Path, name: str) -> Path:
    dst = root / name / src.name
    shutil.copytree(src, dst)
    return dst


def _digests(part: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(part.iterdir())
            if p.suffix in (".log", ".index", ".timeindex", ".txnindex")}


def _py(code: str) -> list[str]:
    here = str(Path(__file__).parent)
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import bench_cleaner as b; {code}"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--codec", default="none", choices=[c.name.lower() for c in CompressionType])
    ap.add_argument("--segment-bytes", type=int, default=100 << 20)
    ap.add_argument("--dedupe-mb", type=int, default=128)
    ap.add_argument("--python", action="store_true", help="kafkalog's pure-Python path (KAFKALOG_NO_EXTENSIONS=1)")
    ap.add_argument("--no-kafka", action="store_true", help="skip kafka-oracle")
    args = ap.parse_args()
    cfg = {"cleanup.policy": "compact", "segment.bytes": str(args.segment_bytes), "min.cleanable.dirty.ratio": "0.01"}
    dedupe = args.dedupe_mb << 20
    now = T0 + 10_000_000
    rows: list[tuple[str, float, float, float | None]] = []  # name, wall s, CPU s, peak RSS MB
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = root / "src" / "bench-0"
        cleanable = _write(src, cfg, args.mb, args.keys, args.value_bytes, CompressionType[args.codec.upper()])

        wall, cpu, rss, out = _run(_py(f"b._plain_read({str(_copy(src, root, 'read'))!r})"))
        child = json.loads(out.split("@", 1)[1])
        rows.append(("plain_read (process)", wall, cpu, rss))
        rows.append(("plain_read (read)", child["wall"], child["cpu"], None))

        part = _copy(src, root, "ours")
        env = dict(os.environ, KAFKALOG_NO_EXTENSIONS="1") if args.python else None
        wall, cpu, rss, out = _run(_py(f"b._ours({str(part)!r}, {cfg!r}, {dedupe}, {now})"), env)
        child = json.loads(out.split("@", 1)[1])
        rows.append(("kafkalog_clean (process)", wall, cpu, rss))
        rows.append(("kafkalog_clean (pass)", child["wall"], child["cpu"], None))
        extra = {"kafkalog_rss_before_pass_MB": child["rss_before_kb"] / 1024}
        kafka_stats = None
        if ORACLE.exists() and not args.no_kafka:
            kpart = _copy(src, root, "kafka")
            opts = [a for k, v in cfg.items() for a in ("--config", f"{k}={v}")]
            wall, cpu, rss, out = _run([str(ORACLE), "clean", str(kpart), *opts, "--now-ms", str(now),
                                        "--dedupe-buffer-bytes", str(dedupe), "--in-place"])
            rows.append(("kafka_clean (process)", wall, cpu, rss))
            kafka_stats = json.loads(out).get("stats")
            lwall, lcpu, lrss, _ = _run([str(ORACLE), "load", str(_copy(src, root, "kload")), *opts, "--in-place"])
            rows.append(("kafka_load (process)", lwall, lcpu, lrss))
            rows.append(("kafka_clean - kafka_load", wall - lwall, cpu - lcpu, None))
            rows.append(("kafka_jvm_start", *_run([str(ORACLE), "version"])[:3]))
            extra["identical_output"] = float(_digests(part) == _digests(kpart))
    print(f"cleanable MB {cleanable / 1e6:.1f}  keys {args.keys}  codec {args.codec}  dedupe {args.dedupe_mb} MiB"
          f"  kafkalog path {'python' if args.python else 'compiled'}")
    print(f"{'':28s} {'wall s':>9s} {'cpu s':>9s} {'MB/s wall':>10s} {'MB/s cpu':>10s} {'peak RSS MB':>12s}")
    for name, wall, cpu, rss in rows:
        mbps_wall = cleanable / 1e6 / wall if wall > 0 else float("nan")
        mbps_cpu = cleanable / 1e6 / cpu if cpu > 0 else float("nan")
        rss_s = f"{rss:12.1f}" if rss is not None else f"{'':12s}"
        print(f"{name:28s} {wall:9.3f} {cpu:9.3f} {mbps_wall:10.1f} {mbps_cpu:10.1f} {rss_s}")
    for k, v in extra.items():
        print(f"{k:28s} {v:9.1f}")
    if kafka_stats is not None:
        ours = child["stats"]
        same = {k: ours.get(k) == v for k, v in kafka_stats.items() if k in ours and k != "bufferUtilization"}
        print("stats equal to Kafka's:", all(same.values()), "" if all(same.values()) else same)


if __name__ == "__main__":
    main()
