"""Index appends on a full filesystem raise ``OSError`` (ENOSPC) instead of killing the process with SIGBUS.

An active segment's ``.index`` / ``.timeindex`` is created with ``ftruncate`` to its max size, so it is sparse; a
store into an mmap page that has no block yet, on a full filesystem, makes the kernel deliver SIGBUS. The real
disk-full tests mount a tiny tmpfs (root only, as CI runs) and drive the writes from a child interpreter, so a
SIGBUS shows up as a negative return code instead of killing pytest.
"""

from __future__ import annotations

import errno
import json
import mmap
import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafkalog.index import OffsetIndex, TimeIndex

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = mmap.PAGESIZE


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 1 MiB tmpfs mounted on a fresh dir: writing past its blocks is a real ENOSPC (and, through a sparse
    mmap'd page, a real SIGBUS)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs for a real disk-full (see ../shared/testing-faults.md)")
    if shutil.which("mount") is None or shutil.which("umount") is None:
        pytest.skip("mount/umount not available to make a real disk-full")
    d = tmp_path / "tiny"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {r.stderr.strip() or r.returncode}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], capture_output=True)


_CHILD_PRELUDE = """
import errno, json, mmap, os, sys
PAGE = mmap.PAGESIZE
d = sys.argv[1]

def fill(d):
    # Take every free block: whole pages, then single bytes, until ENOSPC. Less than a page stays free.
    fd = os.open(os.path.join(d, "filler"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk in (b"x" * PAGE, b"x"):
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    st = os.statvfs(d)
    assert st.f_bavail * st.f_frsize < PAGE, st

def report(**kw):
    print(json.dumps(kw), flush=True)

def append_until_error(append, n, stop):
    # append(n), append(n + 1), ... while n < stop: (errno of the OSError that stopped it or None, n reached)
    try:
        while n < stop:
            append(n)
            n += 1
    except OSError as e:
        return e.errno, n
    return None, n
"""


def _run_child(body: str, d: Path) -> dict:
    src = _CHILD_PRELUDE + textwrap.dedent(body)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", src, str(d)], capture_output=True, text=True, env=env, timeout=300)
    if r.returncode < 0:
        sig = signal.Signals(-r.returncode).name
        pytest.fail(f"the child died by {sig} (returncode {r.returncode}) instead of getting an OSError\n{r.stderr}")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no report from the child\nstdout: {r.stdout}\nstderr: {r.stderr}"
    return json.loads(lines[-1])


def _needed_a_new_page(count: int, entry_size: int) -> bool:
    """The entry after ``count`` whole entries does not fit in the pages those entries occupy."""
    pages = -(-count * entry_size // PAGE)
    return (count + 1) * entry_size > pages * PAGE


def test_offset_index_on_a_full_filesystem_raises_enospc(tiny_fs: Path) -> None:
    out = _run_child(
        """
        from kafkalog.index import OffsetIndex
        idx = OffsetIndex(os.path.join(d, "00000000000000000000.index"), 0)  # 10 MiB, sparse
        for i in range(100):
            idx.append(i, i * 10)
        fill(d)
        n = 100
        err, n = append_until_error(lambda n: idx.append(n, n * 10), n, idx.max_entries)
        state = dict(count=idx.entry_count, last=idx.last_offset, lookup=list(idx.lookup(n + 5)))
        idx.close()  # trims to the used size: shrinking needs no blocks
        report(errno=err, attempted=n, **state)
        """,
        tiny_fs,
    )
    assert out["errno"] == errno.ENOSPC, out
    n = out["attempted"]
    assert out["count"] == n > 100  # the failed append left the index as it was
    assert out["last"] == n - 1 and out["lookup"] == [n - 1, (n - 1) * 10]
    assert _needed_a_new_page(n, 8), n
    data = (tiny_fs / "00000000000000000000.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", i, i * 10) for i in range(n))
    back = OffsetIndex(tiny_fs / "00000000000000000000.index", 0, writable=False)
    assert back.entry_count == n and back.last_offset == n - 1
    back.close()


def test_a_page_left_after_the_chunk_is_still_used(tiny_fs: Path) -> None:
    """The 64 KiB reservation fails on a nearly full disk; the pages the next entry needs are still taken, so the
    index fails only when not even its next page is left."""
    out = _run_child(
        """
        from kafkalog.index import OffsetIndex
        from kafkalog.index.base import _RESERVE_MIN
        idx = OffsetIndex(os.path.join(d, "00000000000000000000.index"), 0)
        n = 0
        while (n + 10) * 8 < _RESERVE_MIN:  # inside the first reserved chunk
            idx.append(n, n)
            n += 1
        fill(d)
        filler = os.path.join(d, "filler")
        os.truncate(filler, (os.path.getsize(filler) // PAGE - 1) * PAGE)
        free = os.statvfs(d).f_bavail * os.statvfs(d).f_frsize
        assert PAGE <= free < 2 * PAGE, free
        err, n = append_until_error(lambda n: idx.append(n, n), n, idx.max_entries)
        report(errno=err, attempted=n, count=idx.entry_count, chunk=_RESERVE_MIN)
        idx.close()
        """,
        tiny_fs,
    )
    assert out["errno"] == errno.ENOSPC, out
    assert out["count"] == out["attempted"] == (out["chunk"] + PAGE) // 8, out


def test_no_mmap_fallback_on_a_full_filesystem_raises_at_the_failing_entry(tiny_fs: Path) -> None:
    """The non-mmap fallback (plain file writes) also reserves first, and reports an error at the entry that
    failed, with the index unchanged."""
    out = _run_child(
        """
        from kafkalog.index import OffsetIndex
        idx = OffsetIndex(os.path.join(d, "00000000000000000000.index"), 0, use_mmap=False)
        for i in range(100):
            idx.append(i, i)
        assert not idx.is_mmapped
        fill(d)
        n = 100
        err, n = append_until_error(lambda n: idx.append(n, n), n, idx.max_entries)
        report(errno=err, attempted=n, count=idx.entry_count, last=idx.last_offset)
        idx.close()
        """,
        tiny_fs,
    )
    assert out["errno"] == errno.ENOSPC, out
    n = out["attempted"]
    assert out["count"] == n > 100 and out["last"] == n - 1
    assert _needed_a_new_page(n, 8), n
    data = (tiny_fs / "00000000000000000000.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", i, i) for i in range(n))


def test_no_mmap_fallback_without_fallocate_fails_cleanly(tiny_fs: Path) -> None:
    """No fallocate and no mmap: the write itself gets ENOSPC, at the entry that failed, and the handle still
    trims and closes (a buffered write would keep the failed bytes and fail every later flush)."""
    out = _run_child(
        """
        def unsupported(fd, offset, length):
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        os.posix_fallocate = unsupported
        from kafkalog.index import OffsetIndex
        idx = OffsetIndex(os.path.join(d, "00000000000000000000.index"), 0, use_mmap=False)
        for i in range(100):
            idx.append(i, i)
        fill(d)
        n = 100
        err, n = append_until_error(lambda n: idx.append(n, n), n, idx.max_entries)
        report(errno=err, attempted=n, count=idx.entry_count)
        idx.close()
        """,
        tiny_fs,
    )
    assert out["errno"] == errno.ENOSPC, out
    n = out["attempted"]
    assert out["count"] == n == PAGE // 8  # the first page was taken by the first entries; the second is not free
    data = (tiny_fs / "00000000000000000000.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", i, i) for i in range(n))


def test_time_index_on_a_full_filesystem_raises_enospc(tiny_fs: Path) -> None:
    out = _run_child(
        """
        from kafkalog.index import TimeIndex
        idx = TimeIndex(os.path.join(d, "00000000000000000000.timeindex"), 0)
        for i in range(100):
            idx.maybe_append(1000 + i, i)
        fill(d)
        n = 100
        err, n = append_until_error(lambda n: idx.maybe_append(1000 + n, n), n, idx.max_entries - 1)
        state = dict(count=idx.entry_count, last=list(idx.last_entry))
        idx.close()
        report(errno=err, attempted=n, **state)
        """,
        tiny_fs,
    )
    assert out["errno"] == errno.ENOSPC, out
    n = out["attempted"]
    assert out["count"] == n > 100
    assert out["last"] == [1000 + n - 1, n - 1]
    assert _needed_a_new_page(n, 12), n  # 12-byte entries straddle pages: the straddling one needs the next page
    data = (tiny_fs / "00000000000000000000.timeindex").read_bytes()
    assert data == b"".join(struct.pack(">qi", 1000 + i, i) for i in range(n))


def test_segment_appends_on_a_full_filesystem_raise_enospc(tiny_fs: Path) -> None:
    """End to end: a LogSegment with an index entry per batch. The filesystem is filled just after the .log got a
    fresh page (room for dozens of batches) and a few entries before the offset index needs a new page, so the
    index, not the log, is the first to want a block."""
    out = _run_child(
        """
        from kafkalog.log.config import LogConfig
        from kafkalog.records import build_batch
        from kafkalog.segment.log_segment import LogSegment
        seg = LogSegment.open(d, 0, config=LogConfig.from_properties({"index.interval.bytes": 0}))
        per_page = PAGE // 8
        filled_at = None
        off = 0
        err = None
        try:
            while off < 100_000:
                before = os.stat(seg.log_path).st_blocks
                seg.append(build_batch([(b"k", b"v" * 20)], base_offset=off, timestamp=1_700_000_000_000 + off))
                off += 1
                if filled_at is None:
                    n = seg.offset_index.entry_count
                    room = per_page - n % per_page
                    if n > per_page and os.stat(seg.log_path).st_blocks > before and room < 12:
                        fill(d)
                        filled_at = off
        except OSError as e:
            err = e.errno
        report(errno=err, filled_at=filled_at, appended=off, entries=seg.offset_index.entry_count)
        seg.close_handlers()
        """,
        tiny_fs,
    )
    assert out["filled_at"] is not None, out
    assert out["errno"] == errno.ENOSPC, out


def test_fallocate_unsupported_appends_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def unsupported(fd: int, offset: int, length: int) -> None:
        calls.append((offset, length))
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(os, "posix_fallocate", unsupported, raising=False)
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=64 * 1024)
    for i in range(3000):  # several pages
        idx.append(i, i * 7)
    assert idx.entry_count == 3000 and idx.last_offset == 2999
    assert len(calls) == 1  # remembered: not retried per entry or per chunk
    idx.resize(128 * 1024)  # a remap does not forget it either
    for i in range(3000, 9000):
        idx.append(i, i * 7)
    assert len(calls) == 1
    idx.close()
    data = (tmp_path / "00000000000000000000.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", i, i * 7) for i in range(9000))


def test_fallocate_unsupported_time_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unsupported(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(os, "posix_fallocate", unsupported, raising=False)
    idx = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=64 * 1024)
    for i in range(2000):
        idx.maybe_append(10 + i, i)
    idx.close()
    data = (tmp_path / "00000000000000000000.timeindex").read_bytes()
    assert data == b"".join(struct.pack(">qi", 10 + i, i) for i in range(2000))


def test_pyfakefs_fallback_never_fallocates_a_fake_descriptor(fs, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under pyfakefs the index uses its non-mmap fallback; a fake descriptor may equal a real, unrelated one,
    so the guard must not hand it to the real posix_fallocate."""
    real = getattr(os, "posix_fallocate", None)
    calls = []

    def spy(fd: int, offset: int, length: int) -> None:
        calls.append(fd)
        if real is not None:
            real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", spy, raising=False)
    fs.create_dir("/logs")
    idx = OffsetIndex("/logs/00000000000000000000.index", 0, max_index_size=32 * 1024)
    for i in range(1500):
        idx.append(i, i)
    assert not idx.is_mmapped and idx.entry_count == 1500
    idx.close()
    with open("/logs/00000000000000000000.index", "rb") as f:
        assert f.read() == b"".join(struct.pack(">ii", i, i) for i in range(1500))
    assert calls == []


@pytest.mark.parametrize("use_mmap", [True, False])
def test_reservations_follow_the_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_mmap: bool) -> None:
    """One posix_fallocate per chunk, page aligned, never past the file's end (it would grow the file), and again
    from the write position after a trim + grow (the grown tail is a hole) and after a truncation."""
    from kafkalog.index.base import _RESERVE_MIN

    real = os.posix_fallocate
    calls: list[tuple[int, int, int]] = []

    def spy(fd: int, offset: int, length: int) -> None:
        calls.append((offset, length, os.fstat(fd).st_size))
        real(fd, offset, length)

    monkeypatch.setattr(os, "posix_fallocate", spy)
    path = tmp_path / "00000000000000000000.index"
    size = 512 * 1024
    idx = OffsetIndex(path, 0, max_index_size=size, use_mmap=use_mmap)
    idx.append(0, 0)
    assert calls == [(0, _RESERVE_MIN, size)]
    n = 1
    while n * 8 < 3 * _RESERVE_MIN + 100:
        idx.append(n, n)
        n += 1
    assert [c[:2] for c in calls] == [(0, _RESERVE_MIN), (_RESERVE_MIN, 2 * _RESERVE_MIN),
                                      (3 * _RESERVE_MIN, 4 * _RESERVE_MIN)]  # doubling chunks
    while n < idx.max_entries:
        idx.append(n, n)
        n += 1
    assert all(off % PAGE == 0 and off + length <= st_size == size for off, length, st_size in calls)
    assert calls[-1][0] + calls[-1][1] == size  # the last chunk stops at the end of the file
    assert len(calls) <= 4

    calls.clear()
    idx.truncate_to(1000)  # entries 0..999 stay; the next write reserves from its own page again
    idx.append(1000, 1000)
    assert [c[0] for c in calls] == [8000 - 8000 % PAGE] and calls[0][0] + calls[0][1] <= size

    calls.clear()
    idx.trim_to_valid_size()
    idx.resize(size)
    idx.append(1001, 1001)
    assert calls == [(8008 - 8008 % PAGE, _RESERVE_MIN, size)]
    idx.close()
    assert path.read_bytes() == b"".join(struct.pack(">ii", i, i) for i in range(1002))



@pytest.mark.parametrize("use_mmap", [True, False])
def test_guard_keeps_index_files_byte_for_byte(tmp_path: Path, use_mmap: bool) -> None:
    """Reserving blocks changes neither the file length nor its bytes, across grow/trim cycles."""
    path = tmp_path / "00000000000000000100.index"
    idx = OffsetIndex(path, 100, max_index_size=40_000, use_mmap=use_mmap)  # not a multiple of the page size
    expect = []
    for i in range(2000):
        idx.append(100 + 2 * i, 33 * i)
        expect.append(struct.pack(">ii", 2 * i, 33 * i))
    assert idx.is_mmapped == use_mmap
    assert os.path.getsize(path) == 40_000  # fallocate never grows the preallocated file
    idx.trim_to_valid_size()
    assert path.read_bytes() == b"".join(expect)
    idx.resize(40_000)  # active again: the grown tail is sparse again and gets reserved again
    assert os.path.getsize(path) == 40_000
    for i in range(2000, 5000):
        idx.append(100 + 2 * i, 33 * i)
        expect.append(struct.pack(">ii", 2 * i, 33 * i))
    assert idx.is_full() and os.path.getsize(path) == 40_000
    idx.close()
    assert path.read_bytes() == b"".join(expect)

    tpath = tmp_path / "00000000000000000100.timeindex"
    tidx = TimeIndex(tpath, 100, max_index_size=40_000, use_mmap=use_mmap)
    texpect = []
    for i in range(3000):
        tidx.maybe_append(5 + i, 100 + i)
        texpect.append(struct.pack(">qi", 5 + i, i))
    assert os.path.getsize(tpath) == 39_996
    tidx.close()
    assert tpath.read_bytes() == b"".join(texpect)
