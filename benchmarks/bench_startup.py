"""LogManager startup: eager (sanity.check.all.logs.enabled=true) vs lazy KIP-263 checking, the background
checker's time to finish, and unclean startup (full recovery) with 1 and 2 recovery threads.

Layout: 2 log dirs x N partitions x S segments. One template partition is written through ``Log`` (so every
file, index and snapshot is what kafkalog itself writes), then its bytes are copied into every partition dir;
checkpoints and the clean-shutdown marker are written as a clean shutdown leaves them.

    python benchmarks/bench_startup.py --partitions 5000
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalog.checkpoint.clean_shutdown import write_clean_shutdown  # noqa: E402
from kafkalog.checkpoint.offset_checkpoint import (  # noqa: E402
    RECOVERY_POINT_CHECKPOINT,
    write_offset_checkpoint,
)
from kafkalog.log.config import LogConfig  # noqa: E402
from kafkalog.log.log import Log  # noqa: E402
from kafkalog.manager import LogManager  # noqa: E402
from kafkalog.records.batch import build_batch  # noqa: E402


def make_template(root: Path, segments: int, batches_per_segment: int, records_per_batch: int) -> tuple[dict, int]:
    """One partition with exactly ``segments`` segments; returns {file name: bytes} and its log end offset."""
    path = root / "template" / "tpl-0"
    config = LogConfig.from_properties({"segment.bytes": 1 << 30, "index.interval.bytes": 1024})
    log = Log.open(path, config)
    value = os.urandom(180)
    offset = 0
    for s in range(segments):
        for _ in range(batches_per_segment):
            recs = [(b"key-%d" % (offset + i), value) for i in range(records_per_batch)]
            log.append_as_follower(build_batch(recs, base_offset=offset, partition_leader_epoch=0))
            offset += records_per_batch
        if s < segments - 1:
            log.roll()
    log.flush()
    log.close()
    files = {p.name: p.read_bytes() for p in path.iterdir() if p.is_file()}
    shutil.rmtree(root / "template")
    return files, offset


def _write_partitions(d: Path, topic: str, partitions: int, items: list[tuple[str, bytes]]) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    for p in range(partitions):
        pd = os.path.join(d, f"{topic}-{p}")
        os.mkdir(pd)
        for name, data in items:
            fd = os.open(os.path.join(pd, name), flags, 0o644)  # 3 syscalls a file (open() costs 7)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)


def write_layout(dirs: list[Path], partitions: int, files: dict, end: int) -> None:
    """Copy the template into every partition dir, one thread per log dir (file creation is kernel time and
    releases the GIL), then write each dir's checkpoints and its clean-shutdown marker."""
    items = sorted(files.items())
    for d in dirs:
        d.mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=len(dirs)) as pool:
        # a partition lives in one dir only: topic bench<n> in dir n
        for fut in [pool.submit(_write_partitions, d, f"bench{n}", partitions, items) for n, d in enumerate(dirs)]:
            fut.result()
    for n, d in enumerate(dirs):
        topic = f"bench{n}"
        write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, {(topic, p): end for p in range(partitions)})
        write_clean_shutdown(d, 0)


KAFKA_CLEAN_SEGMENTS_PER_S = 8_300  # performance-anchors.md: Kafka's loader, 1,000 x 10 segments of 16 KiB, 1 thread


def timed_startup(dirs: list[Path], props: dict) -> tuple[LogManager, float, float]:
    """(manager, wall seconds, CPU seconds of the whole process: every loader thread summed)."""
    m = LogManager(dirs, properties=props)
    c0, t0 = time.process_time(), time.perf_counter()
    m.startup()
    return m, time.perf_counter() - t0, time.process_time() - c0


def make_unclean(dirs: list[Path]) -> None:
    """A crash with the recovery-point checkpoint lost: every segment of every partition gets recovered."""
    for d in dirs:
        (d / ".kafka_cleanshutdown").unlink(missing_ok=True)
        (d / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)


def unavoidable_reads(dirs: list[Path]) -> float:
    """Seconds for the reads no clean lazy load can skip, done bare for every partition: list the dir, read the
    leader-epoch checkpoint and the newest producer snapshot, read the active segment's last offset-index entry
    and its ``.log`` from there to the end (the log end offset), stat its time index. No objects, no checks: the
    physical floor a lazy partition load is measured against."""
    t0 = time.perf_counter()
    for d in dirs:
        for part in os.scandir(d):
            if not part.is_dir():
                continue
            names = sorted(e.name for e in os.scandir(part.path))
            stem = max(n for n in names if n.endswith(".log"))[:-4]
            snapshot = max((n for n in names if n.endswith(".snapshot")), default=None)
            for name in ("leader-epoch-checkpoint", snapshot):
                if name is not None and name in names:
                    with open(os.path.join(part.path, name), "rb") as f:
                        f.read()
            fd = os.open(os.path.join(part.path, stem + ".index"), os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                last = os.pread(fd, 8, size - 8) if size >= 8 else b""
            finally:
                os.close(fd)
            position = int.from_bytes(last[4:], "big") if len(last) == 8 else 0
            fd = os.open(os.path.join(part.path, stem + ".log"), os.O_RDONLY)
            try:
                os.pread(fd, os.fstat(fd).st_size - position, position)
            finally:
                os.close(fd)
            os.stat(os.path.join(part.path, stem + ".timeindex"))
    return time.perf_counter() - t0


def check_states(m: LogManager, segments: int, *, pending: int) -> None:
    """Every partition's KIP-263 state: all segments checked (eager) or all but the active one pending (lazy)."""
    states = m.sanity_check_states().values()
    bad = [s for s in states if s.segments_pending != pending or s.segments_checked != segments - pending]
    assert not bad, f"{len(bad)} partitions not as expected, e.g. {bad[0]}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=5000, help="partitions per dir (default 5000)")
    ap.add_argument("--segments", type=int, default=10)
    ap.add_argument("--batches-per-segment", type=int, default=16,
                    help="default 16: ~16 KiB segments, the layout of Kafka's figure in performance-anchors.md")
    ap.add_argument("--records-per-batch", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="num.recovery.threads.per.data.dir for the clean runs")
    ap.add_argument("--concurrency", type=int, default=1,
                    help="kafkalog.recovery.concurrency (default 1, the library's): partitions loading at once")
    ap.add_argument("--repeat", type=int, default=3, help="clean startups are timed this many times, best kept")
    ap.add_argument("--root", type=Path, default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--skip-unclean", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-fsync", action="store_true",
                    help="make os.fsync a no-op: measures CPU and syscalls without the device's fsync latency")
    args = ap.parse_args(argv)
    if args.no_fsync:
        os.fsync = lambda fd: None  # type: ignore[assignment]

    root = args.root or Path(tempfile.mkdtemp(prefix="kafkalog-bench-startup-"))
    dirs = [root / "d1", root / "d2"]
    nparts = 2 * args.partitions
    try:
        t0 = time.perf_counter()
        files, end = make_template(root, args.segments, args.batches_per_segment, args.records_per_batch)
        write_layout(dirs, args.partitions, files, end)
        seg_bytes = sum(len(v) for k, v in files.items() if k.endswith(".log"))
        total_segments = nparts * args.segments
        print(f"fsync: {'disabled (--no-fsync)' if args.no_fsync else 'real'}; cpus: {os.cpu_count()}")
        print(f"layout: 2 dirs x {args.partitions} partitions x {args.segments} segments "
              f"({total_segments} segments of ~{seg_bytes / args.segments / 1024:.0f} KiB, "
              f"{nparts * seg_bytes / 1e6:.0f} MB of .log), generated in {time.perf_counter() - t0:.1f} s "
              "(just written, so cached unless evicted: wall well above CPU means disk reads); best of "
              f"{args.repeat}, wall and process CPU (all threads)", flush=True)

        def clean(threads: int, check_all: bool, concurrency: int | None = None) -> tuple[float, float]:
            best = (float("inf"), float("inf"))
            for _ in range(args.repeat):
                m, wall, cpu = timed_startup(dirs, {"num.recovery.threads.per.data.dir": threads,
                                                    "kafkalog.recovery.concurrency": concurrency or args.concurrency,
                                                    "sanity.check.all.logs.enabled": str(check_all).lower()})
                assert len(m.all_logs()) == nparts and all(lg.log_end_offset == end for lg in m.all_logs())
                check_states(m, args.segments, pending=0 if check_all else args.segments - 1)
                m.shutdown()
                best = min(best, (wall, cpu))
            return best

        def line(what: str, wall: float, cpu: float, extra: str = "") -> None:
            rate = total_segments / wall
            print(f"{what:<58} {wall:7.2f} s  cpu {cpu:6.2f} s  {rate / 1e3:6.1f}k segments/s "
                  f"({rate / KAFKA_CLEAN_SEGMENTS_PER_S:4.2f}x Kafka's 8.3k/s){extra}", flush=True)

        eager, eager_cpu = clean(args.threads, True)
        line(f"clean startup, eager ({args.threads} threads/dir, every segment checked)", eager, eager_cpu)
        lazy, lazy_cpu = clean(args.threads, False)
        line(f"clean startup, lazy  ({args.threads} threads/dir, active segments checked)", lazy, lazy_cpu,
             f"   eager/lazy {eager / lazy:5.1f}x (cpu {eager_cpu / lazy_cpu:4.1f}x)")
        floor = min(unavoidable_reads(dirs) for _ in range(args.repeat))
        print(f"{'reference: the reads a lazy load cannot skip, bare (1 thread)':<58} {floor:7.2f} s  "
              f"{floor / nparts * 1e6:5.0f} us a partition; lazy is {lazy / floor:4.1f}x that; eager is "
              f"{eager / floor:4.1f}x it, the eager/lazy a loader doing nothing else would reach", flush=True)
        # The target, eager/lazy >= 20x, as a per-partition budget next to the bare reads: a budget below
        # (or near) them cannot be met by any loader on this machine, whatever the active segment's check costs.
        print(f"{'20x target: lazy budget a partition (eager / 20)':<58} {eager / 20 / nparts * 1e6:7.0f} us  vs "
              f"{floor / nparts * 1e6:.0f} us for the bare reads alone and {lazy / nparts * 1e6:.0f} us measured",
              flush=True)
        if args.threads != 1:
            lazy1, lazy1_cpu = clean(1, False)
            line("clean startup, lazy  (1 thread/dir)", lazy1, lazy1_cpu,
                 f"   eager/lazy {eager / lazy1:5.1f}x")
        ungated = len(dirs) * args.threads
        if ungated > args.concurrency:
            # every recovery thread loading at once: what the GIL hand-offs cost (kafkalog.cpu_gate)
            free, free_cpu = clean(args.threads, False, ungated)
            line(f"clean startup, lazy, no gate (concurrency {ungated})", free, free_cpu,
                 f"   {free / lazy:4.2f}x the gated time")

        m, _, _ = timed_startup(dirs, {"num.recovery.threads.per.data.dir": args.threads,
                                       "kafkalog.recovery.concurrency": args.concurrency,
                                       "sanity.check.all.logs.enabled": "false"})
        c0, t0 = time.process_time(), time.perf_counter()
        run = m.start_sanity_checker()
        run.wait()
        checker, checker_cpu = time.perf_counter() - t0, time.process_time() - c0
        states = m.sanity_check_states().values()
        assert all(s.status.value == "checked" for s in states), "the checker found problems in a clean layout"
        inactive = total_segments - nparts
        print(f"{'background checker, all ' + str(inactive) + ' inactive segments':<58} {checker:7.2f} s  "
              f"cpu {checker_cpu:6.2f} s  {inactive / checker / 1e3:6.1f}k segments/s;  lazy + checker "
              f"{lazy + checker:.2f} s vs eager {eager:.2f} s", flush=True)
        # The reference for eager/lazy: eager = F + S*c and lazy >= F + c per partition (F: what every load does
        # per partition; c: one segment's check, which the active segment gets in both modes), so eager/lazy < S.
        per_check = checker / inactive
        print(f"{'ceiling: eager/lazy < segments per partition':<58} {args.segments:7d} x   (one segment's check "
              f"{per_check * 1e6:.0f} us at the checker's rate; lazy {lazy / nparts * 1e6:.0f} us a partition, "
              f"of which the active segment's check ~{per_check * 1e6:.0f} us)", flush=True)
        m.shutdown()

        if not args.skip_unclean:
            for threads in (1, 2):
                make_unclean(dirs)
                m, t, cpu = timed_startup(dirs, {"num.recovery.threads.per.data.dir": threads,
                                                 "kafkalog.recovery.concurrency": args.concurrency})
                assert all(lg.log_end_offset == end for lg in m.all_logs())
                m.shutdown()
                print(f"{f'unclean startup (full recovery), {threads} recovery thread(s)/dir':<58} {t:7.2f} s  "
                      f"cpu {cpu:6.2f} s  {total_segments / t / 1e3:6.1f}k segments/s  "
                      f"{nparts * seg_bytes / t / 1e6:6.1f} MB/s", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
