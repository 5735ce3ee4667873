"""The zstd and AES-GCM calls an Aiven chunk restore can make, on the benchmark's own chunks: CPU per 16 MiB of
original bytes for each (``time.thread_time``, so the figures hold on a loaded machine), and whether each releases
the GIL: while another thread makes the call on the whole segment (one 16 MiB frame), the main thread's longest
pause between two steps of a Python loop, against the call's own wall time (a call that holds the GIL stalls the
loop for all of it; one that releases it, for a scheduler tick). Wall-clock ratios of two threads against one
are not used: on a loaded machine they measure the other jobs.

    python3 benchmarks/bench_zstd_chunks.py [--segment-mb 16] [--chunk-kb 4096] [--repeat 5]

Calls compared (each chunk decompressed into a preallocated buffer of its original size, as ``AivenSegment`` does):
``kafkalog`` (``compression.decompress_into``, what the restore calls), ``cramjam.decompress_into``,
``zstandard.decompress`` (reused per-thread ``ZstdDecompressor``, a new output object; no copy),
``zstandard.stream_reader.readinto`` (reused decompressor, straight into the buffer).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cramjam  # noqa: E402
import zstandard  # noqa: E402
from bench_tiered import make_segment  # noqa: E402
from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402

from kafkalog.records.compression import CompressionType, decompress_into  # noqa: E402

_LOCAL = threading.local()


def _dctx() -> zstandard.ZstdDecompressor:
    try:
        return _LOCAL.dctx
    except AttributeError:
        _LOCAL.dctx = zstandard.ZstdDecompressor()
        return _LOCAL.dctx


def kafkalog_into(src: bytes, out: bytearray) -> None:
    assert decompress_into(CompressionType.ZSTD, src, out, max_size=len(out)) == len(out)


def cramjam_into(src: bytes, out: bytearray) -> None:
    assert cramjam.zstd.decompress_into(src, out) == len(out)


def zstandard_decompress(src: bytes, out: bytearray) -> None:
    assert len(_dctx().decompress(src, max_output_size=len(out))) == len(out)


def zstandard_readinto(src: bytes, out: bytearray) -> None:
    view = memoryview(out)
    with _dctx().stream_reader(src, read_across_frames=False) as r:
        n = 0
        while n < len(out):
            got = r.readinto(view[n:])
            if not got:
                break
            n += got
    assert n == len(out)


METHODS: dict[str, Callable[[bytes, bytearray], None]] = {
    "kafkalog (compression.decompress_into)": kafkalog_into,
    "cramjam.zstd.decompress_into": cramjam_into,
    "zstandard decompress (reused dctx)": zstandard_decompress,
    "zstandard stream_reader.readinto": zstandard_readinto,
}


def cpu_per_pass(fn: Callable[[], None], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t)
    return best


def stall(fn: Callable[[], None], calls: int = 3) -> tuple[float, float]:
    """(the main thread's longest pause while another thread runs ``fn`` ``calls`` times, ``fn``'s longest wall
    time), seconds."""
    longest_call = 0.0
    done = threading.Event()

    def worker() -> None:
        nonlocal longest_call
        for _ in range(calls):
            t = time.perf_counter()
            fn()
            longest_call = max(longest_call, time.perf_counter() - t)
        done.set()

    th = threading.Thread(target=worker)
    last = time.perf_counter()
    gap = 0.0
    th.start()
    while True:
        now = time.perf_counter()
        gap = max(gap, now - last)
        last = now
        if done.is_set():
            break
    th.join()
    return gap, longest_call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segment-mb", type=int, default=16)
    ap.add_argument("--chunk-kb", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    log, _ = make_segment(args.segment_mb << 20, 0)
    chunk = args.chunk_kb << 10
    plain = [log[i : i + chunk] for i in range(0, len(log), chunk)]
    packed = [bytes(cramjam.zstd.compress(c)) for c in plain]  # as tests/aiven_writer.py writes them
    outs = [bytearray(len(c)) for c in plain]
    whole, whole_out = bytes(cramjam.zstd.compress(log)), bytearray(len(log))
    mib = len(log) / (1 << 20)
    scale = 16 / mib
    print(f"load {os.getloadavg()[0]:.2f}; {mib:.1f} MiB in {len(plain)} chunks of {args.chunk_kb} KiB "
          f"({sum(map(len, packed)) / (1 << 20):.1f} MiB stored); CPU ms per 16 MiB (best of {args.repeat}), "
          "MiB/s per core, and the longest stall of the main thread while another makes the call on 16 MiB")
    order = list(METHODS.items())
    results: dict[str, list[float]] = {name: [] for name, _ in order}
    for turn in range(args.repeat):  # alternating turns
        for name, fn in order if turn % 2 == 0 else order[::-1]:
            def one_pass(fn=fn) -> None:
                for src, out in zip(packed, outs, strict=True):
                    fn(src, out)

            one_pass()
            assert outs[0] == plain[0]
            results[name].append(cpu_per_pass(one_pass, 1))
    for name, fn in order:
        def one_pass(fn=fn) -> None:
            for src, out in zip(packed, outs, strict=True):
                fn(src, out)

        cpu = min(results[name])
        gap, call = stall(lambda fn=fn: fn(whole, whole_out))
        print(f"  {name:42s} {cpu * 1e3 * scale:6.1f} ms  {mib / cpu:7.0f} MiB/s  stall {gap * 1e3:5.1f} ms "
              f"of a {call * 1e3:5.1f} ms call")
    key = os.urandom(32)
    aes = AESGCM(key)
    iv = os.urandom(12)
    sealed = [aes.encrypt(iv, c, b"") for c in packed]

    def decrypt_pass() -> None:
        for s in sealed:
            aes.decrypt(iv, s, b"")

    cpu = cpu_per_pass(decrypt_pass, args.repeat)
    stored = sum(map(len, packed)) / (1 << 20)
    big = aes.encrypt(iv, log, b"")
    gap, call = stall(lambda: aes.decrypt(iv, big, b""))
    print(f"  {'AES-GCM decrypt (cryptography)':42s} {cpu * 1e3 * scale:6.1f} ms  {stored / cpu:7.0f} MiB/s "
          f"(stored bytes)  stall {gap * 1e3:5.1f} ms of a {call * 1e3:5.1f} ms call (16 MiB)")
    blob = bytearray(len(log))
    gap, call = stall(lambda: bytes(blob))  # a copy that holds the GIL: the control
    print(f"  {'control: bytes(16 MiB) (holds the GIL)':42s} {'':24s}  stall {gap * 1e3:5.1f} ms of a "
          f"{call * 1e3:5.1f} ms call")


if __name__ == "__main__":
    main()
