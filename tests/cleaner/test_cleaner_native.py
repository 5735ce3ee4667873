"""The cleaner's compiled core (``kafkalog/cleaner/_cleaner.c``) against the pure-Python path: its MD5 against
hashlib, its offset map (Kafka's buffer size, the dict's answers), and whole passes over logs with every feature
the compiled loops decide (codecs, headers, keyless records, tombstones before and after their horizon,
LogAppendTime, idempotent producers, a map too small for one pass) giving the same files and counters."""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path

import pytest

from kafkalog.cleaner import Cleaner, CleanerConfig, OffsetMap, columnar, native
from kafkalog.errors import CleanerError
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.batch import build_batch
from kafkalog.records.compression import CompressionType
from kafkalog.records.record import Record, TimestampType
from tests.cleaner_cases import clean_like_oracle
from tests.cleaner_random import RandomHistory

pytestmark = pytest.mark.skipif(native.compiled is None, reason="the compiled cleaner core is not built")

T0 = 1_700_000_000_000
INT_MAX = (1 << 31) - 1


def test_md5_is_hashlib_md5() -> None:
    rng = random.Random(7)
    lengths = list(range(0, 140)) + [rng.randrange(140, 5000) for _ in range(40)] + [1 << 16]
    for n in lengths:
        data = rng.randbytes(n)
        assert native.compiled.md5(data) == hashlib.md5(data).digest(), n


@pytest.mark.parametrize(("dedupe", "threads"), [(1 << 20, 1), (1 << 20, 3), (24 * 40 + 23, 1), (5 << 30, 2)])
def test_offset_map_buffer_is_kafkas_share(dedupe: int, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The map's memory is one thread's share of ``log.cleaner.dedupe.buffer.size`` (capped at Int.MaxValue), as
    whole 24-byte slots, allocated once: filling it does not grow it. This is the compiled map's buffer (the pure
    path's map is a dict), so the switch to the pure path is cleared for this test."""
    monkeypatch.delenv("KAFKALOG_NO_EXTENSIONS", raising=False)
    config = CleanerConfig(dedupe_buffer_size=dedupe, threads=threads)
    memory = min(dedupe // threads, INT_MAX)
    omap = Cleaner(config).offset_map
    assert omap.slots == memory // 24
    assert omap.allocated_bytes == omap.slots * 24 <= memory
    if omap.slots < 100_000:
        table = omap.table
        for i in range(omap.desired_size(config.dedupe_buffer_load_factor)):
            omap.put(b"key-%d" % i, i)
        assert omap.table is table and omap.allocated_bytes == omap.slots * 24


def test_compiled_map_answers_as_the_dict() -> None:
    rng = random.Random(3)
    compiled, pure = OffsetMap(24 * 200, compiled=True), OffsetMap(24 * 200, compiled=False)
    keys = [rng.randbytes(rng.randrange(0, 30)) for _ in range(150)]
    for offset in range(600):
        key = rng.choice(keys)
        compiled.put(key, offset)
        pure.put(key, offset)
    assert compiled.size == pure.size and compiled.latest_offset == pure.latest_offset == 599
    for key in keys + [b"absent", b"other"]:
        assert compiled.get(key) == pure.get(key)
    assert compiled.allocated_bytes == 24 * 200 and pure.allocated_bytes is None
    compiled.clear()
    assert compiled.size == 0 and compiled.get(keys[0]) == -1 and not compiled.table.any()


@pytest.mark.parametrize("compiled", [True, False])
def test_a_full_map_refuses_every_put_as_kafkas(compiled: bool) -> None:
    # SkimpyOffsetMap.put: require(entries < slots), checked before it looks for the key
    omap = OffsetMap(24 * 4, compiled=compiled)
    for i in range(4):
        omap.put(b"k%d" % i, i)
    assert omap.get(b"k1") == 1 and omap.get(b"zz") == -1
    for key in (b"k1", b"new"):
        with pytest.raises(CleanerError, match="full"):
            omap.put(key, 11)


def _write_log(part: Path, seed: int, config: dict[str, str], start_ms: int = T0, batches: int = 160,
               prefix: bytes = b"k") -> int:
    """Append plain (non-transactional) batches with every feature the compiled filter decides, then roll and
    append one record so that they are all cleanable; returns the clock."""
    rng = random.Random(seed)
    clock = [start_ms]
    log = Log.open(part, LogConfig.from_properties(config), clock=lambda: clock[0])
    offset = log.log_end_offset
    seqs = {pid: e.last_seq + 1 for pid, e in log.producer_state.active_producers.items()}
    seqs.setdefault(7, 0)
    seqs.setdefault(9, 0)
    keys = [prefix + b"%d" % i for i in range(rng.randint(5, 30))]
    for _ in range(batches):
        clock[0] += rng.randint(1, 400)
        n = rng.randint(1, 8)
        recs = []
        for i in range(n):
            key = None if rng.random() < 0.05 else rng.choice(keys)
            value = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 60))
            headers = tuple((f"h{j}", None if rng.random() < 0.3 else rng.randbytes(3))
                            for j in range(rng.choice([0, 0, 1, 2])))
            recs.append(Record(offset + i, clock[0] - rng.randint(0, 50), key, value, headers))
        pid = rng.choice([-1, -1, 7, 9])
        log_append = rng.random() < 0.2
        data = build_batch(
            recs, base_offset=offset, compression=CompressionType(rng.choice([0, 0, 1, 2, 3, 4])),
            timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
            log_append_time=clock[0] if log_append else None, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seqs[pid] if pid >= 0 else -1)
        if pid >= 0:
            seqs[pid] += n
        log.append_as_follower(data)
        offset += n
        if rng.random() < 0.05:
            log.roll()
    # tombstones that stay the latest records of their keys (their horizon is written by the first pass)
    tombstones = [Record(offset + i, clock[0], key, None) for i, key in enumerate(keys[:3])]
    log.append_as_follower(build_batch(tombstones, base_offset=offset))
    offset += len(tombstones)
    log.roll()
    log.append_as_follower(build_batch([Record(offset, clock[0], b"last", b"v")], base_offset=offset))
    log.close()
    return clock[0]


@pytest.mark.parametrize(("seed", "dedupe"), [(1, None), (2, 24 * 12), (3, 24 * 40), (4, None)])
def test_compiled_and_python_passes_are_identical(seed: int, dedupe: int | None, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Three passes (with writes between them, before and past the first's delete horizons) on each path: the
    same files, bytes and counters; the compiled loops took chunks on their path (map, filter, compressed
    rebuilds)."""
    config = {"cleanup.policy": "compact", "segment.bytes": str(random.Random(seed).choice([3000, 9000, 40000])),
              "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "60000"}
    src = tmp_path / "src" / "t-0"
    last = _write_log(src, seed, config)
    calls = {"map": 0, "filter": 0, "compressed": 0}
    for name, key in (("map_chunk", "map"), ("filter_chunk", "filter")):
        real = getattr(columnar, name)

        def spy(*args, _real=real, _key=key, **kwargs):
            out = _real(*args, **kwargs)
            calls[_key] += out is not None
            return out

        monkeypatch.setattr(columnar, name, spy)
    real_compressors = columnar.compressors

    def counted(fn):
        def compress(section):
            calls["compressed"] += 1
            return fn(section)
        return compress

    # the compiled writer's codec calls: compressed batches rebuilt on the compiled path
    monkeypatch.setattr(columnar, "compressors", lambda: tuple(fn and counted(fn) for fn in real_compressors()))
    monkeypatch.setattr("kafkalog.cleaner.cleaner.map_chunk", columnar.map_chunk)
    monkeypatch.setattr("kafkalog.cleaner.cleaner.filter_chunk", columnar.filter_chunk)
    parts = {}
    for path in ("compiled", "python"):
        part = tmp_path / path / "t-0"
        shutil.copytree(src.parent, part.parent)
        stats, clock = [], last
        # a pass, then more writes of other keys (the first pass's tombstones stay the latest of theirs): a pass
        # before their horizon (kept), more writes, a pass past it (gone)
        for i, (gap, batches) in enumerate(((0, 0), (2_000, 30), (200_000, 30))):
            if batches:
                clock = _write_log(part, seed + 100 * i, config, clock + gap, batches, b"n%d-" % i)
            report = clean_like_oracle(part, config, clock + 1000, dedupe_buffer_bytes=dedupe or 1 << 20, path=path)
            stats.append(report.result.stats if report.result else None)
        parts[path] = (part, stats)
    assert parts["compiled"][1] == parts["python"][1]
    assert all(st is not None and st.messages_written > 0 for st in parts["compiled"][1])
    compiled_names = sorted(p.name for p in parts["compiled"][0].iterdir())
    assert compiled_names == sorted(p.name for p in parts["python"][0].iterdir())
    for name in compiled_names:
        a, b = parts["compiled"][0] / name, parts["python"][0] / name
        assert a.read_bytes() == b.read_bytes(), name
    assert calls["map"] and calls["filter"] and calls["compressed"]


@pytest.mark.parametrize("seed", range(1, 8))
def test_transactional_histories_clean_alike_on_both_paths(seed: int, tmp_path: Path) -> None:
    """Random histories with committed, aborted and open transactions, idempotent producers and every codec
    (``tests/cleaner_random.py``): two passes on each path give the same files and counters."""
    history = RandomHistory(seed)
    src = tmp_path / "src" / f"r{seed}-0"
    history.append(src, 60)
    results = {}
    for path in ("compiled", "python"):
        part = tmp_path / path / src.name
        shutil.copytree(src.parent, part.parent)
        first = clean_like_oracle(part, history.topic_config, history.clock_ms + 61_000, path=path)
        second = clean_like_oracle(part, history.topic_config, history.clock_ms + 200_000, path=path,
                                   dedupe_buffer_bytes=24 * 10)
        results[path] = (part, [r.result.stats if r.result else None for r in (first, second)])
    assert results["compiled"][1] == results["python"][1]
    assert any(st is not None and st.messages_read for st in results["compiled"][1])
    ours, theirs = results["compiled"][0], results["python"][0]
    names = sorted(p.name for p in ours.iterdir())
    assert names == sorted(p.name for p in theirs.iterdir())
    for name in names:
        assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


@pytest.mark.skipif(not getattr(native.compiled, "gzip_in_c", 0), reason="the cleaner core is built without zlib")
def test_gzip_rebuilds_deflated_in_c_have_the_python_paths_bytes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """gzip batches that lose records, many per chunk (one deflate state reset between them), of sizes from a few
    bytes to several deflate blocks: write_chunk deflates them itself (the Python gzip codec is never called) and
    the files are the pure-Python path's (compression._gzip_compress, Kafka's bytes)."""
    config = {"cleanup.policy": "compact", "segment.bytes": "400000", "min.cleanable.dirty.ratio": "0.01"}
    rng = random.Random(38)
    src = tmp_path / "src" / "t-0"
    log = Log.open(src, LogConfig.from_properties(config), clock=lambda: T0)
    offset = 0
    for _ in range(300):
        n = rng.randint(2, 9)
        size = rng.choice([0, 5, 100, 1000, 70_000])
        recs = [Record(offset + i, T0 + offset, b"k%d" % rng.randrange(40), rng.randbytes(size // 2) * 2)
                for i in range(n)]
        log.append_as_follower(build_batch(recs, base_offset=offset, compression=CompressionType.GZIP))
        offset += n
    log.roll()
    log.append_as_follower(build_batch([Record(offset, T0, b"last", b"v")], base_offset=offset))
    log.close()

    def refuse(section):
        raise AssertionError("the compiled writer called the Python gzip codec")

    real = columnar.compressors
    monkeypatch.setattr(columnar, "compressors", lambda: (None, refuse, *real()[2:]))
    parts = {}
    for path in ("compiled", "python"):
        part = tmp_path / path / "t-0"
        shutil.copytree(src.parent, part.parent)
        report = clean_like_oracle(part, config, T0 + 1000, path=path)
        assert report.result is not None and report.result.stats.messages_written < offset
        parts[path] = part
    names = sorted(p.name for p in parts["compiled"].iterdir())
    assert names == sorted(p.name for p in parts["python"].iterdir())
    for name in names:
        assert (parts["compiled"] / name).read_bytes() == (parts["python"] / name).read_bytes(), name
