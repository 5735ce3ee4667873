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


def write_layout(dirs: list[Path], partitions: int, files: dict, end: int) -> None:
    for n, d in enumerate(dirs):
        d.mkdir(parents=True)
        topic = f"bench{n}"  # a partition lives in one dir only
        for p in range(partitions):
            pd = d / f"{topic}-{p}"
            pd.mkdir()
            for name, data in files.items():
                with open(pd / name, "wb") as f:
                    f.write(data)
        write_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT, {(topic, p): end for p in range(partitions)})
        write_clean_shutdown(d, 0)


def timed_startup(dirs: list[Path], props: dict) -> tuple[LogManager, float]:
    m = LogManager(dirs, properties=props)
    t0 = time.perf_counter()
    m.startup()
    return m, time.perf_counter() - t0


def make_unclean(dirs: list[Path]) -> None:
    """A crash with the recovery-point checkpoint lost: every segment of every partition gets recovered."""
    for d in dirs:
        (d / ".kafka_cleanshutdown").unlink(missing_ok=True)
        (d / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=5000, help="partitions per dir (default 5000)")
    ap.add_argument("--segments", type=int, default=10)
    ap.add_argument("--batches-per-segment", type=int, default=4)
    ap.add_argument("--records-per-batch", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="num.recovery.threads.per.data.dir for the clean runs")
    ap.add_argument("--root", type=Path, default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--skip-unclean", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-fsync", action="store_true",
                    help="make os.fsync a no-op: measures CPU and syscalls without the device's fsync latency "
                         "(loading a log currently rewrites its leader-epoch checkpoint with two fsyncs)")
    args = ap.parse_args(argv)
    if args.no_fsync:
        os.fsync = lambda fd: None  # type: ignore[assignment]

    root = args.root or Path(tempfile.mkdtemp(prefix="kafkalog-bench-startup-"))
    dirs = [root / "d1", root / "d2"]
    try:
        t0 = time.perf_counter()
        files, end = make_template(root, args.segments, args.batches_per_segment, args.records_per_batch)
        write_layout(dirs, args.partitions, files, end)
        seg_bytes = sum(len(v) for k, v in files.items() if k.endswith(".log"))
        total_segments = 2 * args.partitions * args.segments
        print(f"fsync: {'disabled (--no-fsync)' if args.no_fsync else 'real'}; cpus: {os.cpu_count()}")
        print(f"layout: 2 dirs x {args.partitions} partitions x {args.segments} segments "
              f"({total_segments} segments, {2 * args.partitions * seg_bytes / 1e6:.0f} MB of .log), "
              f"generated in {time.perf_counter() - t0:.1f} s (files are in the page cache for every run)", flush=True)

        base = {"num.recovery.threads.per.data.dir": args.threads}
        m, eager = timed_startup(dirs, {**base, "sanity.check.all.logs.enabled": "true"})
        assert len(m.all_logs()) == 2 * args.partitions and all(lg.log_end_offset == end for lg in m.all_logs())
        m.shutdown()
        print(f"clean startup, eager (sanity.check.all.logs.enabled=true): {eager:8.2f} s")

        m, lazy = timed_startup(dirs, {**base, "sanity.check.all.logs.enabled": "false"})
        assert len(m.all_logs()) == 2 * args.partitions
        print(f"clean startup, lazy  (sanity.check.all.logs.enabled=false): {lazy:8.2f} s   "
              f"speed-up {eager / lazy:5.1f}x")
        t0 = time.perf_counter()
        run = m.start_sanity_checker()
        run.wait()
        checker = time.perf_counter() - t0
        states = m.sanity_check_states().values()
        assert all(s.status.value == "checked" for s in states), "the checker found problems in a clean layout"
        print(f"background checker, all {total_segments - 2 * args.partitions} inactive segments: {checker:8.2f} s")
        m.shutdown()

        if not args.skip_unclean:
            for threads in (1, 2):
                make_unclean(dirs)
                m, t = timed_startup(dirs, {"num.recovery.threads.per.data.dir": threads})
                assert all(lg.log_end_offset == end for lg in m.all_logs())
                m.shutdown()
                print(f"unclean startup (full recovery), {threads} recovery thread(s) per dir: {t:8.2f} s")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
