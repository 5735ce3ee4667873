"""Reading archives and tiered-storage buckets: records/s from a zstd + encrypted Aiven bucket and a plain
(untransformed, chunked) one next to a local copy of the same segments; with ``--s3`` also a plain archive of the
segments as objects next to the raw rate of fetching the same objects (same parallelism, no decoding), and with
``--latency-ms`` every S3 row again behind a proxy that delays each request (tests/latency_proxy.py).

    python3 benchmarks/bench_tiered.py [--segments N] [--segment-mb M] [--chunk-kb K] [--repeat R] [--s3]
                                       [--latency-ms 25] [--parallelism P] [--open-ahead K] [--trace FILE]

The segments (uncompressed v2 batches of ~1 KiB values from a 1,000-word vocabulary) are written as Aiven's plugin writes them
(tests/aiven_writer.py: zstd per chunk, AES-256-GCM per chunk, RSA-OAEP-SHA3-512 data key) into a bucket on local
disk, or with ``--s3`` into moto's S3 server on 127.0.0.1. Each row decodes every record with
``read_record_columns``: ``local`` from the ``.log`` files, the buckets from the bytes ``AivenSegment.read``
restores (manifest, key unwrap, ranged read, decrypt, decompress), the next ``--open-ahead`` segments opened
(:func:`kafkalog.archive.tiered.open_ahead`) while one is read, each with its size from one listing of the bucket
(as ``verify``, the DataSource and ``tiered restore`` open them: no HEAD). Best of ``--repeat`` runs. ``fetch``
times one read of 64 KiB in the middle of a segment: one chunk fetched and restored.

The default size, 16 segments of 8 MiB (128 MiB), is a bucket read: many segments one after another, so what is
measured is the pipeline across segments and objects, not a read's start (its first open and first GET, two or
three round trips that no reader can overlap with anything: with 25 ms per request under 10% of a read of
128 MiB at this server's ~150 MiB/s, a third of one of 32 MiB).

``--trace FILE`` (with ``--latency-ms``): one more read of each S3 row with every request logged by the proxy
(JSON lines: row, request line, Range, times in ms from the read's start), and a summary per row: requests by
kind, when the first answer began, and the time no request was waiting for its answer (the reader decoding or
the answers streaming in, the round trips hidden) against the time at most one was (the serial round trips).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafkalog.archive.object_reads import iter_objects  # noqa: E402
from kafkalog.archive.ranged_reads import PART_BYTES, default_parallelism  # noqa: E402
from kafkalog.archive.storage import list_tree  # noqa: E402
from kafkalog.archive.tiered import AivenSegment, load_rsm_config, open_ahead  # noqa: E402
from kafkalog.archive.tiered.aiven import OPEN_AHEAD  # noqa: E402
from kafkalog.records import build_batch, read_record_columns  # noqa: E402
from tests.aiven_writer import SegmentFiles, new_key_pair, write_rsm_properties, write_segment  # noqa: E402

#: a vocabulary of 1,000 random 8-letter words: values compress about 2-3x with zstd, like text-like payloads
WORDS = [os.urandom(4).hex().encode() for _ in range(1000)]


def make_segment(size: int, base: int) -> tuple[bytes, int]:
    """At most ``size`` bytes (as Kafka rolls at ``segment.bytes``) of 16 KiB uncompressed batches of ~1 KiB
    compressible values; (bytes, records)."""
    parts, total, offset = [], 0, base
    while total + 17 * 1024 <= size:
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


def summarize(row: str, trace: list, t0: float, t1: float, out) -> str:
    """One traced read: its requests as JSON lines into ``out``, and a one-line summary (see the docstring)."""
    kinds: dict[str, int] = {}
    for r in trace:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
        out.write(json.dumps({"row": row, "line": r.line, "range": r.range, "arrived": (r.arrived - t0) * 1e3,
                              "forwarded": (r.forwarded - t0) * 1e3,
                              "answered": (r.answered - t0) * 1e3 if r.answered > 0 else None}) + "\n")  # fmt: skip
    # waiting: requests sent, no answer byte yet; sweep the [arrived, answered) intervals
    events = sorted([(r.arrived, 1) for r in trace] + [(r.answered if r.answered > 0 else t1, -1) for r in trace])
    at_most_one = none = 0.0
    level, last = 0, t0
    for t, step in events:
        t = min(max(t, t0), t1)
        if level == 0:
            none += t - last
        elif level == 1:
            at_most_one += t - last
        level, last = level + step, t
    none += t1 - last
    first = min((r.answered for r in trace if r.answered > 0), default=t1) - t0
    wall = t1 - t0
    text = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"{wall * 1e3:6.0f} ms: {text}; first answer at {first * 1e3:.0f} ms; none waiting "
            f"{none / wall:4.0%}, one alone {at_most_one / wall:4.0%} of the time")


def traced(proxy, row: str, fn, out) -> str:
    """One more run of ``fn`` with the proxy logging its requests: the summary line."""
    proxy.trace = []
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    trace, proxy.trace = proxy.trace, None
    return summarize(row, trace, t0, t1, out)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=16)
    ap.add_argument("--segment-mb", type=int, default=8)
    ap.add_argument("--chunk-kb", type=int, default=4096, help="the plugin's chunk.size (default 4 MiB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--s3", action="store_true", help="buckets in moto's S3 server instead of local dirs")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="with --s3: also every S3 row behind a proxy delaying each request by this much")
    ap.add_argument("--parallelism", type=int, default=None, help="ranged reads in flight per reader")
    ap.add_argument("--open-ahead", type=int, default=OPEN_AHEAD,
                    help=f"Aiven segments opened ahead of the one read (default {OPEN_AHEAD}; 0: each opened as read)")  # fmt: skip
    ap.add_argument("--trace", help="with --latency-ms: one more read per S3 row, its requests logged to this file")
    args = ap.parse_args()
    trace_out = open(args.trace, "w") if args.trace else None  # noqa: SIM115
    if args.parallelism:
        os.environ["KAFKALOG_READ_PARALLELISM"] = str(args.parallelism)
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
        server = proxy = None
        if args.s3:
            from tests.latency_proxy import LatencyProxy
            from tests.s3server import MotoServer, upload_tree

            server = MotoServer().start()
            proxy = LatencyProxy(server.port, delay_s=0.0).start()
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
                    opts = {**server.options, "endpoint_url": proxy.endpoint}
                sizes: dict[str, int] = {}
                if server is not None:  # one listing, as the readers have one (discovery): sizes without HEADs
                    sizes = {e.url: e.size for e in list_tree(f"s3://bench/{bucket.name}", opts)}
                buckets[name] = (urls, load_rsm_config(props), opts, stored, sizes)
            archive_urls: list[str] = []
            if server is not None:
                upload_tree(server.client(), local, "bench", "archive")
                archive_urls = [f"s3://bench/archive/{p.name}" for p in sorted(local.iterdir())]
            par = default_parallelism()
            print(f"{args.segments} segments, {total_mb:.1f} MiB, {records} records, chunk.size {args.chunk_kb} KiB, "
                  f"{'moto S3' if server else 'local-dir bucket'}, {par} ranged reads in flight per reader, "
                  f"{max(args.open_ahead, 0)} Aiven segments opened ahead; best of "
                  f"{args.repeat}; load {os.getloadavg()[0]:.1f}")  # fmt: skip
            mid = (args.segment_mb << 20) // 2
            t_local = best(lambda: [len(read_record_columns(str(p))) for p in sorted(local.iterdir())], args.repeat)
            print(f"  local .log files        {records / t_local / 1e6:6.2f} M records/s  {total_mb / t_local:7.1f} MiB/s")
            delays = [0.0] + ([args.latency_ms / 1e3] if server is not None and args.latency_ms > 0 else [])
            rates: dict[tuple[str, float], float] = {}
            for delay in delays:
                if proxy is not None:
                    proxy.delay_s = delay
                tag = f" +{delay * 1e3:.0f} ms" if delay else ""
                for name, (urls, rsm, opts, stored, sizes) in buckets.items():
                    def read_all(urls=urls, rsm=rsm, opts=opts, sizes=sizes) -> None:
                        def opener(item: SimpleNamespace) -> AivenSegment:
                            return AivenSegment.open(item.path, rsm=rsm, options=opts, object_size=item.size_bytes)

                        items = [SimpleNamespace(path=u, size_bytes=sizes.get(u, -1)) for u in urls]
                        if args.open_ahead <= 0:
                            opened = ((i, opener(i), None) for i in items)
                        else:
                            opened = open_ahead(items, opener, args.open_ahead, options=opts)
                        for _, seg, err in opened:
                            assert err is None, err
                            assert len(read_record_columns(seg.read())) > 0

                    t = best(read_all, args.repeat)
                    rates[(name, delay)] = records / t
                    f = best(lambda u=urls[0], rsm=rsm, opts=opts: AivenSegment.open(u, rsm=rsm, options=opts)
                             .read(mid, mid + (64 << 10)), args.repeat)  # fmt: skip
                    print(f"  aiven {name + tag:<22}{records / t / 1e6:6.2f} M records/s  {total_mb / t:7.1f} MiB/s  "
                          f"{t_local / t:5.2f}x local  stored {stored:6.1f} MiB  fetch 64 KiB: {f * 1e3:6.1f} ms")
                    if trace_out is not None and delay:
                        print("    trace: " + traced(proxy, f"aiven {name}", read_all, trace_out))
                if archive_urls:
                    opts = {**server.options, "endpoint_url": proxy.endpoint}
                    t_raw = best(lambda o=opts: [len(b) for _, b in iter_objects(archive_urls, o)], args.repeat)
                    t_dec = best(lambda o=opts: [len(read_record_columns(b)) for _, b in iter_objects(archive_urls, o)],
                                 args.repeat)
                    rates[("archive", delay)] = records / t_dec
                    print(f"  archive raw GETs{tag:<9}          {total_mb / t_raw:7.1f} MiB/s (same objects, no decoding)")
                    print(f"  archive decoded{tag:<10}{records / t_dec / 1e6:6.2f} M records/s  {total_mb / t_dec:7.1f} "
                          f"MiB/s  {t_raw / t_dec:5.2f}x raw GETs")
                    if trace_out is not None and delay:
                        print("    trace: " + traced(proxy, "archive decoded", lambda o=opts: [
                            len(read_record_columns(b)) for _, b in iter_objects(archive_urls, o)], trace_out))
            for name in (*buckets, "archive"):
                if len(delays) > 1 and (name, delays[1]) in rates:
                    print(f"  {name}: +{delays[1] * 1e3:.0f} ms per request keeps "
                          f"{rates[(name, delays[1])] / rates[(name, 0.0)]:.2f}x of the undelayed rate")
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"  peak RSS {peak:.0f} MiB (bound on reads in flight: {par} x {PART_BYTES >> 20} MiB per reader)")
        finally:
            if trace_out is not None:
                trace_out.close()
            if proxy is not None:
                proxy.stop()
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
