"""LogManager startup: eager (sanity.check.all.logs.enabled=true) vs lazy KIP-263 checking, the background
checker's time to finish, and unclean startup (full recovery) with 1 and 2 recovery threads.

Layout: 2 log dirs x N partitions x S segments. One template partition is written through ``Log`` (so every
file, index and snapshot is what kafkalog itself writes), then its bytes are copied into every partition dir;
checkpoints and the clean-shutdown marker are written as a clean shutdown leaves them.

    python benchmarks/bench_startup.py --partitions 5000

``--growth``: the same lazy clean startup at 10 and at 40 segments a partition, timed in alternating turns, with
Apache Kafka's loader on both layouts in the same run. It guards the documented claim that a clean lazy startup
costs per partition, not per segment (docs/log-manager.md; targets: <= 1.3x for 4x the segments, >= 2x Kafka):

    python benchmarks/bench_startup.py --growth --partitions 200 --batches-per-segment 8 --repeat 3
"""

from __future__ import annotations

import argparse
import gc
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_reference  # noqa: E402


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


def kafka_load(dirs: list[Path], mode: str, threads: int, rounds: int) -> float | None:
    """Apache Kafka's loader (``kafka-oracle bench-load``) on the same dirs in this run: the sum over the dirs of its
    best time for each with ``threads`` threads (the oracle loads one log dir at a time), or None without Java.
    ``unclean`` ignores the checkpoints, as :func:`make_unclean` leaves the dirs: every segment is recovered."""
    extra = ("--ignore-checkpoints",) if mode == "unclean" else ()
    total = 0.0
    for d in dirs:
        out = kafka_reference.bench_load(d, mode=mode, threads=threads, rounds=rounds, extra=extra)
        if out is None:
            return None
        total += out["best_s"]
    return total


def kafka_or_fallback(kafka_s: float | None, segments: int) -> tuple[float, str]:
    """Kafka's seconds for ``segments`` segments and how to label them: measured, or the anchor's rate."""
    if kafka_s is not None:
        return kafka_s, "Apache Kafka's loader, same dirs, same run"
    rate = kafka_reference.fallback("clean_load_segments_per_s")
    return segments / rate, f"fallback: Kafka's {rate / 1e3:.1f}k segments/s from performance-anchors.md, not this run"


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


def process_usage() -> tuple[int, int, int]:
    """(open descriptors, memory mappings, resident bytes) of this process, from /proc."""
    fds = len(os.listdir("/proc/self/fd"))
    with open("/proc/self/maps", "rb") as f:
        maps = f.read().count(b"\n")
    with open("/proc/self/statm", "rb") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return fds, maps, rss


def lazy_once(dirs: list[Path], nparts: int, segments: int, threads: int, concurrency: int) -> dict[str, float]:
    """One lazy clean startup of ``dirs`` (wall and process CPU seconds), and what the loaded manager holds:
    descriptors, memory mappings, RSS and GC-tracked Python objects, each as the difference to before it."""
    props = {"num.recovery.threads.per.data.dir": threads, "kafkalog.recovery.concurrency": concurrency,
             "sanity.check.all.logs.enabled": "false"}
    gc.collect()
    fds0, maps0, rss0 = process_usage()
    objs0 = len(gc.get_objects())
    m, wall, cpu = timed_startup(dirs, props)
    assert len(m.all_logs()) == nparts
    check_states(m, segments, pending=segments - 1)
    gc.collect()
    fds1, maps1, rss1 = process_usage()
    objs1 = len(gc.get_objects())
    out = {"fds": fds1 - fds0, "maps": maps1 - maps0, "rss": rss1 - rss0, "objects": objs1 - objs0,
           "handles": len(m.handle_cache), "wall": wall, "cpu": cpu}
    m.shutdown()
    del m
    return out


def keep_best(best: dict[str, float] | None, run: dict[str, float]) -> dict[str, float]:
    """The run with the lowest wall time, with the lowest CPU time seen in any run beside it."""
    if best is None:
        return run
    cpu = min(best["cpu"], run["cpu"])
    out = dict(run if run["wall"] < best["wall"] else best)
    out["cpu"] = cpu
    return out


def lazy_footprint(dirs: list[Path], nparts: int, segments: int, repeat: int, threads: int,
                   concurrency: int) -> dict[str, float]:
    """Best-of-``repeat`` lazy clean startup of ``dirs`` (:func:`lazy_once`)."""
    best = None
    for _ in range(repeat):
        best = keep_best(best, lazy_once(dirs, nparts, segments, threads, concurrency))
    assert best is not None
    return best


def load_average() -> str:
    """The 1-minute load average, printed beside every figure: the machine is shared, and wall times follow it."""
    return f"load {os.getloadavg()[0]:.1f}"


def growth(root: Path, partitions: int, args: argparse.Namespace) -> None:
    """Lazy startup of 2 x ``partitions`` x 10 and x 40 segments, the two layouts timed in alternating turns: the
    growth with segments (target <= 1.3x, KIP-263: a clean start costs per partition), Kafka's loader on both
    layouts in the same run (target: kafkalog >= 2x faster on each), the footprint per partition and per
    inactive segment."""
    nparts = 2 * partitions
    layouts: dict[int, list[Path]] = {}
    for segments in (10, 40):
        sub = root / f"growth-{segments}"
        layouts[segments] = [sub / "d1", sub / "d2"]
        files, end = make_template(sub, segments, args.batches_per_segment, args.records_per_batch)
        write_layout(layouts[segments], partitions, files, end)
    seg_kib = sum(len(v) for k, v in files.items() if k.endswith(".log")) / 40 / 1024
    print(f"layouts: 2 dirs x {partitions} partitions x 10 and x 40 segments of ~{seg_kib:.0f} KiB; lazy clean "
          f"startup, 1 recovery thread per dir, best of {args.repeat} in alternating turns; {load_average()}",
          flush=True)
    kafka = {s: kafka_load(dirs, "clean", 1, args.repeat) for s, dirs in layouts.items()}
    kafka_load_avg = load_average()
    got: dict[int, dict[str, float]] = {}
    for _ in range(args.repeat):
        for segments, dirs in layouts.items():
            got[segments] = keep_best(got.get(segments),
                                      lazy_once(dirs, nparts, segments, 1, args.concurrency))
    ours_load_avg = load_average()
    for segments, dirs in layouts.items():
        got[segments]["floor"] = min(unavoidable_reads(dirs) for _ in range(args.repeat))
    shutil.rmtree(root / "growth-10", ignore_errors=True)
    shutil.rmtree(root / "growth-40", ignore_errors=True)
    g10, g40 = got[10], got[40]
    print(f"lazy startup growth, {nparts} partitions: x 10 segments {g10['wall']:.2f} s (cpu {g10['cpu']:.2f}), "
          f"x 40 segments {g40['wall']:.2f} s (cpu {g40['cpu']:.2f}): {g40['wall'] / g10['wall']:.2f}x wall, "
          f"{g40['cpu'] / g10['cpu']:.2f}x cpu for 4x the segments (target <= 1.3x); bare reads "
          f"{g10['floor']:.2f} s / {g40['floor']:.2f} s; {ours_load_avg}", flush=True)
    for segments in (10, 40):
        k, label = kafka_or_fallback(kafka[segments], nparts * segments)
        ours = got[segments]["wall"]
        print(f"vs Kafka's loader at {nparts} x {segments} ({label}, 1 thread/dir, {kafka_load_avg}): Kafka "
              f"{k:.2f} s / kafkalog lazy {ours:.2f} s = {k / ours:.2f}x (target >= 2x: <= {k / 2:.2f} s)",
              flush=True)
    inactive = nparts * 30
    per_seg = (g40["objects"] - g10["objects"]) / inactive
    per_part = g10["objects"] / nparts - 9 * per_seg
    rss_seg = (g40["rss"] - g10["rss"]) / inactive
    print(f"footprint after a lazy load (differences to before it): descriptors {g10['fds']} / {g40['fds']}, "
          f"memory mappings {g10['maps']} / {g40['maps']}, handle-cache entries {g10['handles']} / "
          f"{g40['handles']} (x 10 / x 40 segments)", flush=True)
    print(f"  GC-tracked Python objects: {per_part:.0f} per partition + {per_seg:.1f} per inactive segment; "
          f"RSS {g10['rss'] / nparts / 1024:.1f} KiB per partition at x 10, {rss_seg:.0f} B per inactive "
          f"segment", flush=True)


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
    ap.add_argument("--growth", action="store_true",
                    help="only the lazy-startup section: 10 vs 40 segments a partition in alternating turns "
                         "(growth, Kafka's loader on both layouts in the same run, descriptors, mappings, RSS "
                         "and Python objects per partition and per inactive segment)")
    ap.add_argument("--lazy-only", action="store_true",
                    help="main layout: time the lazy clean startup and its footprint only (for the big layouts)")
    args = ap.parse_args(argv)
    if args.no_fsync:
        os.fsync = lambda fd: None  # type: ignore[assignment]

    root = args.root or Path(tempfile.mkdtemp(prefix="kafkalog-bench-startup-"))
    dirs = [root / "d1", root / "d2"]
    nparts = 2 * args.partitions
    if args.growth:
        try:
            growth(root, args.partitions, args)
        finally:
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
        return
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

        kafka_clean, kafka_label = kafka_or_fallback(kafka_load(dirs, "clean", args.threads, args.repeat),
                                                     total_segments)
        print(f"{f'Apache Kafka clean load ({args.threads} threads/dir)':<58} {kafka_clean:7.2f} s  "
              f"{total_segments / kafka_clean / 1e3:6.1f}k segments/s  ({kafka_label})", flush=True)

        def line(what: str, wall: float, cpu: float, extra: str = "") -> None:
            rate = total_segments / wall
            print(f"{what:<58} {wall:7.2f} s  cpu {cpu:6.2f} s  {rate / 1e3:6.1f}k segments/s "
                  f"({kafka_clean / wall:4.2f}x Kafka){extra}", flush=True)

        if args.lazy_only:
            fp = lazy_footprint(dirs, nparts, args.segments, args.repeat, args.threads, args.concurrency)
            line(f"clean startup, lazy  ({args.threads} threads/dir, active segments checked)", fp["wall"], fp["cpu"])
            floor = unavoidable_reads(dirs)
            print(f"{'reference: the reads a lazy load cannot skip, bare (1 thread)':<58} {floor:7.2f} s", flush=True)
            print(f"footprint after the lazy load: {fp['fds']} descriptors, {fp['maps']} mappings, handle-cache "
                  f"entries {fp['handles']}, RSS {fp['rss'] / nparts / 1024:.1f} KiB and "
                  f"{fp['objects'] / nparts:.0f} GC-tracked objects per partition", flush=True)
            return

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
            # every recovery thread loading at once: what the GIL hand-offs cost (kafkalog.io.cpu_gate)
            free, free_cpu = clean(args.threads, False, ungated)
            line(f"clean startup, lazy, no gate (concurrency {ungated})", free, free_cpu,
                 f"   {free / lazy:4.2f}x the gated time")

        m, _, _ = timed_startup(dirs, {"num.recovery.threads.per.data.dir": args.threads,
                                       "kafkalog.recovery.concurrency": args.concurrency,
                                       "sanity.check.all.logs.enabled": "false"})
        gc.collect()
        _, _, rss0 = process_usage()
        objs0 = len(gc.get_objects())
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
        gc.collect()
        _, _, rss1 = process_usage()
        print(f"  kept once the checker is done: RSS {(rss1 - rss0) / inactive:.0f} B and "
              f"{(len(gc.get_objects()) - objs0) / inactive:.1f} GC-tracked objects per checked segment", flush=True)
        # The reference for eager/lazy: eager = F + S*c and lazy >= F + c per partition (F: what every load does
        # per partition; c: one segment's check, which the active segment gets in both modes), so eager/lazy < S.
        per_check = checker / inactive
        print(f"{'ceiling: eager/lazy < segments per partition':<58} {args.segments:7d} x   (one segment's check "
              f"{per_check * 1e6:.0f} us at the checker's rate; lazy {lazy / nparts * 1e6:.0f} us a partition, "
              f"of which the active segment's check ~{per_check * 1e6:.0f} us)", flush=True)
        m.shutdown()

        if not args.skip_unclean:
            for threads in (1, 2):
                kafka_unclean = kafka_load(dirs, "unclean", threads, 1)
                make_unclean(dirs)
                m, t, cpu = timed_startup(dirs, {"num.recovery.threads.per.data.dir": threads,
                                                 "kafkalog.recovery.concurrency": args.concurrency})
                assert all(lg.log_end_offset == end for lg in m.all_logs())
                m.shutdown()
                print(f"{f'unclean startup (full recovery), {threads} recovery thread(s)/dir':<58} {t:7.2f} s  "
                      f"cpu {cpu:6.2f} s  {total_segments / t / 1e3:6.1f}k segments/s  "
                      f"{nparts * seg_bytes / t / 1e6:6.1f} MB/s", flush=True)
                if kafka_unclean is not None:
                    print(f"{'  Apache Kafka unclean load, same dirs, same run':<58} {kafka_unclean:7.2f} s  "
                          f"{' ' * 14}{total_segments / kafka_unclean / 1e3:6.1f}k segments/s  "
                          f"{nparts * seg_bytes / kafka_unclean / 1e6:6.1f} MB/s  (ours {kafka_unclean / t:.2f}x)",
                          flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
