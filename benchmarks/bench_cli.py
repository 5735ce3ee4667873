"""CLI benchmarks: ``kafkalog verify`` of a generated log dir next to raw CRC32C of the same bytes, and the peak RSS
of ``kafkalog dump --deep-iteration`` on the largest generated segment.

    python3 benchmarks/bench_cli.py [--size-mb 2048] [--segment-mb 1024] [--partitions 2] [--dir /tmp] [--keep]

The log dir is written through the library's ``LogSegment`` (so the indexes are Kafka's), from one template batch
per partition with the base offset patched (the CRC does not cover it). Both timed sides run in this one process
run against the same files: the verify subprocess first, then the raw CRC32C pass (both after a warm-up read, so
the page cache is equally warm). The dump's peak RSS is measured in a wrapper process with
``getrusage(RUSAGE_CHILDREN)``, so it is the dump's own high-water mark, with its output sent to /dev/null.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from kafkalog.log.config import LogConfig
from kafkalog.records import build_batch
from kafkalog.segment.log_segment import LogSegment

_CLI = [sys.executable, "-c", "from kafkalog_cli.main import main; main()"]


def generate(root: Path, *, total_bytes: int, segment_bytes: int, partitions: int, records_per_batch: int) -> int:
    """Write ``partitions`` partition dirs of about ``total_bytes`` together; return the bytes written."""
    config = LogConfig.from_properties({"segment.bytes": segment_bytes})
    value = os.urandom(150)
    written = 0
    per_partition = total_bytes // partitions
    for p in range(partitions):
        pdir = root / f"bench-{p}"
        pdir.mkdir(parents=True)
        template = bytearray(
            build_batch([(f"key-{i}".encode(), value) for i in range(records_per_batch)], base_offset=0)
        )
        offset = 0
        base = 0
        seg = LogSegment.open(pdir, base, config=config)
        done = 0
        while done < per_partition:
            if seg.size + len(template) > segment_bytes:
                seg.on_becoming_inactive()
                seg.close()
                base = offset
                seg = LogSegment.open(pdir, base, config=config)
            struct.pack_into(">q", template, 0, offset)
            seg.append(bytes(template))
            offset += records_per_batch
            done += len(template)
        seg.flush()
        seg.close()
        written += done
    return written


def log_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.log"))


def raw_crc32c(files: list[Path], chunk: int = 8 << 20) -> float:
    t0 = time.perf_counter()
    for f in files:
        crc = 0
        with open(f, "rb", buffering=0) as fh:
            while True:
                data = fh.read(chunk)
                if not data:
                    break
                crc = crc32c(data, crc)
    return time.perf_counter() - t0


def warm(files: list[Path]) -> None:
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass


def time_verify(root: Path) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run([*_CLI, "--quiet", "verify", str(root)], capture_output=True, text=True, check=False)
    return (
        time.perf_counter() - t0,
        proc.returncode,
        proc.stdout.strip().splitlines()[-1] if proc.stdout else proc.stderr,
    )


def dump_peak_rss(segment: Path) -> tuple[float, int, int]:
    """(seconds, peak RSS bytes, exit code) of ``dump --deep-iteration`` with output discarded."""
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.perf_counter()\n"
        "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "dt = time.perf_counter() - t0\n"
        "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, rc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *_CLI, "dump", "--deep-iteration", str(segment)],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return float(out[0]), int(out[1]), int(out[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=2048, help="total size of the generated log dir (default 2 GiB)")
    ap.add_argument("--segment-mb", type=int, default=1024, help="segment.bytes (default 1 GiB, Kafka's default)")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--records-per-batch", type=int, default=100)
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip-dump", action="store_true")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-cli-", dir=args.dir))
    root = base / "logdir"
    try:
        t0 = time.perf_counter()
        written = generate(
            root,
            total_bytes=args.size_mb << 20,
            segment_bytes=args.segment_mb << 20,
            partitions=args.partitions,
            records_per_batch=args.records_per_batch,
        )
        files = log_files(root)
        mib = written / (1 << 20)
        print(f"generated {mib:.0f} MiB in {len(files)} segments in {time.perf_counter() - t0:.1f}s")
        warm(files)
        verify_s, rc, summary = time_verify(root)
        crc_s = raw_crc32c(files)
        print(f"kafkalog verify: {verify_s:.2f}s ({mib / verify_s:.0f} MiB/s), exit {rc}: {summary}")
        print(f"raw CRC32C     : {crc_s:.2f}s ({mib / crc_s:.0f} MiB/s)")
        print(f"verify / raw CRC32C time: {verify_s / crc_s:.2f}x")
        if not args.skip_dump:
            largest = max(files, key=lambda f: f.stat().st_size)
            size = largest.stat().st_size / (1 << 20)
            dump_s, rss, drc = dump_peak_rss(largest)
            print(
                f"dump --deep-iteration of a {size:.0f} MiB segment: {dump_s:.1f}s, peak RSS {rss / (1 << 20):.0f} MiB"
                f" (limit 300 MiB), exit {drc}"
            )
    finally:
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
