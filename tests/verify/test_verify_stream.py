"""Remote verification streams (issue 39): a segment behind a URL, or stored by Aiven's plugin, is checked over its
bytes as they are fetched (framing, CRC32C, index checks against the batch positions found on the way), with no
copy of its objects on disk and memory bounded by what is in flight; every verdict equals the verdict on the local
files. The damaged golden cases (Kafka's ``unclean``/``loader`` inputs, the legacy formats) and damage made here
are uploaded to moto's S3 server; windows and ranged reads are made tiny so that batches straddle them."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from kafkalog.archive import storage
from kafkalog.archive.discovery import discover_segments
from kafkalog.verify import stream, verify_segment
from kafkalog.verify.remote import verify_segment_at
from tests.bucket_cases import (
    MADE,
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

BUCKET = "damaged"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """Kafka's damaged inputs, the legacy formats, and every damage of ``MADE`` (to the middle ``.log``) in the
    bucket."""
    cases = partition_cases(tmp_path_factory.mktemp("cases"), (), MADE, lambda logs: logs[len(logs) // 2])
    yield from serve_cases(cases, BUCKET)


tiny_windows = pytest.fixture(tiny_windows)
no_copies = pytest.fixture(no_copies)


def test_streamed_segment_reports_equal_the_local_ones_and_copy_nothing(s3, tiny_windows, no_copies) -> None:
    tmp, staged = no_copies
    statuses = set()
    for name, local_dir in s3.cases.items():
        url = f"s3://{BUCKET}/cases/{name}"
        remote = {storage.basename(i.path): i for i in discover_segments(url, options=s3.options)}
        local = {os.path.basename(i.path): i for i in discover_segments(str(local_dir))}
        assert remote.keys() == local.keys() and remote, name
        for key, item in remote.items():
            for deep in (False, True):
                got = verify_segment_at(item, options=s3.options, deep=deep).to_dict()
                want = verify_segment_at(local[key], deep=deep).to_dict()
                for field in ("path", "partition_dir"):
                    assert got.pop(field) == want.pop(field).replace(str(local_dir), url)
                for field in ("error", "index_error"):
                    if want[field]:
                        want[field] = want[field].replace(str(local_dir), url)
                assert got == want, (name, key, deep)
                statuses.add((got["status"], got["index_status"]))
    # the cases cover damaged bytes, damaged and missing indexes, and clean segments
    assert {s for s, _ in statuses} >= {"ok", "corrupt"} and {i for _, i in statuses} >= {"ok", "missing"}
    assert not staged and not list(tmp.iterdir())


@pytest.mark.parametrize("case", ["unclean-corrupt-crc-0", "unclean-truncated-tail-0", "unclean-missing-index-0",
                                  "loader-snapshot-corrupt-0", "loader-swap-valid-0", "legacy-mixed-0",
                                  "made-cut-mid-batch-0", "made-huge-length-0", "made-bad-magic-0"])  # fmt: skip
def test_cli_verify_json_of_a_bucket_equals_the_local_verdict(s3, tiny_windows, no_copies, case: str) -> None:
    tmp, staged = no_copies
    local_dir = s3.cases[case]
    url = f"s3://{BUCKET}/cases/{case}"
    opts = [f"--storage-option={k}={v}" for k, v in s3.options.items()]
    remote = cli(["verify", "--json", url, *opts])
    here = cli(["verify", "--json", str(local_dir)])
    assert remote.exit_code == here.exit_code, remote.output
    assert remote.output == here.output.replace(str(local_dir), url)
    assert [json.loads(line)["type"] for line in remote.output.splitlines()].count("segment") >= 1
    # only the partition's small files were copied (metadata, snapshots, checkpoints), never a segment's objects
    assert not [u for u in staged if u.endswith(SEGMENT_OBJECTS)], staged
    assert not list(tmp.iterdir())  # and the copies are gone


def test_aiven_segments_stream_with_the_verdict_of_their_restored_files(tmp_path, tiny_windows, no_copies) -> None:
    """Every golden Aiven variant, and one with a chunk damaged: the streamed report equals the report on the files
    a restore writes (the damaged chunk zero-filled there, as the streamed check reads it)."""
    from kafkalog.archive.tiered import ChunkDamage, load_rsm_config, materialize
    from tests.aiven_writer import AIVEN

    for variant in sorted(p.name for p in (AIVEN / "variants").iterdir()):
        src = AIVEN / "variants" / variant
        rsm = load_rsm_config(src / "rsm.properties")
        remote = tmp_path / variant
        shutil.copytree(src / "remote", remote)
        logs = sorted(remote.rglob("*.log"))
        damaged = logs[1]
        raw = bytearray(damaged.read_bytes())
        raw[len(raw) // 2] ^= 0x10
        damaged.write_bytes(bytes(raw))
        items = discover_segments(str(remote))
        assert len(items) == len(logs) >= 2
        for item in items:
            got = verify_segment(item, rsm=rsm)
            damage: list[ChunkDamage] = []
            restored = materialize(item, str(tmp_path / "restored" / variant), rsm=rsm, damage=damage)
            want = verify_segment(restored)
            facts = ("first_offset", "last_offset", "batch_count", "record_count", "size_bytes", "valid_bytes",
                     "invalid_bytes", "index_status", "codecs", "magics", "min_timestamp", "max_timestamp")
            assert [getattr(got, f) for f in facts] == [getattr(want, f) for f in facts], (variant, item.path)
            if item.path == str(damaged):
                assert got.status == "corrupt"
            if damage:  # a chunk that fails its tag or does not decompress: reported, the rest checked
                assert {(d.position, d.size) for d in damage} <= set(got.corrupt_ranges)
                assert got.error.startswith(damage[0].reason) and want.error in got.error
            else:  # stored plain: the flipped byte fails a batch CRC, as in the restored file
                assert (got.status, got.corrupt_ranges, got.error) == (want.status, want.corrupt_ranges, want.error)


_MEMORY_CHILD = r"""
import os, sys, json
from kafkalog.archive.discovery import discover_segments
from kafkalog.verify.remote import verify_segment_at
opts = json.loads(sys.argv[1])
[item] = discover_segments(sys.argv[2], options=opts)
verify_segment_at(item, options=opts)  # warm: imports, the file system, the pool
def rss(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
before = rss("VmRSS:")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # peak RSS := current RSS
rep = verify_segment_at(item, options=opts)
print(json.dumps({"grew": rss("VmHWM:") - before, "status": rep.status, "batches": rep.batch_count}))
"""


def test_peak_memory_of_a_streamed_segment_stays_within_the_reads_in_flight(s3, tmp_path) -> None:
    """A 96 MiB segment verified with 2 ranged reads of 8 MiB in flight: the process grows by about the reads in
    flight and one window, not by the segment (a whole-object read would add 96 MiB)."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's /proc/self/clear_refs to reset the peak RSS")
    from kafkalog.records import build_batch

    batch = build_batch([(b"k", os.urandom(1000)) for _ in range(64)], base_offset=0)
    n = (96 << 20) // len(batch)
    log = b"".join(rebased(batch, i * 64) for i in range(n))  # the same records at increasing offsets
    got = peak_of_a_streamed_read(s3, tmp_path, log, _MEMORY_CHILD)
    assert got["status"] == "ok" and got["batches"] == n
    bound = 2 * (8 << 20) + stream.WINDOW_BYTES + (8 << 20)  # reads in flight + a window + the part being copied
    assert got["grew"] < bound + (8 << 20), got  # 8 MiB of slack for the allocator and numpy's columns


def test_a_short_object_is_unreadable_not_a_partial_pass(s3, monkeypatch) -> None:
    """An object shorter than it said when opened (replaced mid-read): unreadable, naming the object."""
    item = discover_segments(f"s3://{BUCKET}/cases/made-bad-magic-0", options=s3.options)[0]
    real = storage.open_object_ranges

    def short(url, options=None, **kw):
        size, parts = real(url, options, **kw)
        return size + 10, parts

    monkeypatch.setattr(storage, "open_object_ranges", short)
    rep = verify_segment_at(dataclasses.replace(item), options=s3.options)
    assert rep.status == "unreadable" and "expected" in rep.error and rep.exception is not None
