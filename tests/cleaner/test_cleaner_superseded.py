"""Batches the clean pass knows to keep no record (``columnar.Superseded``: compressed data batches inside the
offset map's range holding no mapped key's latest offset and no keyless record) are framed without being
decompressed, and the pass writes the same files and counts the same stats as when it decodes them and as the
pure-Python path; partial maps, keyless records, producers' last batches and tombstones included."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from kafkalog.cleaner import columnar, native
from kafkalog.log.config import LogConfig
from kafkalog.log.log import Log
from kafkalog.records.batch import build_batch
from kafkalog.records.compression import CompressionType
from kafkalog.records.record import Record
from tests.cleaner.test_cleaner_native import T0, _write_log
from tests.cleaner_cases import clean_like_oracle

pytestmark = pytest.mark.skipif(native.compiled is None, reason="the compiled cleaner core is not built")


def _framed_without_records(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts, per chunk the clean pass read, the batches the decoder framed without their records."""
    seen: list[int] = []
    real = columnar.read_chunk

    def spy(data, compiled, superseded=None):
        chunk = real(data, compiled, superseded)
        if superseded is not None and chunk.columns is not None:
            cc = chunk.columns
            seen.append(int(np.count_nonzero((cc.counts == 0) & (cc.header_count > 0))))
        return chunk

    monkeypatch.setattr("kafkalog.cleaner.cleaner.read_chunk", spy)
    return seen


def _files(part: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(part.iterdir())}


_WAYS = ("skipping", "decoding", "python")


def _three_ways(parts: dict[str, Path], config: dict[str, str], now: int, dedupe: int,
                monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Clean each of ``parts`` once: with skipping, without it, on the pure path; assert the files and stats
    agree; return what the first one skipped per chunk."""
    out = {}
    skipped: list[int] = []
    for way in _WAYS:
        with monkeypatch.context() as m:
            if way == "skipping":
                skipped = _framed_without_records(m)
            if way == "decoding":
                m.setattr(columnar.Superseded, "for_decoder", lambda self, omap: None)
            report = clean_like_oracle(parts[way], config, now, dedupe_buffer_bytes=dedupe,
                                       path="python" if way == "python" else "compiled")
        out[way] = (report.result.stats if report.result else None, _files(parts[way]))
    assert out["skipping"][0] == out["decoding"][0] == out["python"][0]
    assert out["skipping"][1] == out["decoding"][1] == out["python"][1]
    return skipped


def _copies(src: Path, tmp_path: Path) -> dict[str, Path]:
    parts = {}
    for way in _WAYS:
        parts[way] = tmp_path / way / src.name
        shutil.copytree(src.parent, parts[way].parent)
    return parts


def test_superseded_compressed_batches_are_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten records a batch over few keys (most batches keep nothing), every codec, one keyless record, the last
    batch of an idempotent producer (kept empty)."""
    config = {"cleanup.policy": "compact", "segment.bytes": "60000", "min.cleanable.dirty.ratio": "0.01"}
    src = tmp_path / "src" / "t-0"
    log = Log.open(src, LogConfig.from_properties(config), clock=lambda: T0)
    offset = 0
    for i in range(400):
        recs = [Record(offset + j, T0 + offset, None if (i, j) == (200, 3) else b"k%d" % ((offset + j) % 37),
                       b"v" * 40) for j in range(10)]
        pid = 5 if i in (100, 101) else -1
        log.append_as_follower(build_batch(recs, base_offset=offset, compression=CompressionType(1 + i % 4),
                                           producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                           base_sequence=10 * (i - 100) if pid >= 0 else -1))
        offset += 10
    log.roll()
    log.append_as_follower(build_batch([Record(offset, T0, b"last", b"v")], base_offset=offset))
    log.close()
    skipped = _three_ways(_copies(src, tmp_path), config, T0 + 1000, 1 << 20, monkeypatch)
    assert sum(skipped) > 300  # of 400 batches, all but those holding one of the 37 keys' latest records


@pytest.mark.parametrize(("seed", "dedupe"), [(11, 1 << 20), (12, 24 * 12), (13, 24 * 40), (14, 1 << 20)])
def test_random_histories_clean_alike_with_and_without_skipping(seed: int, dedupe: int, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``test_cleaner_native``'s histories (keyless records, tombstones, producers, every codec), with maps that
    fill part way (small ``dedupe``); then more writes and a second pass (a clean section below the dirty one)."""
    config = {"cleanup.policy": "compact", "segment.bytes": "9000", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "60000"}
    src = tmp_path / "src" / "t-0"
    clock = _write_log(src, seed, config, batches=300)
    parts = _copies(src, tmp_path)
    skipped = _three_ways(parts, config, clock + 1000, dedupe, monkeypatch)
    for part in parts.values():
        later = _write_log(part, seed + 50, config, clock + 5000, 100, b"n-")
    skipped += _three_ways(parts, config, later + 1000, dedupe, monkeypatch)
    assert sum(skipped) > 0 or dedupe < 1 << 20, skipped  # a map of a few entries covers a few batches


def test_too_many_keyless_records_skip_nothing() -> None:
    marks = columnar.Superseded(0)
    marks.MAX_NO_KEY = 3

    class Cols:
        arrays = {"offset": np.arange(10, dtype=np.int64), "key_valid": np.zeros(10, np.uint8)}

    class CC:
        cols = Cols()

    marks.note_chunk(CC())  # type: ignore[arg-type]
    assert not marks.usable
