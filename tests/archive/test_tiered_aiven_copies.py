"""How an Aiven segment's bytes reach the caller: untransformed chunks copied once, straight into their place in
``read``'s result (no intermediate bytes object), the same bytes as before for every kind of chunk, the same typed
errors for a cut or missing object, the RSA unwrap of a data key done once per (key pair, wrapped key, private
key), and the result buffer's pages asked for as huge pages."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from kafkalog.archive import storage
from kafkalog.archive.tiered import AivenSegment, aiven, load_rsm_config, open_ahead
from kafkalog.errors import CorruptTieredObjectError, TieredKeyError
from tests.aiven_writer import golden_segments, new_key_pair, write_rsm_properties, write_segment
from tests.conftest import needs_golden

pytestmark = [needs_golden]

CHUNK = 200
RANGES = ((0, None), (0, 1), (199, 201), (300, 900), (7, -5), (-5, None))


def _bucket(tmp_path: Path, *, compression: bool, encrypted: bool, keys: tuple[Path, Path] | None = None):
    key_id = priv = pub = None
    if encrypted:
        key_id = "k1"
        priv, pub = keys or new_key_pair(tmp_path / "keys")
    props = tmp_path / "rsm.properties"
    write_rsm_properties(props, chunk_size=CHUNK, compression=compression, key_id=key_id, private=priv, public=pub)
    logs = [write_segment(tmp_path / "b", s, chunk_size=CHUNK, compression=compression, key_id=key_id, public=pub)
            for s in golden_segments()]  # fmt: skip
    return logs, load_rsm_config(props)


def _span(n: int, lo: int, hi: int | None) -> tuple[int, int]:
    lo = lo % n if lo < 0 else lo
    hi = n if hi is None else (hi % n if hi < 0 else hi)
    return lo, hi


@pytest.mark.parametrize(("compression", "encrypted"), [(False, False), (True, False), (False, True), (True, True)])
def test_every_kind_of_chunk_reads_back_the_segment(tmp_path: Path, compression: bool, encrypted: bool) -> None:
    logs, rsm = _bucket(tmp_path, compression=compression, encrypted=encrypted)
    for log, seg in zip(logs, golden_segments(), strict=True):
        s = AivenSegment.open(str(log), rsm=rsm)
        for lo, hi in (_span(len(seg.log), a, b) for a, b in RANGES):
            assert s.read(lo, hi) == seg.log[lo:hi], (lo, hi)
            assert b"".join(bytes(p) for p in s.iter_range(lo, hi)) == seg.log[lo:hi]


def test_plain_chunks_are_read_straight_into_the_result(tmp_path: Path, monkeypatch) -> None:
    """A read of untransformed chunks asks the store to copy each group into its slice of the result buffer: no
    ``read_range`` (which returns a bytes object to be copied again) for the ``.log``."""
    logs, rsm = _bucket(tmp_path, compression=False, encrypted=False)
    seg = golden_segments()[0]
    s = AivenSegment.open(str(logs[0]), rsm=rsm)
    into: list[tuple[int, memoryview]] = []
    real_into, real_range = storage.read_range_into, storage.read_range

    def counting_into(url, start, dest, options=None):
        into.append((start, dest))
        return real_into(url, start, dest, options)

    def no_bytes(url, *a, **k):
        assert not url.endswith(".log"), "a .log chunk was read into a bytes object"
        return real_range(url, *a, **k)

    monkeypatch.setattr(storage, "read_range_into", counting_into)
    monkeypatch.setattr(storage, "read_range", no_bytes)
    monkeypatch.setattr(aiven, "DECODE_BYTES", CHUNK)  # a group per chunk, restored in parallel
    out = s.read(300, 1500)
    assert out == seg.log[300:1500]
    assert [start for start, _ in into] == [300, 400, 600, 800, 1000, 1200, 1400]  # one slice per chunk group, in place
    for _, dest in into:
        assert dest.obj is out  # a view of the very buffer read() returned
    into.clear()
    assert s.read() == seg.log and sum(len(d) for _, d in into) == len(seg.log)


def test_large_plain_local_reads_are_views_of_the_file_itself(tmp_path: Path, monkeypatch) -> None:
    """From MAP_FROM bytes on, untransformed chunks of a local object come back as a read-only view of a map of the
    file (no copy, as a local ``.log`` is read); transformed ones are restored into a buffer as before."""
    monkeypatch.setattr(aiven, "MAP_FROM", 100)
    logs, rsm = _bucket(tmp_path, compression=False, encrypted=False)
    seg = golden_segments()[0]
    s = AivenSegment.open(str(logs[0]), rsm=rsm)
    copies: list[str] = []
    real_into = storage.read_range_into
    monkeypatch.setattr(storage, "read_range_into", lambda url, *a: copies.append(url) or real_into(url, *a))
    for lo, hi in (_span(len(seg.log), a, b) for a, b in RANGES):
        got = s.read(lo, hi)
        if hi - lo >= 100:
            assert isinstance(got, memoryview) and got.readonly, (lo, hi)
        assert got == seg.log[lo:hi] and bytes(got) == seg.log[lo:hi], (lo, hi)
    assert copies == [str(logs[0])] * 3  # the ranges below MAP_FROM (1, 2 and 5 bytes) were copied
    enc_logs, enc_rsm = _bucket(tmp_path / "enc", compression=True, encrypted=True)
    got = AivenSegment.open(str(enc_logs[0]), rsm=enc_rsm).read()
    assert isinstance(got, bytearray) and got == seg.log
    # the same errors as the copying read: a cut object, a missing one
    logs[0].write_bytes(seg.log[:1100])
    with pytest.raises(CorruptTieredObjectError, match="object ends at byte 1100, its manifest says"):
        s.read()
    logs[0].unlink()
    with pytest.raises(storage.ObjectNotFoundError, match="no such object"):
        s.read()


def test_open_ahead_fetches_no_plain_local_chunks_ahead(tmp_path: Path, monkeypatch) -> None:
    """Untransformed local chunks are copied from the page cache straight into place by the read: fetching them
    ahead would only add a read and a copy. (Transformed ones still are: tests/archive/test_tiered_open_ahead.py.)"""
    logs, rsm = _bucket(tmp_path, compression=False, encrypted=False)
    reads: list[str] = []
    real_read = aiven._read
    monkeypatch.setattr(aiven, "_read", lambda url, a, b, o: reads.append(url) or real_read(url, a, b, o))
    opened = open_ahead([str(p) for p in logs], lambda u: AivenSegment.open(u, rsm=rsm))
    got = [bytes(seg.read()) for _, seg, _ in opened]
    assert got == [s.log for s in golden_segments()]
    assert not [u for u in reads if u.endswith(".log")]


def test_a_cut_or_missing_plain_object_raises_as_before(tmp_path: Path) -> None:
    logs, rsm = _bucket(tmp_path, compression=False, encrypted=False)
    seg = golden_segments()[1]
    s = AivenSegment.open(str(logs[1]), rsm=rsm)
    logs[1].write_bytes(seg.log[:1100])  # cut after the segment was opened
    assert s.read(0, 1000) == seg.log[:1000]
    with pytest.raises(CorruptTieredObjectError, match="object ends at byte 1100, its manifest says") as info:
        s.read()
    assert info.value.obj == str(logs[1])
    logs[1].unlink()
    with pytest.raises(storage.ObjectNotFoundError, match="no such object"):
        s.read()


def test_the_page_cache_map_and_the_preadv_fallback_read_alike(tmp_path: Path, monkeypatch) -> None:
    import contextlib

    path = tmp_path / "obj"
    data = bytes(range(256)) * 40
    path.write_bytes(data)

    def read(start: int, n: int) -> tuple[int, bytes]:
        buf = bytearray(b"\xee" * n)
        got = storage.read_range_into(str(path), start, memoryview(buf))
        return got, bytes(buf[:got])

    cases = [(0, len(data)), (4095, 3), (len(data) - 5, 10), (len(data) + 3, 4)]
    mapped = [read(a, n) for a, n in cases]
    assert mapped == [(min(n, max(0, len(data) - a)), data[a : a + n]) for a, n in cases]

    @contextlib.contextmanager
    def unmappable(*_):
        yield None

    monkeypatch.setattr(storage, "mapped_range", unmappable)
    assert [read(a, n) for a, n in cases] == mapped
    with pytest.raises(FileNotFoundError):
        storage.read_range_into(str(tmp_path / "missing"), 0, memoryview(bytearray(4)))


def test_a_local_open_stays_in_the_callers_thread(tmp_path: Path, monkeypatch) -> None:
    """A local object's manifest read and stat are done inline: handing them to the read pool costs more than they
    do (the pool is for a remote object's GET and HEAD in flight together). Missing objects raise as before."""
    logs, rsm = _bucket(tmp_path, compression=True, encrypted=False)

    def no_pool(*_a, **_k):
        raise AssertionError("a local open went through the read pool")

    real = aiven.iter_parallel
    monkeypatch.setattr(aiven, "iter_parallel", no_pool)
    seg = AivenSegment.open(str(logs[0]), rsm=rsm)
    monkeypatch.setattr(aiven, "iter_parallel", real)  # the read's chunk groups do go through the pool
    assert seg.read() == golden_segments()[0].log
    monkeypatch.setattr(aiven, "iter_parallel", no_pool)
    logs[1].unlink()
    with pytest.raises(storage.ObjectNotFoundError, match="no such object"):
        AivenSegment.open(str(logs[1]), rsm=rsm)
    logs[2].with_suffix(".rsm-manifest").unlink()
    with pytest.raises(storage.ObjectNotFoundError, match="rsm-manifest: no such object"):
        AivenSegment.open(str(logs[2]), rsm=rsm)


# ------------------------------------------------------------------------------------------- data-key cache


def _count_unwraps(monkeypatch) -> list[bytes]:
    from Crypto.Cipher import PKCS1_OAEP

    calls: list[bytes] = []
    real_new = PKCS1_OAEP.new

    def new(*a, **k):
        cipher = real_new(*a, **k)
        real_decrypt = cipher.decrypt
        cipher.decrypt = lambda ct: calls.append(bytes(ct)) or real_decrypt(ct)
        return cipher

    monkeypatch.setattr(PKCS1_OAEP, "new", new)
    return calls


def test_a_data_key_is_unwrapped_once_per_wrapped_key(tmp_path: Path, monkeypatch) -> None:
    logs, rsm = _bucket(tmp_path, compression=True, encrypted=True)
    calls = _count_unwraps(monkeypatch)
    segs = golden_segments()
    for _ in range(2):  # each segment has a data key of its own: one unwrap each, the second pass none
        for log, seg in zip(logs, segs, strict=True):
            assert AivenSegment.open(str(log), rsm=rsm).read() == seg.log
    assert len(calls) == len(logs) == len(set(calls))
    # two segments' keys are never confused: each reads back its own records after the other was cached
    assert AivenSegment.open(str(logs[3]), rsm=rsm).read() == segs[3].log
    assert AivenSegment.open(str(logs[0]), rsm=rsm).read() == segs[0].log
    assert len(calls) == len(logs)
    # the cache stays in its process: a pickled configuration (a Spark executor's) unwraps again
    clone = pickle.loads(pickle.dumps(rsm))
    assert not clone._data_keys
    assert AivenSegment.open(str(logs[0]), rsm=clone).read() == segs[0].log
    assert len(calls) == len(logs) + 1


def test_the_cache_never_serves_a_key_to_another_private_key(tmp_path: Path, monkeypatch) -> None:
    """Same key pair id, same wrapped key, another private key (a configuration pointing at a wrong key file):
    the cached key is not used, the unwrap fails as it always did."""
    logs, rsm = _bucket(tmp_path, compression=False, encrypted=True)
    assert AivenSegment.open(str(logs[0]), rsm=rsm).read() == golden_segments()[0].log
    other = tmp_path / "other"
    other.mkdir()
    priv, pub = new_key_pair(other / "keys")
    write_rsm_properties(other / "rsm.properties", chunk_size=CHUNK, compression=False, key_id="k1", private=priv,
                         public=pub)  # fmt: skip
    wrong = load_rsm_config(other / "rsm.properties")
    wrong._data_keys.update(rsm._data_keys)  # even with the right key's entry at hand
    with pytest.raises(TieredKeyError, match="does not unwrap"):
        AivenSegment.open(str(logs[0]), rsm=wrong)
    rsm.private_keys["k1"] = wrong.private_keys["k1"]  # the same object, its key file replaced
    rsm._loaded.clear()
    with pytest.raises(TieredKeyError, match="does not unwrap"):
        AivenSegment.open(str(logs[0]), rsm=rsm)


def test_the_cache_is_bounded(tmp_path: Path, monkeypatch) -> None:
    from kafkalog.archive.tiered import rsm_config

    monkeypatch.setattr(rsm_config, "DATA_KEY_CACHE", 2)
    logs, rsm = _bucket(tmp_path, compression=False, encrypted=True)
    calls = _count_unwraps(monkeypatch)
    for log in logs:
        AivenSegment.open(str(log), rsm=rsm)
    assert len(rsm._data_keys) == 2 and len(calls) == len(logs)
    AivenSegment.open(str(logs[-1]), rsm=rsm)  # the newest stay
    assert len(calls) == len(logs)
    AivenSegment.open(str(logs[0]), rsm=rsm)  # the oldest went
    assert len(calls) == len(logs) + 1


# ------------------------------------------------------------------------------------------- result buffer


def _vm_flags(addr: int) -> list[str]:
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and line.startswith("VmFlags:"):
            return line.split()[1:]
    raise AssertionError(f"no mapping holds {addr:#x}")


def test_a_large_result_buffer_asks_for_huge_pages() -> None:
    """Faulting a fresh 32 MiB result in 4 KiB pages is the largest cost of a read from a local-dir bucket: the
    buffer's mapping is advised for transparent huge pages (``hg`` in its VmFlags) before anything touches it."""
    import ctypes

    if aiven._MADVISE is None:
        pytest.fail("madvise is reachable through ctypes on Linux")
    buf = aiven._unfilled(32 << 20)
    addr = ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))
    assert "hg" in _vm_flags(addr + (16 << 20))
    small = aiven._unfilled(aiven._HUGE_FROM - 1)
    assert len(small) == aiven._HUGE_FROM - 1
