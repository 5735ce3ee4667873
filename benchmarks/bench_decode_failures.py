"""What a payload that fails to decompress costs on each record-decoding path: time and peak RSS of
``read_record_columns`` over one batch that is a gzip bomb (expands past the 256 MiB limit) and one that is a zstd
frame of 2,100 garbage blocks whose headers claim 275 MB.

    python3 benchmarks/bench_decode_failures.py [--rounds 1]

Each (payload, path) runs in its own child process, so the peak RSS (``ru_maxrss``) is that run's own; the bomb's
child also holds the 256 MiB of zeros it compresses, the same on both paths.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import time
import zlib

from crc32c import crc32c

from kafkalog.errors import CorruptRecordError
from kafkalog.records import CompressionType, build_batch, read_record_columns


def _with_body(batch: bytes, body: bytes) -> bytes:
    out = bytearray(batch[:61] + body)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def _payload(kind: str) -> tuple[CompressionType, bytes]:
    if kind == "gzip-bomb":
        c = zlib.compressobj(1, zlib.DEFLATED, 31)
        return CompressionType.GZIP, c.compress(bytes((256 << 20) + 1)) + c.flush()
    blocks = [((1 << 3) | (2 << 1) | (i == 2099)).to_bytes(3, "little") + b"\xff" for i in range(2100)]
    return CompressionType.ZSTD, struct.pack("<I", 0xFD2FB528) + b"\x00" + bytes([11 << 3]) + b"".join(blocks)


def _child(kind: str, impl: str) -> None:
    import resource

    codec, body = _payload(kind)
    batch = build_batch([(b"k", b"v", [])], base_offset=0, timestamp=0, compression=codec)
    data = _with_body(batch, body)
    t = time.perf_counter()
    try:
        read_record_columns(data, implementation=impl)
        error = None
    except CorruptRecordError as exc:
        error = str(exc)
    seconds = time.perf_counter() - t
    print(json.dumps({"payload": kind, "path": impl, "seconds": round(seconds, 3), "error": error,
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return
    for _ in range(args.rounds):
        for kind in ("gzip-bomb", "zstd-garbage"):
            for impl in ("python", "compiled"):
                subprocess.run([sys.executable, __file__, "--child", kind, impl], check=True)


if __name__ == "__main__":
    main()
