"""atheris harness: OffsetIndex, TimeIndex and TransactionIndex opened over arbitrary file content, then listed,
searched (single and vectorised lookups) and sanity-checked, mmap and non-mmap paths.

Input: byte 0 picks the index type, bytes 1-8 the base offset, bytes 9-16 a probe, the rest is the file. Index
files are written under ``$KAFKALOG_FUZZ_TMP`` (default the temp dir; a tmpfs such as /dev/shm is faster).
"""

from __future__ import annotations

import struct
import sys

import _setup  # noqa: F401
import atheris

with atheris.instrument_imports(include=["kafkalog", "reliability"]):
    from reliability import targets


def one_input(data: bytes) -> None:
    if len(data) < 17:
        return
    kind = ("offset", "time", "txn")[data[0] % 3]
    base, probe = struct.unpack_from(">qq", data, 1)
    targets.target_index(kind, data[17:], base, [probe, base, base + 1, -1, 0])


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
