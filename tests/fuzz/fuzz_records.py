"""atheris harness: record batches (magic 0/1/2), ``read_batches``, every codec's decoder, varints.

The first input byte picks the target, the rest is the payload. Run: ``python tests/fuzz/fuzz_records.py
-max_total_time=3600 -timeout=10 -malloc_limit_mb=512 corpus/records`` (see tests/fuzz/README.md).
"""

from __future__ import annotations

import sys

import _setup  # noqa: F401
import atheris

with atheris.instrument_imports(include=["kafkalog", "reliability"]):
    from reliability import targets


def one_input(data: bytes) -> None:
    if not data:
        return
    mode, body = data[0], data[1:]
    m = mode % 8
    if m == 0:
        targets.target_read_batches(body, validate=False)
    elif m == 1:
        targets.target_read_batches(body, validate=True)
    elif m == 2:
        targets.target_record_batch(body)
    elif m == 3:
        targets.target_legacy_batch(body)
    elif m == 4:
        targets.target_varint(body)
    else:
        targets.target_decompress((mode >> 3) % 5, body)


def seeds() -> list[bytes]:
    """A few valid inputs of each kind, written to an empty corpus dir by ``--seed DIR``."""
    from kafkalog.records import CompressionType, build_batch
    from kafkalog.records.legacy import build_legacy_batch

    out = []
    for c in CompressionType:
        b = build_batch([(b"key", b"value" * 10, [("h", b"x")]), (None, b"v2")], compression=c, timestamp=1)
        out += [bytes([0]) + b, bytes([1]) + b + b, bytes([2]) + b]
    for magic in (0, 1):
        for c in (0, 1, 2, 3):
            out.append(bytes([3]) + build_legacy_batch([(b"k", b"v"), (None, b"w")], magic=magic, compression=c))
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--seed":
        from pathlib import Path

        d = Path(sys.argv[2])
        d.mkdir(parents=True, exist_ok=True)
        for i, s in enumerate(seeds()):
            (d / f"seed-{i}").write_bytes(s)
        sys.exit(0)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
