"""``kafkalog dump``'s text is kafka-dump-log.sh's, word for word, where docs/cli.md says so: the order a
``__transaction_state`` record's partitions print in (Scala 2.13's ``mutable.HashSet`` filled group by group), the
stray ``}`` Kafka prints after a magic 0/1 record's CRC, and the KIP-858 directories a ``PartitionChangeRecord``
carries (an empty list is absent; lengths that do not match the replicas are refused, as Kafka's
``PartitionRegistration`` does). The text is compared with the oracle's own ``DumpLogSegments`` run
(``decode-txn-log --text``) on data generated here."""

from __future__ import annotations

import os
import random
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.metadata import MIGRATING, UNASSIGNED, read_metadata_log
from kafkalog.metadata.codec import write_message
from kafkalog.metadata.decode import decode_txn_record, scala_set_order
from kafkalog.metadata.metadata_records import RECORD_TYPES
from kafkalog.metadata.txn_records import TXN_KEY, TXN_VALUE
from kafkalog.records import build_batch
from kafkalog.records.legacy import build_legacy_batch
from tests.oracle import ORACLE, java_executable, needs_oracle, run_oracle

TOPICS = ["orders", "payments", "t", "a-much-longer-topic-name", "x1", "x77", "x845"]


def _key(txn_id: str) -> bytes:
    return struct.pack(">h", 0) + write_message(TXN_KEY, 0, {"transactionalId": txn_id})


def _value(rng: random.Random, version: int) -> bytes:
    """A transaction over 1-5 topic groups of 1 to 100 partition ids (duplicates and repeated topics included)."""
    groups = []
    for _ in range(rng.randint(1, 5)):
        n = rng.choice([1, 2, 3, 4, 5, 6, 9, 13, 17, 40, 100])
        groups.append({"topic": rng.choice(TOPICS), "partitionIds": [rng.randint(0, 2 * n) for _ in range(n)]})
    return struct.pack(">h", version) + write_message(TXN_VALUE, version, {
        "producerId": rng.randint(0, 10**6), "producerEpoch": rng.randint(0, 5), "transactionTimeoutMs": 60000,
        "transactionStatus": rng.choice([1, 2, 3, 4, 5, 6, 7]), "transactionPartitions": groups,
        "transactionLastUpdateTimestampMs": 1700000000000 + rng.randint(0, 999),
        "transactionStartTimestampMs": 1700000000000,
    })


def _txn_segment(path: Path, seed: int) -> int:
    """A ``__transaction_state`` segment: magic 2 batches, then magic 0, magic 1 and gzip magic 1 message sets of
    transaction records; returns the number of records."""
    rng = random.Random(seed)
    data, offset = b"", 0
    for i in range(40):
        records = [(_key(f"txn-{i}-{j}"), _value(rng, rng.choice([0, 1]))) for j in range(3)]
        data += build_batch(records, base_offset=offset, timestamp=1700000000000 + i)
        offset += len(records)
    data += build_legacy_batch([(_key("legacy-v0"), _value(rng, 0))], magic=0, base_offset=offset)
    offset += 1
    for codec in (0, 1):
        records = [(_key(f"legacy-v1-{codec}"), _value(rng, 0)), (_key(f"gone-{codec}"), None)]
        data += build_legacy_batch(records, magic=1, base_offset=offset, timestamp=1700000000000, compression=codec)
        offset += len(records)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return offset


def _dump(*args: str) -> list[str]:
    result = CliRunner().invoke(main, ["dump", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@needs_oracle
@pytest.mark.parametrize("seed", [1, 2])
def test_transaction_log_text_is_kafkas_line_for_line(tmp_path: Path, seed: int) -> None:
    """Every line of ``--transaction-log-decoder`` equals DumpLogSegments' own (the oracle runs its main): the
    partitions of transactions over topics of 5 to 100 partitions each in Scala's order, and the legacy record
    lines with Kafka's trailing ``}``."""
    log = tmp_path / "__transaction_state-0" / "00000000000000000000.log"
    count = _txn_segment(log, seed)
    kafka = run_oracle("decode-txn-log", log, "--text").stdout.splitlines()
    ours = _dump("--transaction-log-decoder", str(log))
    assert sum(line.startswith("| offset: ") for line in kafka) == count
    assert ours == kafka
    assert any(line.endswith("}") or "} key: " in line for line in ours)  # the legacy lines are in the compare


def _kafka_dump_log(*args: str) -> subprocess.CompletedProcess[str]:
    """kafka-dump-log.sh itself: ``kafka.tools.DumpLogSegments.main`` from the oracle's jars, one run over all the
    files (the oracle's ``decode-* --text`` runs it per file, which hides the order of the end-of-run reports)."""
    assert ORACLE is not None
    home = ORACLE.parent.parent
    classpath = os.pathsep.join(str(p) for p in sorted((home / "lib").glob("*.jar")))
    env = {**os.environ, "LD_LIBRARY_PATH": str(home / "native")}
    return subprocess.run([java_executable(), "-cp", classpath, "kafka.tools.DumpLogSegments", *args],
                          capture_output=True, text=True, timeout=300, env=env)  # fmt: skip


def _damaged_partition(root: Path, n: int) -> list[Path]:
    """A ``__transaction_state-n`` segment with an offset gap, an ``.index`` whose entries name the wrong offsets
    and a ``.timeindex`` with a wrong, a decreasing and a missing entry: every end-of-run report Kafka prints."""
    rng = random.Random(n)
    part = root / f"__transaction_state-{n}"
    part.mkdir()
    batches, offset = [], 0
    for i in range(4):
        records = [(_key(f"t{n}-{i}-{j}"), _value(rng, 0)) for j in range(2)]
        batches.append((offset, build_batch(records, base_offset=offset, timestamp=1700000000000 + 10 * i)))
        offset += 2 + (5 if i == 1 else 0)  # a gap after the second batch
    log = b"".join(data for _, data in batches)
    positions = [sum(len(d) for _, d in batches[:i]) for i in range(len(batches))]
    index = b"".join(struct.pack(">ii", base + 1 + (i % 2), pos) for i, ((base, _), pos) in enumerate(
        zip(batches, positions, strict=True)))  # odd entries one past the batch's last offset
    time_index = b"".join(struct.pack(">qi", ts, rel) for ts, rel in (
        (1700000000000 + 1, 1), (1700000000000 + 5, 3), (1700000000000 + 4, 10), (1700000000000 + 90, 11)))
    paths = [part / "00000000000000000000.log", part / "00000000000000000000.index",
             part / "00000000000000000000.timeindex"]
    for path, data in zip(paths, (log, index, time_index), strict=True):
        path.write_bytes(data)
    return paths


@needs_oracle
def test_end_of_run_reports_come_in_kafkas_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-dump-log.sh prints its per-file reports (index mismatches, time index findings, offset gaps) after
    all files, walking Scala ``mutable.HashMap``s keyed by absolute path: 14 damaged partitions (more than the
    12 a 16-bucket map holds before it grows) give the same stderr, line for line, and the same stdout. Paths are
    given as an operator types them (``./``, ``//``, ``..``): Kafka prints them as ``java.io.File`` does."""
    paths = [p.relative_to(tmp_path) for n in range(14) for p in _damaged_partition(tmp_path, n)]
    forms = ["{}", "./{}", "{}", "../" + tmp_path.name + "/{}"]
    files = [forms[i % 4].format(str(p).replace("/", "//" if i % 3 == 0 else "/")) for i, p in enumerate(paths)]
    monkeypatch.chdir(tmp_path)
    kafka = _kafka_dump_log("--transaction-log-decoder", "--files", ",".join(files))
    result = CliRunner().invoke(main, ["dump", "--transaction-log-decoder", *files], catch_exceptions=False)
    assert result.stdout.splitlines() == kafka.stdout.splitlines()
    reports = kafka.stderr.splitlines()
    assert sum(line.startswith("Mismatches in :") for line in reports) == 14
    assert sum(line.startswith("Non-consecutive offsets in ") for line in reports) == 14
    assert any(line.startswith("Found timestamp mismatch in :") for line in reports)
    assert any(line.startswith("Found out of order timestamp in :") for line in reports)
    assert any(line.startswith("The following indexed offsets are not found") for line in reports)
    assert result.stderr.splitlines() == reports
    assert result.exit_code == 1


#: byte pieces whose mixes exercise every branch of Java's UTF-8 decoder: leads of each length, overlong and
#: surrogate starts, bytes past U+10FFFF, stray continuations and ASCII
_UTF8_PIECES = [b"\xed", b"\xa0", b"\xbf", b"\x80", b"\xc3", b"\xe0", b"\xf0", b"\xf4", b"\x90", b"\x9f", b"a",
                b"\xc0", b"\xc1", b"\xf5", b"\xff", b"\xe2", b"\x82", b"\xac", b"\xee", b"\xef", b"\xbb", b"\xf8",
                b"\x8f", b"\xdf"]


@needs_oracle
def test_print_data_log_decodes_bytes_as_javas_string_does(tmp_path: Path) -> None:
    """``--print-data-log`` shows keys and values through Kafka's StringDecoder (``new String(bytes, UTF_8)``):
    2,000 random mixes of valid and invalid UTF-8 print the same replacement characters as Kafka's tool."""
    rng = random.Random(11)
    values = [b"".join(rng.choice(_UTF8_PIECES) for _ in range(rng.randint(1, 8))) for _ in range(2000)]
    values += ["héllo ✓ 😀".encode(), b"\xed\xa0\x80", b"\xed\xbb", b"line\nbreak"]
    log = tmp_path / "t-0" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(b"".join(build_batch([(v, v[::-1]) for v in values[i:i + 100]], base_offset=i,
                                         timestamp=1700000000000) for i in range(0, len(values), 100)))
    kafka = _kafka_dump_log("--print-data-log", "--files", str(log))
    assert kafka.returncode == 0, kafka.stderr
    result = CliRunner().invoke(main, ["dump", "--print-data-log", str(log)], catch_exceptions=False)
    assert result.stdout.split("\n") == kafka.stdout.split("\n")


def test_legacy_record_lines_end_as_kafkas_do(tmp_path: Path) -> None:
    """Kafka's DumpLogSegments prints ``crc: ${r.checksum}}``: every magic 0/1 record line (plain, and the inner
    records of a compressed wrapper) ends in ``}`` before any key or payload; magic 2 record lines do not."""
    log = tmp_path / "t-0" / "00000000000000000000.log"
    log.parent.mkdir()
    log.write_bytes(build_legacy_batch([(b"k", b"v")], magic=0)
                    + build_legacy_batch([(b"k", b"v"), (None, b"w")], magic=1, base_offset=1, compression=1)
                    + build_batch([(b"k", b"v")], base_offset=3, timestamp=1700000000000))
    records = [line for line in _dump("--deep-iteration", str(log)) if line.startswith("| ")]
    assert [line.endswith("}") for line in records] == [True, True, True, False]
    with_data = [line for line in _dump("--print-data-log", str(log)) if line.startswith("| ")]
    assert with_data[0].endswith("} key: k payload: v") and with_data[3].endswith("[] key: k payload: v")


def _scala_order_by_hand(groups: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """Scala 2.13.x ``mutable.HashSet`` spelled out: a table of buckets (lists sorted by improved hash), ``add``
    with its growth check for Set1..Set4, ``addElem`` without one for an ``immutable.HashSet``."""
    from kafkalog.metadata.decode import _improved_hash, _table_size_for

    table: list[list[tuple[int, tuple[str, int]]]] = [[] for _ in range(16)]
    size = 0

    def grow(new_len: int) -> None:
        nonlocal table
        old, table = table, [[] for _ in range(new_len)]
        for bucket in old:
            for h, tp in bucket:
                table[h & (new_len - 1)].append((h, tp))

    for group in groups:
        elems = list(dict.fromkeys(group))
        target = _table_size_for(int((len(elems) + 1) / 0.75))
        if target > len(table):
            grow(target)
        for tp in elems:
            if len(elems) <= 4 and size + 1 >= int(len(table) * 0.75):
                grow(len(table) * 2)
            h = _improved_hash(*tp)
            bucket = table[h & (len(table) - 1)]
            if any(other == tp for _, other in bucket):
                continue
            i = 0
            while i < len(bucket) and bucket[i][0] <= h:
                i += 1
            bucket.insert(i, (h, tp))
            size += 1
    return [tp for bucket in table for _, tp in bucket]


def test_scala_set_order_matches_the_hash_table_spelled_out() -> None:
    """The closed form (sort by bucket, hash, arrival) equals the table built element by element, on random
    mixes of small and large groups, including groups that leave the table over its load factor."""
    rng = random.Random(7)
    for _ in range(120):
        groups = []
        for _ in range(rng.randint(1, 6)):
            n = rng.choice([1, 2, 3, 4, 5, 8, 11, 12, 13, 24, 25, 48, 49, 97])
            topic = rng.choice(TOPICS)
            groups.append([(topic, rng.randint(0, 2 * n)) for _ in range(n)])
        assert scala_set_order(groups) == _scala_order_by_hand(groups)


def test_a_large_group_added_after_small_ones_is_not_grown_per_element() -> None:
    """Twelve partitions of one topic after one of another: sizeHint(12) gives 32 buckets and no growth follows;
    growing per element (as for Set1..Set4) would reach 64 buckets and a different order."""
    groups = [[("a", 0)], [("orders", p) for p in range(12)], [("b", p) for p in range(13)]]
    value = struct.pack(">h", 0) + write_message(TXN_VALUE, 0, {
        "producerId": 1, "producerEpoch": 0, "transactionTimeoutMs": 1, "transactionStatus": 1,
        "transactionPartitions": [{"topic": g[0][0], "partitionIds": [p for _, p in g]} for g in groups],
        "transactionLastUpdateTimestampMs": 0, "transactionStartTimestampMs": 0})
    record = decode_txn_record(_key("t"), value)
    assert record.partitions == _scala_order_by_hand(groups)
    assert sorted(record.partitions) == sorted(tp for g in groups for tp in g)


# --- PartitionChangeRecord directories (KIP-858) ------------------------------------------------------------------

TOPIC_ID = "WlpaWgAAAfUREQAAAAAB9Q"
DIR_A, DIR_B, DIR_C = "WlpaWgAAAAsREQAAAAAACw", "WlpaWgAAAAwREQAAAAAADA", "WlpaWgAAABUREQAAAAAAFQ"


def _meta(api_key: int, version: int, data: dict) -> bytes:
    return bytes([1, api_key, version]) + write_message(RECORD_TYPES[api_key], version, data)


def _metadata_log(tmp_path: Path, *changes: dict) -> Path:
    """A metadata log: a topic, partition 0 on brokers 1, 2, 3 in dirs A, B, C, then each change in turn."""
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    records = [
        (None, _meta(2, 0, {"name": "orders", "topicId": TOPIC_ID})),
        (None, _meta(3, 1, {"partitionId": 0, "topicId": TOPIC_ID, "replicas": [1, 2, 3], "isr": [1, 2, 3],
                             "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
                             "partitionEpoch": 0, "directories": [DIR_A, DIR_B, DIR_C]})),
    ]
    records += [(None, _meta(5, 2, {"partitionId": 0, "topicId": TOPIC_ID, **c})) for c in changes]
    (part / "00000000000000000000.log").write_bytes(build_batch(records, base_offset=0, timestamp=1700000000000))
    return part


def test_an_empty_directories_list_in_a_partition_change_is_absent(tmp_path: Path) -> None:
    """``PartitionRegistration.merge``: ``directories`` given but empty keeps the dirs (or, with new replicas,
    carries them over by broker, UNASSIGNED for a new one), like a record without the field."""
    image = read_metadata_log(_metadata_log(tmp_path, {"directories": [], "isr": [1, 2]},
                                            {"replicas": [3, 1, 4], "directories": []}))
    assert image.problems == []
    p = image.topics["orders"].partitions[0]
    assert p.replicas == [3, 1, 4] and p.isr == [1, 2]
    assert p.directories == [DIR_C, DIR_A, UNASSIGNED]  # broker 4 is new
    assert p.partition_epoch == 2


@pytest.mark.parametrize("change", [
    {"replicas": [1, 2], "directories": [DIR_A, DIR_B, DIR_C]},  # checkDirectories(PartitionChangeRecord)
    {"directories": [DIR_A, DIR_B]},  # the registration's own check against the current replicas
    {"replicas": []},  # merge defaults to MIGRATING x the old replica count: 3 directories for 0 replicas
], ids=["replicas-and-dirs", "dirs-only", "no-replicas"])
def test_mismatched_directories_are_refused_as_kafka_does(tmp_path: Path, change: dict) -> None:
    """The record is not applied (Kafka's replay throws; the broker's loader logs it and goes on) and the image
    says why; the partition keeps its replicas, directories and epoch."""
    image = read_metadata_log(_metadata_log(tmp_path, change, {"isr": [1]}))
    assert len(image.problems) == 1
    assert "The lengths for replicas and directories do not match" in image.problems[0]
    p = image.topics["orders"].partitions[0]
    assert (p.replicas, p.directories, p.isr, p.partition_epoch) == ([1, 2, 3], [DIR_A, DIR_B, DIR_C], [1], 1)


def test_a_partition_record_with_mismatched_directories_is_refused(tmp_path: Path) -> None:
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    records = [
        (None, _meta(2, 0, {"name": "orders", "topicId": TOPIC_ID})),
        (None, _meta(3, 1, {"partitionId": 0, "topicId": TOPIC_ID, "replicas": [1, 2, 3], "isr": [1],
                             "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
                             "partitionEpoch": 0, "directories": [DIR_A]})),
        (None, _meta(3, 1, {"partitionId": 1, "topicId": TOPIC_ID, "replicas": [1, 2], "isr": [1],
                             "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
                             "partitionEpoch": 0, "directories": []})),
    ]
    (part / "00000000000000000000.log").write_bytes(build_batch(records, base_offset=0, timestamp=1700000000000))
    image = read_metadata_log(part)
    assert len(image.problems) == 1 and "do not match" in image.problems[0]
    assert list(image.topics["orders"].partitions) == [1]
    assert image.topics["orders"].partitions[1].directories == [MIGRATING] * 2
