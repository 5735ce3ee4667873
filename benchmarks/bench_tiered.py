"""Reading Aiven tiered-storage buckets: records/s from a zstd + encrypted bucket next to a plain (untransformed,
chunked) bucket and a local copy of the same segments, and what one ranged fetch costs.

    python3 benchmarks/bench_tiered.py [--segments N] [--segment-mb M] [--chunk-kb K] [--repeat R] [--s3]

The segments (uncompressed v2 batches of ~1 KiB values from a 1,000-word vocabulary) are written as Aiven's plugin writes them
(tests/aiven_writer.py: zstd per chunk, AES-256-GCM per chunk, RSA-OAEP-SHA3-512 data key) into a bucket on local
disk, or with ``--s3`` into moto's S3 server on 127.0.0.1. Each row decodes every record with
``read_record_columns``: ``local`` from the ``.log`` files, the buckets from the bytes ``AivenSegment.read``
restores (manifest, key unwrap, ranged read, decrypt, decompress). Best of ``--repeat`` runs. ``fetch`` times one
read of 64 KiB in the middle of a segment: one chunk fetched and restored.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalog.records import build_batch, read_record_columns  # noqa: E402
from kafkalog.tiered import AivenSegment, load_rsm_config  # noqa: E402
from tests.aiven_writer import SegmentFiles, new_key_pair, write_rsm_properties, write_segment  # noqa: E402

#: a vocabulary of 1,000 random 8-letter words: values compress about 2-3x with zstd, like text-like payloads
WORDS = [os.urandom(4).hex().encode() for _ in range(1000)]


def make_segment(size: int, base: int) -> tuple[bytes, int]:
    """~``size`` bytes of 16 KiB uncompressed batches of ~1 KiB compressible values; (bytes, records)."""
    parts, total, offset = [], 0, base
    while total < size:
        recs = []
        for i in range(16):
            rnd = os.urandom(240)
            words = b" ".join(WORDS[int.from_bytes(rnd[2 * j : 2 * j + 2], "big") % 1000] for j in range(120))
            recs.append((b"key-%08d" % (offset + i), words[:1000]))
        raw = build_batch(recs, base_offset=offset, timestamp=1_700_000_000_000 + offset)
        parts.append(raw)
        total += len(raw)
        offset += len(recs)
    return b"".join(parts), offset - base


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=2)
    ap.add_argument("--segment-mb", type=int, default=8)
    ap.add_argument("--chunk-kb", type=int, default=4096, help="the plugin's chunk.size (default 4 MiB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--s3", action="store_true", help="buckets in moto's S3 server instead of local dirs")
    args = ap.parse_args()
    chunk = args.chunk_kb << 10
    with tempfile.TemporaryDirectory(prefix="bench-tiered-") as tmp:
        root = Path(tmp)
        priv, pub = new_key_pair(root / "keys")
        segs, records, base = [], 0, 0
        local = root / "local"
        local.mkdir()
        for i in range(args.segments):
            log, n = make_segment(args.segment_mb << 20, base)
            idx = {"offset": b"", "timestamp": b"", "producerSnapshot": b"", "leaderEpoch": b"0\n1\n0 0\n"}
            segs.append(SegmentFiles(base, base + n - 1, f"SEGMENT{i:015d}", log, idx))
            (local / f"{base:020d}.log").write_bytes(log)
            records += n
            base += n
        total_mb = sum(len(s.log) for s in segs) / (1 << 20)
        configs = {"plain": (False, None), "zstd+encrypted": (True, "k1")}
        buckets: dict[str, tuple[list[str], object, dict | None]] = {}
        server = None
        if args.s3:
            from tests.s3server import MotoServer, upload_tree

            server = MotoServer().start()
        try:
            for name, (compress, key_id) in configs.items():
                bucket = root / name.replace("+", "-")
                props = root / f"{bucket.name}.properties"
                write_rsm_properties(props, chunk_size=chunk, compression=compress, key_id=key_id, private=priv,
                                     public=pub)  # fmt: skip
                logs = [write_segment(bucket, s, chunk_size=chunk, compression=compress, key_id=key_id, public=pub)
                        for s in segs]  # fmt: skip
                stored = sum(p.stat().st_size for p in logs) / (1 << 20)
                urls, opts = [str(p) for p in logs], None
                if server is not None:
                    upload_tree(server.client(), bucket, "bench", bucket.name)
                    urls = [f"s3://bench/{bucket.name}/{p.relative_to(bucket).as_posix()}" for p in logs]
                    opts = server.options
                buckets[name] = (urls, load_rsm_config(props), opts, stored)
            print(f"{args.segments} segments, {total_mb:.1f} MiB, {records} records, chunk.size {args.chunk_kb} KiB, "
                  f"{'moto S3' if server else 'local-dir bucket'}; best of {args.repeat}")  # fmt: skip
            mid = (args.segment_mb << 20) // 2
            t = best(lambda: [len(read_record_columns(str(p))) for p in sorted(local.iterdir())], args.repeat)
            print(f"  local .log files        {records / t / 1e6:6.2f} M records/s  {total_mb / t:7.1f} MiB/s")
            for name, (urls, rsm, opts, stored) in buckets.items():
                def read_all(urls=urls, rsm=rsm, opts=opts) -> None:
                    for u in urls:
                        assert len(read_record_columns(AivenSegment.open(u, rsm=rsm, options=opts).read())) > 0

                t = best(read_all, args.repeat)
                f = best(lambda u=urls[0], rsm=rsm, opts=opts: AivenSegment.open(u, rsm=rsm, options=opts)
                         .read(mid, mid + (64 << 10)), args.repeat)  # fmt: skip
                print(f"  {name:<22}  {records / t / 1e6:6.2f} M records/s  {total_mb / t:7.1f} MiB/s  "
                      f"stored {stored:6.1f} MiB  fetch 64 KiB: {f * 1e3:6.1f} ms")  # fmt: skip
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
