"""Aiven segments opened ahead of the one being read: the same records and verdicts, a bounded number open."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.archive.tiered import AivenSegment, aiven, load_rsm_config, open_ahead
from kafkalog.errors import CorruptTieredObjectError
from kafkalog.records import read_record_columns
from tests.aiven_writer import AIVEN, golden_segments
from tests.conftest import needs_golden

pytestmark = [needs_golden]

VARIANT = "encrypted-zstd-chunk256"


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / VARIANT
    shutil.copytree(AIVEN / "variants" / VARIANT, dst)
    return dst


def _verify(d: Path) -> tuple[int, list[dict]]:
    res = CliRunner().invoke(main, ["verify", "--json", str(d / "remote"), "--rsm-config", str(d / "rsm.properties")],
                             catch_exceptions=False)  # fmt: skip
    return res.exit_code, [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]


class _SlowOpens:
    """AivenSegment.open wrapped: each open takes ``delay`` s (a bucket's round trips); counts opens in flight
    and, when each segment's check starts, how many opens have started."""

    def __init__(self, monkeypatch, delay: float = 0.05) -> None:
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = self.started = 0
        self.started_at_check: list[int] = []
        real_open = AivenSegment.open.__func__
        real_stream = __import__("kafkalog.verify.stream", fromlist=["x"]).verify_streamed

        def slow_open(cls, *args, **kwargs):
            with self.lock:
                self.started += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                time.sleep(delay)
                return real_open(cls, *args, **kwargs)
            finally:
                with self.lock:
                    self.in_flight -= 1

        def stream(*args, **kwargs):
            with self.lock:
                self.started_at_check.append(self.started)
            return real_stream(*args, **kwargs)

        monkeypatch.setattr(AivenSegment, "open", classmethod(slow_open))
        monkeypatch.setattr("kafkalog.verify.stream.verify_streamed", stream)


def test_verify_opens_segments_ahead_and_bounded(tmp_path: Path, monkeypatch) -> None:
    d = _copy(tmp_path)
    slow = _SlowOpens(monkeypatch)
    code, out = _verify(d)
    segs = [o for o in out if o["type"] == "segment"]
    assert code == 0 and len(segs) == 5 and all(o["status"] == "ok" for o in segs)
    assert slow.started == 5  # each segment opened once
    # while one segment is checked the next ones are being opened, never more than OPEN_AHEAD at once
    assert 2 <= slow.max_in_flight <= aiven.OPEN_AHEAD
    assert max(slow.started_at_check) > 1 and slow.started_at_check[0] >= 2
    assert all(s <= k + 1 + aiven.OPEN_AHEAD for k, s in enumerate(slow.started_at_check))


def test_verify_verdicts_are_those_of_a_serial_run(tmp_path: Path, monkeypatch) -> None:
    d = _copy(tmp_path)
    seg = json.loads((d / "RESULT.json").read_text())["segments"]
    (d / "remote" / (seg[1]["mainPath"] + ".rsm-manifest")).unlink()  # then its chunks are read as a plain log
    log = d / "remote" / (seg[3]["mainPath"] + ".log")
    data = bytearray(log.read_bytes())
    data[seg[3]["manifest"]["chunks"][2]["transformedPosition"] + 40] ^= 1  # a chunk failing its tag
    log.write_bytes(bytes(data))
    code_ahead, ahead = _verify(d)
    monkeypatch.setenv("KAFKALOG_READ_PARALLELISM", "1")  # the pool off: each segment opened as it is checked
    code_serial, serial = _verify(d)
    assert code_ahead == code_serial == 1
    assert ahead == serial
    status = [o["status"] for o in ahead if o["type"] == "segment"]
    assert status == ["ok", "corrupt", "ok", "corrupt", "ok"]


def test_open_ahead_yields_in_order_with_errors_per_item() -> None:
    d = AIVEN / "variants" / VARIANT
    rsm = load_rsm_config(d / "rsm.properties")
    logs = sorted(str(p) for p in (d / "remote").rglob("*.log"))
    urls = [*logs[:2], str(d / "remote" / "nope.log"), *logs[2:]]
    got = list(open_ahead(urls, lambda u: AivenSegment.open(u, rsm=rsm)))
    assert [u for u, _, _ in got] == urls
    assert isinstance(got[2][2], OSError) and got[2][1] is None
    records = [read_record_columns(seg.read()) for _, seg, err in got if err is None]
    assert sum(len(r) for r in records) == 105
    assert [bytes(seg.read()) for _, seg, err in got if err is None] == [s.log for s in golden_segments()]


def test_open_ahead_raises_what_is_not_an_io_or_kafkalog_error() -> None:
    def opener(x: int) -> int:
        if x == 2:
            raise ValueError("a bug")
        if x == 1:
            raise CorruptTieredObjectError("bad manifest", obj="x")
        return x

    it = open_ahead(range(4), opener)
    assert next(it) == (0, 0, None)
    item, seg, err = next(it)
    assert (item, seg) == (1, None) and isinstance(err, CorruptTieredObjectError)
    with pytest.raises(ValueError, match="a bug"):
        next(it)


def test_opened_ahead_segments_have_their_first_chunks_fetched(monkeypatch) -> None:
    d = AIVEN / "variants" / VARIANT
    rsm = load_rsm_config(d / "rsm.properties")
    logs = sorted(str(p) for p in (d / "remote").rglob("*.log"))
    reads: list[tuple[str, int, int]] = []
    real_read = aiven._read

    def counting(url, start, end, options):
        reads.append((url, start, end))
        return real_read(url, start, end, options)

    monkeypatch.setattr(aiven, "_read", counting)
    opened = [seg for _, seg, _ in open_ahead(logs, lambda u: AivenSegment.open(u, rsm=rsm))]
    log_reads = [r for r in reads if r[0].endswith(".log")]
    assert len(log_reads) == 5  # one ranged read of each segment's first chunks (these are small: all of them)
    reads.clear()
    assert [bytes(s.read()) for s in opened] == [s.log for s in golden_segments()]
    assert [r for r in reads if r[0].endswith(".log")] == []  # served from what was fetched ahead
    # a limit below the first chunk fetches nothing ahead; the read then fetches, with the same bytes
    seg = AivenSegment.open(logs[0], rsm=rsm)
    seg.prefetch(limit=10)
    assert not [r for r in reads if r[0].endswith(".log")]
    assert bytes(seg.read()) == golden_segments()[0].log and [r for r in reads if r[0].endswith(".log")]


def test_dump_opens_segments_ahead_with_the_same_output(monkeypatch) -> None:
    d = AIVEN / "variants" / VARIANT

    def dump() -> tuple[int, str]:
        res = CliRunner().invoke(main, ["dump", "--deep-iteration", "--print-data-log", "--json", str(d / "remote"),
                                        "--rsm-config", str(d / "rsm.properties")], catch_exceptions=False)  # fmt: skip
        return res.exit_code, re.sub(r"/[^\"]*/kafkalog-[^/]+/", "SCRATCH/", res.stdout)  # the scratch dir's name

    monkeypatch.setenv("KAFKALOG_READ_PARALLELISM", "1")
    serial = dump()
    monkeypatch.delenv("KAFKALOG_READ_PARALLELISM")
    slow = _SlowOpens(monkeypatch)
    assert dump() == serial and serial[0] == 0 and serial[1].count('"type": "record"') == 105
    assert slow.started == 5 and 2 <= slow.max_in_flight <= aiven.OPEN_AHEAD


def _restore(d: Path, to: Path) -> dict[str, bytes]:
    res = CliRunner().invoke(main, ["tiered", "restore", str(d / "remote"), "--to", str(to), "--rsm-config",
                                    str(d / "rsm.properties")], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    [pdir] = [p for p in to.iterdir() if p.is_dir()]
    return {p.name: p.read_bytes() for p in sorted(pdir.iterdir())}


def test_restore_opens_segments_ahead_and_bounded_with_the_files_of_a_serial_run(tmp_path: Path,
                                                                                 monkeypatch) -> None:  # fmt: skip
    from kafkalog.log import restore as restore_mod

    d = AIVEN / "variants" / VARIANT
    with monkeypatch.context() as m:  # each segment opened as it is written
        m.setattr(restore_mod, "open_ahead", lambda items, opener, **_: ((i, opener(i), None) for i in items))
        serial = _restore(d, tmp_path / "serial")
    slow = _SlowOpens(monkeypatch)
    started_at_write: list[int] = []
    real = restore_mod._materialize_aiven

    def materialize(*args, **kwargs):
        started_at_write.append(slow.started)
        return real(*args, **kwargs)

    monkeypatch.setattr(restore_mod, "_materialize_aiven", materialize)
    ahead = _restore(d, tmp_path / "ahead")
    assert ahead == serial and sum(n.endswith(".log") for n in ahead) == 5
    assert [ahead[n] for n in sorted(ahead) if n.endswith(".log")] == [s.log for s in golden_segments()]
    assert slow.started == 5 and 2 <= slow.max_in_flight <= aiven.OPEN_AHEAD
    # the next segments are being opened while one is written, never more than OPEN_AHEAD past it
    assert started_at_write[0] >= 2 and all(s <= k + 1 + aiven.OPEN_AHEAD for k, s in enumerate(started_at_write))
