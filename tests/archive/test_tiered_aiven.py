"""Aiven tiered-storage objects (golden/tiered-aiven: written by the plugin's own RemoteStorageManager) read back
byte for byte: the library reader against the plugin's own fetches, ``kafkalog verify``/``dump`` with
``--rsm-config``, the errors that must never be silent, and held-out archives written by tests/aiven_writer.py in
other chunk sizes, prefixes and key pairs."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.archive import storage
from kafkalog.archive.discovery import discover_segments
from kafkalog.archive.tiered import AivenSegment, load_rsm_config
from kafkalog.errors import CorruptTieredObjectError, TieredConfigError, TieredKeyError
from kafkalog.records import read_batches, read_record_columns
from tests.aiven_writer import AIVEN, golden_segments, new_key_pair, write_rsm_properties, write_segment
from tests.conftest import needs_golden
from tests.oracle import needs_oracle, run_oracle

pytestmark = [needs_golden]

VARIANTS = ("plain-chunk512", "zstd-chunk256", "encrypted-zstd-chunk256")
TOPIC_DIR = "tiered-dGllcmVkAAAAAAAAAAAEBQ"
_IDX = {"OFFSET": "offset", "TIMESTAMP": "timestamp", "PRODUCER_SNAPSHOT": "producerSnapshot",
        "LEADER_EPOCH": "leaderEpoch", "TRANSACTION": "transaction"}  # fmt: skip


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def objs(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]


def variant_copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(AIVEN / "variants" / name, dst)
    return dst


def local_records() -> list[tuple]:
    """(offset, timestamp, key, value) of the partition's first five segments as Kafka wrote them locally."""
    out = []
    for seg in golden_segments():
        cols = read_record_columns(seg.log)
        t = cols.to_arrow(["offset", "timestamp", "key", "value"])
        out += list(zip(*(t[c].to_pylist() for c in ("offset", "timestamp", "key", "value")), strict=True))
    return out


# ------------------------------------------------------------------------------------------------ the reader


@pytest.mark.parametrize("variant", VARIANTS)
def test_reader_returns_what_the_plugin_fetches(variant: str) -> None:
    d = AIVEN / "variants" / variant
    rsm = load_rsm_config(d / "rsm.properties")
    result = json.loads((d / "RESULT.json").read_text())
    for seg in result["segments"]:
        s = AivenSegment.open(str(d / "remote" / (seg["mainPath"] + ".log")), rsm=rsm)
        assert s.size == seg["metadata"]["segmentSizeInBytes"]
        for f in seg["fetch"]["logSegment"]:  # fetchLogSegment(md, start[, end]): end inclusive
            end = None if f["endPosition"] is None else f["endPosition"] + 1
            assert hashlib.sha256(s.read(f["startPosition"], end)).hexdigest() == f["sha256"], f["call"]
        for kind, f in seg["fetch"]["index"].items():
            data = s.index(_IDX[kind])
            if "sha256" in f:
                assert hashlib.sha256(data).hexdigest() == f["sha256"], kind
            else:
                assert data is None and not f["localExists"]


def test_a_range_reads_only_the_chunks_covering_it(monkeypatch) -> None:
    d = AIVEN / "variants" / "encrypted-zstd-chunk256"
    seg = json.loads((d / "RESULT.json").read_text())["segments"][0]
    s = AivenSegment.open(str(d / "remote" / (seg["mainPath"] + ".log")), rsm=load_rsm_config(d / "rsm.properties"))
    calls = []
    real = storage.read_range
    monkeypatch.setattr(storage, "read_range", lambda url, a, b, o=None: calls.append((url, a, b)) or real(url, a, b, o))
    data = s.read(263, 778)  # original chunks 1-3 (256-byte chunks)
    chunks = seg["manifest"]["chunks"]
    assert calls == [(s.log_url, chunks[1]["transformedPosition"], chunks[3]["transformedPosition"] + chunks[3]["transformedSize"])]
    want = next(f for f in seg["fetch"]["logSegment"] if f["call"] == "fetchLogSegment(md, 263, 777)")
    assert hashlib.sha256(data).hexdigest() == want["sha256"]


def test_transformed_object_read_as_a_log_is_an_error_not_zero_records() -> None:
    for variant in ("zstd-chunk256", "encrypted-zstd-chunk256"):
        log = next((AIVEN / "variants" / variant / "remote").rglob("*.log"))
        with pytest.raises(TieredConfigError, match=r"Aiven tiered-storage object .*rsm-config"):
            read_record_columns(str(log))
        with pytest.raises(TieredConfigError):
            read_batches(str(log))
    plain = next((AIVEN / "variants" / "plain-chunk512" / "remote").rglob("*.log"))  # untransformed: a segment
    assert len(read_record_columns(str(plain))) > 0


# ---------------------------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("variant", VARIANTS)
def test_verify_and_dump_every_golden_variant(variant: str) -> None:
    d = AIVEN / "variants" / variant
    res = run("verify", "--json", d / "remote", "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 0, res.output
    segs = [o for o in objs(res) if o["type"] == "segment"]
    assert len(segs) == 5 and all(o["status"] == "ok" and o["indexStatus"] == "ok" for o in segs)
    assert sum(o["recordCount"] for o in segs) == 105
    res = run("dump", "--deep-iteration", "--print-data-log", "--json", d / "remote", "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 0, res.output
    records = [o for o in objs(res) if o["type"] == "record"]
    want = local_records()
    assert [r["offset"] for r in records] == [w[0] for w in want] == list(range(105))
    assert [(r["timestamp"], r["valueSize"]) for r in records] == [(w[1], -1 if w[3] is None else len(w[3])) for w in want]
    data = [w[3].decode() for w in want if w[3] and w[3].startswith(b"value-")]
    assert len(data) > 90 and [r["payload"] for r in records if r.get("payload", "").startswith("value-")] == data


def test_file_urls_read_like_paths() -> None:
    d = AIVEN / "variants" / "encrypted-zstd-chunk256"
    url = f"file://{d / 'remote'}"
    res = run("verify", "--json", url, "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 0, res.output
    segs = [o for o in objs(res) if o["type"] == "segment"]
    assert len(segs) == 5 and all(o["path"].startswith(url) and o["status"] == "ok" for o in segs)
    log = next((d / "remote").rglob("00000000000000000024-*.log"))
    s = AivenSegment.open(f"file://{log}", rsm=load_rsm_config(d / "rsm.properties"))
    assert bytes(s.read()) == golden_segments()[1].log


def test_encrypted_without_the_configuration_exits_2_naming_the_object() -> None:
    d = AIVEN / "variants" / "encrypted-zstd-chunk256"
    res = run("verify", d / "remote")
    assert res.exit_code == 2
    assert "00000000000000000000-U0VHTUVOVAAAAAAAAAAEBQ.log: stored encrypted" in res.stderr
    segs = [o for o in objs(run("verify", "--json", d / "remote")) if o["type"] == "segment"]
    assert segs == []  # never "ok", never zero records: each one is an error line
    res = run("dump", next((d / "remote").rglob("*.log")))
    assert res.exit_code == 2 and "rsm-config" in res.stderr


def test_wrong_key_exits_2(tmp_path: Path) -> None:
    d = variant_copy(tmp_path, "encrypted-zstd-chunk256")
    new_key_pair(d / "keys")  # another key pair under the same file names
    res = run("verify", d / "remote", "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 2 and "does not unwrap" in res.stderr
    log = next((d / "remote").rglob("*.log"))
    with pytest.raises(TieredKeyError, match=str(log)):
        AivenSegment.open(str(log), rsm=load_rsm_config(d / "rsm.properties"))


def test_missing_key_file_and_config_are_one_line_errors(tmp_path: Path) -> None:
    d = variant_copy(tmp_path, "encrypted-zstd-chunk256")
    (d / "keys" / "private.pem").unlink()
    res = run("verify", d / "remote", "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 2 and "private.key.file" in res.stderr
    res = run("verify", d / "remote", "--rsm-config", tmp_path / "nope.properties")
    assert res.exit_code == 2 and "nope.properties" in res.stderr


def test_tampered_chunk_is_corruption_in_that_chunk_only(tmp_path: Path) -> None:
    d = variant_copy(tmp_path, "encrypted-zstd-chunk256")
    seg = json.loads((d / "RESULT.json").read_text())["segments"][0]
    log = d / "remote" / (seg["mainPath"] + ".log")
    chunk = seg["manifest"]["chunks"][3]
    data = bytearray(log.read_bytes())
    data[chunk["transformedPosition"] + 40] ^= 0x01
    log.write_bytes(bytes(data))
    rsm = load_rsm_config(d / "rsm.properties")
    s = AivenSegment.open(str(log), rsm=rsm)
    with pytest.raises(CorruptTieredObjectError, match="chunk 3 .* fails its AES-GCM tag") as info:
        s.read()
    assert info.value.original_range == (768, 256)
    assert s.read(0, 768) == golden_segments()[0].log[:768]  # the chunks before it still read
    damage: list = []
    restored = s.read(damage=damage)  # a scan that keeps going: the chunk comes back zeroed, reported
    assert [(x.chunk, x.position, x.size) for x in damage] == [(3, 768, 256)]
    original = golden_segments()[0].log
    lost = {b.position for b in read_batches(original) if b.position < 1024 and b.position + b.size_in_bytes > 768}
    kept = [(b.position, b.base_offset) for b in read_batches(original) if b.position not in lost]
    from kafkalog.log.salvage_scan import scan_segment  # salvage's rules: every whole CRC-valid batch

    found = scan_segment(memoryview(restored), 0)
    assert [(b.position, b.first) for b in found.batches] == kept
    res = run("verify", "--json", d / "remote", "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 1
    bad = [o for o in objs(res) if o["type"] == "segment" and o["status"] != "ok"]
    assert len(bad) == 1 and bad[0]["path"] == str(log) and "chunk 3" in bad[0]["error"]
    assert {"position": 768, "size": 256} in bad[0]["corruptRanges"]


def test_manifest_that_does_not_match_its_object(tmp_path: Path) -> None:
    d = variant_copy(tmp_path, "zstd-chunk256")
    log = next((d / "remote").rglob("*.log"))
    log.write_bytes(log.read_bytes()[:-5])
    res = run("verify", "--json", d / "remote", "--rsm-config", d / "rsm.properties")
    assert res.exit_code == 1
    (bad,) = [o for o in objs(res) if o["type"] == "segment" and o["status"] != "ok"]
    assert bad["path"] == str(log) and "manifest's chunk index says" in bad["error"]
    manifest = log.with_suffix(".rsm-manifest")
    manifest.write_text("{not json")
    with pytest.raises(CorruptTieredObjectError, match="rsm-manifest: manifest is not JSON"):
        AivenSegment.open(str(log))


# ------------------------------------------------------------------------------------------------- held out


@pytest.mark.parametrize(
    ("chunk_size", "compression", "encrypted", "prefix"),
    [(100, False, True, ""), (1000, True, True, "tenant/a/"), (4096, True, False, "x/"), (333, False, False, ""),
     (500, True, True, "archive/pfx-")],
)
def test_held_out_archives_read_back_identically(tmp_path: Path, chunk_size, compression, encrypted, prefix) -> None:
    bucket = tmp_path / "bucket"
    key_id = priv = pub = None
    if encrypted:
        key_id = "k-held-out"
        priv, pub = new_key_pair(tmp_path / "keys")
    props = tmp_path / "conf" / "rsm.properties"
    props.parent.mkdir()
    write_rsm_properties(props, chunk_size=chunk_size, compression=compression, key_id=key_id, private=priv,
                         public=pub, prefix=prefix)  # fmt: skip
    rsm = load_rsm_config(props)
    segs = golden_segments()
    for seg in segs:
        log = write_segment(bucket, seg, chunk_size=chunk_size, compression=compression, prefix=prefix,
                            key_id=key_id, public=pub)  # fmt: skip
        s = AivenSegment.open(str(log), rsm=rsm)
        assert s.read() == seg.log
        assert s.read(chunk_size - 3, chunk_size + 7) == seg.log[chunk_size - 3 : chunk_size + 7]
        assert s.indexes() == seg.indexes
    items = discover_segments(bucket, key_prefix=rsm.key_prefix)  # a prefix glued to the topic dir's name
    assert len(items) == 5 and {i.topic for i in items} == {"tiered"} and {i.partition for i in items} == {0}
    res = run("verify", "--json", bucket, "--rsm-config", props)
    assert res.exit_code == 0, res.output
    assert sum(o.get("recordCount", 0) for o in objs(res) if o["type"] == "segment") == 105
    res = run("dump", "--deep-iteration", "--json", bucket, "--rsm-config", props)
    assert [o["offset"] for o in objs(res) if o["type"] == "record"] == list(range(105))


@needs_oracle
def test_kafkas_local_tiered_storage_reads_as_before_and_equals_the_aiven_bucket(tmp_path: Path) -> None:
    """Kafka's LocalTieredStorage layout (untransformed segments, ``<offset>-<id>.index`` and so on) needs no
    configuration; the same partition through both RemoteStorageManagers gives the same records."""
    run_oracle("generate-tiered", tmp_path)
    res = run("verify", "--json", tmp_path / "remote")
    assert res.exit_code == 0, res.output
    segs = [o for o in objs(res) if o["type"] == "segment"]
    assert len(segs) == 5 and {o["indexStatus"] for o in segs} == {"ok"}
    local = run("dump", "--deep-iteration", "--json", tmp_path / "remote")
    d = AIVEN / "variants" / "encrypted-zstd-chunk256"
    aiven = run("dump", "--deep-iteration", "--json", d / "remote", "--rsm-config", d / "rsm.properties")
    recs = [[(o["offset"], o["timestamp"], o["valueSize"]) for o in objs(r) if o["type"] == "record"] for r in (local, aiven)]
    assert recs[0] == recs[1] and len(recs[0]) == 105


@pytest.mark.parametrize(("compression", "encrypted"), [(True, True), (True, False), (False, True)])
def test_large_chunks_restore_in_tasks_of_their_own_and_in_place(tmp_path: Path, monkeypatch, compression,
                                                                  encrypted) -> None:  # fmt: skip
    """Compressed chunks make few stored bytes: a ranged read's worth would be one serial task of many chunks. Each
    task restores at most DECODE_BYTES original bytes, so chunks restore in parallel; ``read`` writes each whole
    chunk straight into its buffer (decompress or decrypt into place), and every range reads back identically."""
    from kafkalog.archive.tiered import aiven

    monkeypatch.setattr(aiven, "DECODE_BYTES", 1000)
    key_id = priv = pub = None
    if encrypted:
        key_id = "k1"
        priv, pub = new_key_pair(tmp_path / "keys")
    props = tmp_path / "rsm.properties"
    write_rsm_properties(props, chunk_size=1000, compression=compression, key_id=key_id, private=priv, public=pub)
    seg = golden_segments()[0]
    s = AivenSegment.open(str(write_segment(tmp_path / "b", seg, chunk_size=1000, compression=compression,
                                            key_id=key_id, public=pub)), rsm=load_rsm_config(props))  # fmt: skip
    tasks, into = [], []
    real_group, real_detr = s._group, s._detransform
    monkeypatch.setattr(s, "_group", lambda *a: tasks.append(a[:2]) or real_group(*a))
    monkeypatch.setattr(s, "_detransform", lambda d, c, into=None: into_used(real_detr(d, c, into=into), into))

    def into_used(out, dest):
        into.append(dest is not None and out is dest)
        return out

    assert s.read() == seg.log
    chunks = -(-len(seg.log) // 1000)
    assert tasks == [(c, c + 1) for c in range(chunks)]  # one chunk per task
    assert into.count(True) == chunks  # each chunk restored in place
    for lo, hi in ((0, 1), (999, 1001), (1500, 2600), (len(seg.log) - 5, len(seg.log))):
        assert s.read(lo, hi) == seg.log[lo:hi]
        assert b"".join(bytes(p) for p in s.iter_range(lo, hi)) == seg.log[lo:hi]


@pytest.mark.parametrize("variant", VARIANTS)
def test_read_writes_every_byte_of_its_unzeroed_buffer(tmp_path: Path, monkeypatch, variant: str) -> None:
    """``read`` restores into a buffer it does not zero first: filled with garbage here, the result is still the
    segment byte for byte, and a damaged chunk read with ``damage`` comes back as zeros, not as the garbage."""
    from kafkalog.archive.tiered import ChunkDamage, aiven

    monkeypatch.setattr(aiven, "_UNFILLED_FROM", 1)
    monkeypatch.setattr(aiven, "_NEW_BYTEARRAY", lambda _, n: bytearray(b"\xa5" * n))
    d = variant_copy(tmp_path, variant)
    rsm = load_rsm_config(d / "rsm.properties")
    logs = sorted((d / "remote").rglob("*.log"))
    for log, seg in zip(logs, golden_segments(), strict=True):
        s = AivenSegment.open(str(log), rsm=rsm)
        assert s.read() == seg.log
        assert s.read(7, len(seg.log) - 5) == seg.log[7:-5]
    raw = bytearray(logs[1].read_bytes())
    raw[len(raw) // 2] ^= 0x10
    logs[1].write_bytes(bytes(raw))
    damage: list[ChunkDamage] = []
    got = AivenSegment.open(str(logs[1]), rsm=rsm).read(damage=damage)
    want = golden_segments()[1].log
    assert len(got) == len(want)
    if damage:  # a transformed chunk fails: its bytes are zeros
        (d0,) = damage
        assert got[d0.position : d0.position + d0.size] == bytes(d0.size)
        assert got[: d0.position] == want[: d0.position]
    else:  # stored plain: the flipped byte is read as stored
        assert sum(a != b for a, b in zip(got, want, strict=True)) == 1
    assert b"\xa5\xa5\xa5\xa5" not in got or b"\xa5\xa5\xa5\xa5" in want
