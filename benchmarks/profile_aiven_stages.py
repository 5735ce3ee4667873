"""Where the CPU goes when an Aiven zstd + encrypted segment is read, stage by stage, next to decoding the same
records from a local ``.log``: CPU time per stage (``time.thread_time`` summed over the read pool's threads), so
the figures hold on a loaded machine where wall-clock rates do not. Also how many restore tasks one segment makes
(the parallelism the pool can use).

    python3 benchmarks/profile_aiven_stages.py [--segment-mb 16] [--chunk-kb 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tiered import make_segment  # noqa: E402

from kafkalog.archive.tiered import AivenSegment, aiven, load_rsm_config  # noqa: E402
from kafkalog.records import read_record_columns  # noqa: E402
from tests.aiven_writer import SegmentFiles, new_key_pair, write_rsm_properties, write_segment  # noqa: E402

STAGES = ("open (manifest, RSA unwrap)", "fetch", "decrypt", "decompress", "read (the caller's own)", "decode records")


class Clock:
    """CPU seconds per stage, summed over threads."""

    def __init__(self) -> None:
        self.cpu = dict.fromkeys(STAGES, 0.0)
        self.lock = threading.Lock()

    def wrap(self, stage: str, fn):
        def timed(*a, **k):
            t = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                with self.lock:
                    self.cpu[stage] += time.thread_time() - t

        return timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segment-mb", type=int, default=16)
    ap.add_argument("--chunk-kb", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="profile-aiven-") as tmp:
        root = Path(tmp)
        priv, pub = new_key_pair(root / "keys")
        log, n = make_segment(args.segment_mb << 20, 0)
        idx = {"offset": b"", "timestamp": b"", "producerSnapshot": b"", "leaderEpoch": b"0\n1\n0 0\n"}
        seg = SegmentFiles(0, n - 1, "SEGMENT000000000", log, idx)
        props = root / "rsm.properties"
        chunk = args.chunk_kb << 10
        write_rsm_properties(props, chunk_size=chunk, compression=True, key_id="k1", private=priv, public=pub)
        url = str(write_segment(root / "bucket", seg, chunk_size=chunk, compression=True, key_id="k1", public=pub))
        local = root / "00000000000000000000.log"
        local.write_bytes(log)
        rsm = load_rsm_config(props)
        mib = len(log) / (1 << 20)
        best: dict[str, float] = {}
        local_cpu = min(_cpu(lambda: read_record_columns(str(local))) for _ in range(args.repeat))
        for _ in range(args.repeat):
            clock = Clock()
            real = (aiven._read, getattr(aiven, "decompress_into", None), aiven.decompress, AivenSegment._detransform)
            aiven._read = clock.wrap("fetch", real[0])
            if real[1] is not None:
                aiven.decompress_into = clock.wrap("decompress", real[1])
            aiven.decompress = clock.wrap("decompress", real[2])
            AivenSegment._detransform = clock.wrap("decrypt", real[3])  # minus the decompress inside it, below
            try:
                s = clock.wrap("open (manifest, RSA unwrap)", AivenSegment.open)(url, rsm=rsm)
                tasks = len(_groups(s))
                data = clock.wrap("read (the caller's own)", s.read)()  # its thread only: the pool's work is above
                clock.wrap("decode records", read_record_columns)(data)
            finally:
                aiven._read, aiven.decompress, AivenSegment._detransform = real[0], real[2], real[3]
                if real[1] is not None:
                    aiven.decompress_into = real[1]
            cpu = dict(clock.cpu)
            cpu["decrypt"] -= cpu["decompress"]
            for k, v in cpu.items():
                best[k] = min(best.get(k, v), v)
        print(f"{mib:.0f} MiB segment, {n} records, chunk.size {args.chunk_kb} KiB, {tasks} restore task(s); CPU ms "
              f"(best of {args.repeat}); load {os.getloadavg()[0]:.1f}")
        for k in STAGES:
            print(f"  {k:<28}{best[k] * 1e3:8.1f} ms  {mib / best[k] if best[k] else float('inf'):8.0f} MiB/s of CPU")
        print(f"  {'local .log decode':<28}{local_cpu * 1e3:8.1f} ms  {mib / local_cpu:8.0f} MiB/s of CPU")


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def _groups(s: AivenSegment) -> list:
    """The restore tasks ``iter_range`` makes for the whole segment (what the pool can run at once)."""
    calls: list = []
    real = s._group
    s._group = lambda *a: calls.append(a) or ([], [])  # type: ignore[method-assign]
    try:
        list(s.iter_range())
    finally:
        s._group = real  # type: ignore[method-assign]
    return calls


if __name__ == "__main__":
    main()
