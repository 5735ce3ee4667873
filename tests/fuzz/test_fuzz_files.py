"""Fuzzing the file parsers: the three index types and every checkpoint/metadata format.

Indexes are opened read-only over random file content (mmap and non-mmap paths), then listed, searched and
checked; checkpoint parsers get random and mutated-valid bytes, and whatever a parser accepts must survive
format -> parse unchanged. Bounded by ``KAFKALOG_FUZZ_EXAMPLES`` (default 200 per test).
"""

from __future__ import annotations

import os
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.test_fuzz_records import watchdog
from tests.reliability.targets import CHECKPOINT_KINDS, target_checkpoint, target_index

EXAMPLES = int(os.environ.get("KAFKALOG_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    derandomize=os.environ.get("KAFKALOG_FUZZ_RANDOM") is None,
    database=None,
)

BASES = st.sampled_from([0, 1, 100, 1 << 31, (1 << 63) - 1 - (1 << 32), -1])
PROBES = st.lists(st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-5, 5000), min_size=1, max_size=6)


@st.composite
def index_bytes(draw, entry: int) -> bytes:
    """Random bytes, or plausible entries (sorted, equal, descending, huge) with an optional ragged tail."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=entry * 40 + 7))
    n = draw(st.integers(0, 40))
    mode = draw(st.sampled_from(["asc", "desc", "same", "rand", "zeros"]))
    out = bytearray()
    for i in range(n):
        if mode == "asc":
            a, b = i * 3, i * 100
        elif mode == "desc":
            a, b = n - i, (n - i) * 7
        elif mode == "same":
            a, b = 5, 5
        elif mode == "zeros":
            a, b = 0, 0
        else:
            a, b = draw(st.integers(-(1 << 31), (1 << 31) - 1)), draw(st.integers(-(1 << 31), (1 << 31) - 1))
        if entry == 8:
            out += struct.pack(">ii", a, b)
        elif entry == 12:
            out += struct.pack(">qi", b, a)
        else:  # txn index: version, pid, first, last, lso
            out += struct.pack(">hqqqq", draw(st.sampled_from([0, 0, 1, -1])), a, a, b, b)
    out += draw(st.binary(max_size=3 if draw(st.booleans()) else 0))
    return bytes(out)


@FUZZ
@given(index_bytes(8), BASES, PROBES)
def test_offset_index_over_random_bytes(tmp_path_factory, data: bytes, base: int, probes: list[int]) -> None:
    d = tmp_path_factory.mktemp("idx", numbered=True)
    with watchdog():
        target_index("offset", data, base, probes, directory=d)


@FUZZ
@given(index_bytes(12), BASES, PROBES)
def test_time_index_over_random_bytes(tmp_path_factory, data: bytes, base: int, probes: list[int]) -> None:
    d = tmp_path_factory.mktemp("tidx", numbered=True)
    with watchdog():
        target_index("time", data, base, probes, directory=d)


@FUZZ
@given(index_bytes(34), BASES, PROBES)
def test_txn_index_over_random_bytes(tmp_path_factory, data: bytes, base: int, probes: list[int]) -> None:
    d = tmp_path_factory.mktemp("txidx", numbered=True)
    with watchdog():
        target_index("txn", data, base, probes, directory=d)


# --- checkpoints ----------------------------------------------------------------------------------------------------

TOKENS = st.sampled_from(
    ["0", "1", "2", "-1", "00", "+3", "2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
     "-9223372036854775809", "topic", "t.b", "..", ".", "a/b", "x" * 250, "\x00", "é", "\t", " ", "  ", "\r", "\n",
     "\r\n", "version", "version:", "topic_id:", "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ",
     "vDOLnlEbSWi1jd3MS_nW5g", "cluster.id=", "node.id=", "broker.id=", "directory.id=", "#", "!", "=", ":",
     "\\", "\\u00e9", "\\u12", "{", "}", '"brokerEpoch"', '"version"', ",", "null", "true", "1e3", "1.5"]
)
TEXTISH = st.lists(st.one_of(TOKENS, st.text(max_size=6)), max_size=24).map(lambda xs: "".join(xs).encode("utf-8", "surrogatepass"))


def _valid_sample(kind: str) -> bytes:
    """One valid file of each kind, as Kafka writes it, for mutation."""
    if kind == "offset_checkpoint":
        return b"0\n3\nfoo 0 42\nbar.baz 7 0\nq-1 2147483647 9223372036854775807\n"
    if kind == "leader_epoch":
        return b"0\n2\n0 0\n5 1234\n"
    if kind == "meta_properties":
        return (
            b"#\n#Thu Jan 01 00:00:00 UTC 2024\nnode.id=1\ndirectory.id=vDOLnlEbSWi1jd3MS_nW5g\nversion=1\n"
            b"cluster.id=abcdefghijklmnopqrstuv\n"
        )
    if kind == "partition_metadata":
        return b"version: 0\ntopic_id: vDOLnlEbSWi1jd3MS_nW5g"
    if kind == "producer_snapshot":
        from kafkalog.log.producer_snapshot import ProducerSnapshotEntry, format_producer_snapshot

        return format_producer_snapshot([ProducerSnapshotEntry(7, 1, 10, 100, 3, 1700000000000, 2, -1)])
    return b'{"version":0,"brokerEpoch":17}'


@st.composite
def mutated_valid(draw, kind: str) -> bytes:
    buf = bytearray(_valid_sample(kind))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["byte", "insert", "delete", "token"]))
        i = draw(st.integers(0, len(buf)))
        if op == "byte" and i < len(buf):
            buf[i] = draw(st.integers(0, 255))
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del buf[i : i + draw(st.integers(1, 6))]
        else:
            buf[i:i] = draw(TOKENS).encode("utf-8", "surrogatepass")
    return bytes(buf)


@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
def test_checkpoint_parsers_fuzz(kind: str) -> None:
    """Random text, token soup and mutated valid files through each parser."""

    @FUZZ
    @given(st.one_of(st.binary(max_size=300), TEXTISH, mutated_valid(kind)))
    def run(data: bytes) -> None:
        with watchdog():
            target_checkpoint(kind, data)

    run()


@pytest.mark.parametrize("kind", CHECKPOINT_KINDS)
def test_valid_samples_parse(kind: str) -> None:
    """The mutation seeds themselves are accepted (otherwise the fuzzing above would only test error paths)."""
    from kafkalog.checkpoint.clean_shutdown import parse_clean_shutdown

    if kind == "clean_shutdown":
        assert parse_clean_shutdown(_valid_sample(kind)) == (17, None)
    else:
        assert target_checkpoint(kind, _valid_sample(kind)) is not None


@pytest.mark.parametrize(
    "kind,data",
    [
        ("offset_checkpoint", b"0\n2147483647\nfoo 0 1\n"),
        ("leader_epoch", b"0\n2147483647\n1 1\n"),
        ("producer_snapshot", None),
    ],
)
def test_lying_counts_memory(kind: str, data: bytes | None) -> None:
    """An entry count of 2^31-1 in a tiny file: refused without allocating for the claimed count."""
    if data is None:
        from crc32c import crc32c

        body = struct.pack(">i", (1 << 31) - 1) + b"\x00" * 46
        data = struct.pack(">hI", 1, crc32c(body)) + body
    tracemalloc.start()
    try:
        assert target_checkpoint(kind, data) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_oversized_files_refused_by_readers(tmp_path: Path) -> None:
    """Readers that cap the file size (marker, meta.properties) refuse a huge file instead of slurping it."""
    from kafkalog.checkpoint.clean_shutdown import read_clean_shutdown

    (tmp_path / ".kafka_cleanshutdown").write_bytes(b" " * (8 << 20))
    state = read_clean_shutdown(tmp_path)
    assert state.exists and state.broker_epoch is None
