"""``kafkalog dump URL`` and the dump of an Aiven segment read the ``.log`` as it is fetched (ranged GETs, or chunk
groups restored in the pool) and the index objects into memory: the output is byte for byte the dump of the local
files (paths aside), and no segment object is copied to disk.

Kafka's golden partitions and its damaged ones (``unclean/input``, ``loader/input``, legacy formats) are served by
moto; windows of 64 bytes and GETs of 700 make batches straddle both.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafkalog.verify import stream
from tests.bucket_cases import (
    SEGMENT_OBJECTS,
    cli,
    no_copies,
    partition_cases,
    peak_of_a_streamed_read,
    rebased,
    serve_cases,
    tiny_windows,
)
from tests.conftest import needs_golden

pytest.importorskip("pyarrow")
pytest.importorskip("moto")

pytestmark = [needs_golden]

BUCKET = "dumps"
GOLDEN_CASES = ("golden-segments-0", "golden-txn-0", "golden-zstd-0", "golden-index-dense-0", "golden-gzip-0")
MADE_CASES = ("made-cut-mid-batch-0", "made-huge-length-0", "made-bad-magic-0")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """Golden partitions, Kafka's damaged ones and damage made here (to the second ``.log``) in the bucket."""
    cases = partition_cases(tmp_path_factory.mktemp("cases"), GOLDEN_CASES, MADE_CASES, lambda logs: logs[1])
    yield from serve_cases(cases, BUCKET)


@pytest.fixture()
def streamed(monkeypatch, tmp_path):
    """Windows of 64 bytes and GETs of 700; records every remote object copied to a local file, and points TMPDIR
    at an empty dir."""
    tiny_windows(monkeypatch)
    yield from no_copies(monkeypatch, tmp_path)


def _opts(s3) -> list[str]:
    return [f"--storage-option={k}={v}" for k, v in s3.options.items()]


FLAGS = [
    [],
    ["--json", "--deep-iteration", "--print-data-log"],
    ["--index-sanity-check"],
    ["--max-bytes", "1000"],
]
#: the cases dumped with flags other than the default (all of them with the default)
FEW = ("golden-txn-0", "golden-index-dense-0", "unclean-corrupt-crc-0", "unclean-truncated-tail-0",
       "legacy-mixed-0", "made-huge-length-0", "made-cut-mid-batch-0")  # fmt: skip


#: Kafka's end-of-run reports come one per file in the order of a hash map keyed by the file's absolute path, so
#: their order differs between two names of the same files
_REPORTS = ("index_mismatch", "timeindex_mismatch", "timeindex_out_of_order", "timeindex_offset_not_found",
            "non_consecutive_offsets")  # fmt: skip


def _same_dump(remote, here, local: str, url: str) -> None:
    """Byte for byte the same lines (the local path read as the URL), the reports' blocks in any order."""
    for got, want in ((remote.stdout, here.stdout), (remote.stderr, here.stderr)):
        want = want.replace(local, url)
        if got != want:
            assert _blocks(got) == _blocks(want)
            assert _without_reports(got) == _without_reports(want)


def _blocks(text: str) -> list[str]:
    """The output cut into blocks, each at a line that does not start with a space (a report and its pairs)."""
    blocks: list[str] = []
    for line in text.splitlines():
        if blocks and line.startswith(" "):
            blocks[-1] += "\n" + line
        else:
            blocks.append(line)
    return sorted(blocks)


def _without_reports(text: str) -> list[str]:
    lines = text.splitlines()
    if lines and lines[0].startswith("{"):
        return [x for x in lines if json.loads(x).get("type") not in _REPORTS]
    return [x for x in lines if not x.startswith(("Mismatches in", "Found timestamp", "Found out of order",
                                                  "The following indexed", "Non-consecutive", " ", "Indexed offset"))]


@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: " ".join(f) or "default")
def test_dump_of_a_bucket_dir_equals_the_local_dump_and_copies_no_segment(s3, streamed, flags) -> None:
    tmp, copied = streamed
    codes = set()
    for name, local in s3.cases.items():
        if flags and name not in FEW:
            continue
        url = f"s3://{BUCKET}/cases/{name}"
        remote = cli(["dump", *flags, url, *_opts(s3)])
        here = cli(["dump", *flags, local])
        assert remote.exit_code == here.exit_code, (name, remote.output)
        _same_dump(remote, here, str(local), url)
        codes.add(here.exit_code)
    assert codes >= {0, 1}  # sound and damaged partitions both dumped
    assert not [u for u in copied if u.endswith(SEGMENT_OBJECTS)], copied  # small files only
    assert not list(tmp.iterdir())


@pytest.mark.parametrize("suffix", [".log", ".index", ".timeindex", ".txnindex"])
def test_dump_of_single_objects_equals_the_local_dump(s3, streamed, suffix) -> None:
    """One object named: an index is checked against its ``.log`` (streamed too), as a local file is."""
    tmp, copied = streamed
    seen = 0
    for name in ("golden-txn-0", "golden-index-dense-0", "unclean-corrupt-crc-0", "made-cut-mid-batch-0",
                 "unclean-missing-index-0"):  # fmt: skip
        local_dir = s3.cases[name]
        for f in sorted(local_dir.glob(f"*{suffix}")):
            url = f"s3://{BUCKET}/cases/{name}/{f.name}"
            for flags in ([], ["--json", "--deep-iteration"]):
                remote = cli(["dump", *flags, url, *_opts(s3)])
                here = cli(["dump", *flags, f])
                assert remote.exit_code == here.exit_code, (url, remote.output)
                assert remote.output == here.output.replace(str(f), url), url
                seen += 1
    assert seen >= 4
    assert not copied and not list(tmp.iterdir())


def test_a_missing_object_and_an_unknown_one(s3, streamed) -> None:
    tmp, copied = streamed
    res = cli(["dump", f"s3://{BUCKET}/cases/golden-txn-0/00000000000000000099.log", *_opts(s3)])
    assert res.exit_code == 2 and "00000000000000000099.log" in res.output and "Traceback" not in res.output
    client = s3.client()
    client.put_object(Bucket=BUCKET, Key="cases/notes/readme.txt", Body=b"x" * 5000)
    res = cli(["dump", f"s3://{BUCKET}/cases/notes/readme.txt", *_opts(s3)])
    assert res.exit_code == 2 and f"Ignoring unknown file s3://{BUCKET}/cases/notes/readme.txt" in res.output
    assert not copied and not list(tmp.iterdir())


def test_aiven_segments_dump_as_their_restored_files_without_writing_a_log(tmp_path, monkeypatch) -> None:
    """Every golden Aiven variant: the dump (records, indexes checked) equals the dump of the files a restore
    writes, and the segment's ``.log`` is never written to disk (only the indexes out of ``.indexes``)."""
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.archive.tiered import AivenSegment, load_rsm_config, materialize
    from tests.aiven_writer import AIVEN

    monkeypatch.setattr(stream, "WINDOW_BYTES", 64)
    restored: dict[str, Path] = {}
    for variant in sorted(p.name for p in (AIVEN / "variants").iterdir()):
        src = AIVEN / "variants" / variant
        rsm = load_rsm_config(src / "rsm.properties")
        for item in discover_segments(str(src / "remote")):
            materialize(item, str(tmp_path / variant), rsm=rsm)
        restored[variant] = tmp_path / variant

    def no_log_written(self, dest, *args, **kwargs):
        raise AssertionError(f"{dest}: a segment's .log written to disk")

    monkeypatch.setattr(AivenSegment, "fetch", no_log_written)
    for variant, want_dir in restored.items():
        src = AIVEN / "variants" / variant
        got = cli(["dump", "--deep-iteration", "--print-data-log", "--json", src / "remote",
                    "--rsm-config", src / "rsm.properties"])  # fmt: skip
        want = cli(["dump", "--deep-iteration", "--print-data-log", "--json", want_dir])
        assert got.exit_code == want.exit_code == 0, got.output
        rows = [json.loads(x) for x in got.stdout.splitlines()]
        wants = [json.loads(x) for x in want.stdout.splitlines()]
        for r in rows + wants:  # the names under each scratch or restore dir
            if "file" in r:
                r["file"] = r["file"].split(os.sep)[-3:]
        assert rows == wants and sum(r["type"] == "record" for r in rows) == 105, variant
        assert {r["kind"] for r in rows if r["type"] == "file"} >= {"log", "index", "timeindex"}


_MEMORY_CHILD = r"""
import os, sys, json, io, contextlib
from click.testing import CliRunner
from kafkalog_cli.main import main
opts = json.loads(sys.argv[1])
args = ["dump", "--deep-iteration", sys.argv[2]] + [f"--storage-option={k}={v}" for k, v in opts.items()]
def run():
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    return res.exit_code, res.stdout.count("| offset:")
run()  # warm: imports, the file system, the pool
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
import gc; gc.collect()
before = rss("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # peak RSS := current RSS
code, records = run()
print(json.dumps({"grew": rss("VmHWM:") - before, "code": code, "records": records}))
"""


def test_peak_memory_of_a_streamed_dump_stays_within_the_reads_in_flight(s3, tmp_path) -> None:
    """A 64 MiB segment dumped from moto with 2 ranged reads of 8 MiB in flight: the process grows by about the
    reads in flight and a window, not by the segment. The output itself (held by the test runner) is kept small:
    few records per batch."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak RSS")
    from kafkalog.records import build_batch

    batch = build_batch([(b"k", os.urandom(60000))], base_offset=0)
    n = (64 << 20) // len(batch)
    log = b"".join(rebased(batch, i) for i in range(n))
    got = peak_of_a_streamed_read(s3, tmp_path, log, _MEMORY_CHILD)
    assert got["code"] == 0 and got["records"] == n
    bound = 2 * (8 << 20) + stream.WINDOW_BYTES + (8 << 20)  # reads in flight + a window + the part being copied
    assert got["grew"] < bound + (8 << 20), got  # 8 MiB of slack for the allocator and the captured output
