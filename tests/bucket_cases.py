"""Partition dirs in a moto bucket for the tests of reads that stream a remote segment
(tests/cli/test_cli_dump_stream.py, tests/verify/test_verify_stream.py): Kafka's damaged inputs and legacy formats,
damage made here, and golden partitions; the fixture bodies that make batches straddle windows and ranged reads, and
that record every remote object copied to a local file.

The fixtures are plain functions, made fixtures in each module (``s3 = pytest.fixture(scope="module")(...)``), as
tests/s3server.py's are.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kafkalog.archive import storage
from kafkalog.verify import stream
from tests.conftest import GOLDEN
from tests.s3server import MotoServer, upload_tree

ROOT = Path(__file__).resolve().parent.parent

#: the objects of a segment: never copied to disk by a streamed read
SEGMENT_OBJECTS = (".log", ".index", ".timeindex", ".txnindex", ".indexes")

#: Kafka's damaged partitions (unclean shutdown, log loader) and the legacy message formats
DAMAGED_GROUPS = ("unclean/input", "loader/input", "legacy/logdir")

#: damage made here to one ``.log`` of a copy of golden-segments-0
MADE: dict[str, Callable[[bytes], bytes]] = {
    "made-flipped-header-0": lambda b: b[:70] + bytes([b[70] ^ 0x40]) + b[71:],  # a CRC fails mid-file
    "made-cut-mid-batch-0": lambda b: b[: len(b) // 2 + 3],  # truncated inside a batch
    "made-huge-length-0": lambda b: b[:8] + (1 << 30).to_bytes(4, "big") + b[12:],  # length past the end
    "made-bad-magic-0": lambda b: b[:16] + b"\x07" + b[17:],
}


def partition_cases(
    tmp: Path, golden: Iterable[str], made: Iterable[str], pick: Callable[[list[Path]], Path]
) -> dict[str, Path]:
    """case name -> local partition dir: the ``golden`` partitions of golden/logdir, every dir of
    :data:`DAMAGED_GROUPS`, and the ``made`` damage of :data:`MADE`, each applied under ``tmp`` to the ``.log`` that
    ``pick`` chooses among the copy's sorted ``.log`` files."""
    assert GOLDEN is not None
    cases = {name: GOLDEN / "logdir" / name for name in golden}
    for group in DAMAGED_GROUPS:
        for d in sorted((GOLDEN / group).iterdir()):
            if d.is_dir():
                cases[d.name] = d
    for name in made:
        d = tmp / "made" / name
        shutil.copytree(GOLDEN / "logdir" / "golden-segments-0", d)
        log = pick(sorted(d.glob("*.log")))
        log.write_bytes(MADE[name](log.read_bytes()))
        cases[name] = d
    return cases


def serve_cases(cases: dict[str, Path], bucket: str) -> Iterator[MotoServer]:
    """Fixture body: a moto server holding each case at ``s3://bucket/cases/<name>``, with ``cases`` as its
    ``.cases``; stopped afterwards."""
    server = MotoServer().start()
    try:
        client = server.client()
        for name, d in cases.items():
            upload_tree(client, d, bucket, f"cases/{name}")
        server.cases = cases
        yield server
    finally:
        server.stop()


def tiny_windows(monkeypatch) -> None:
    """Fixture body: windows of 64 bytes and ranged reads of 700, so that most batches straddle a window, many a
    read."""
    monkeypatch.setattr(stream, "WINDOW_BYTES", 64)
    monkeypatch.setattr(stream, "FETCH_BYTES", 700)


def no_copies(monkeypatch, tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """Fixture body: (a dir TMPDIR points at, which must stay empty; the URLs of every remote object copied to a
    local file, staged or fetched)."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    copied: list[str] = []
    real_stage, real_fetch = storage.stage_files, storage.fetch_parallel

    def stage_files(urls, root, base, options=None):
        copied.extend(urls)
        return real_stage(urls, root, base, options)

    def fetch_parallel(url, dest, *args, **kwargs):
        copied.append(url)
        return real_fetch(url, dest, *args, **kwargs)

    monkeypatch.setattr(storage, "stage_files", stage_files)
    monkeypatch.setattr(storage, "fetch_parallel", fetch_parallel)
    yield tmp, copied


def cli(args: list) -> object:
    """``kafkalog ARGS`` in this process (each arg as ``str``), Click's result."""
    from click.testing import CliRunner
    from kafkalog_cli.main import main as cli_main

    return CliRunner().invoke(cli_main, [str(a) for a in args], catch_exceptions=False)


def rebased(batch: bytes, base: int) -> bytes:
    """``batch`` with its base offset set to ``base`` and its CRC recomputed."""
    from crc32c import crc32c

    b = bytearray(batch)
    b[0:8] = base.to_bytes(8, "big")
    b[17:21] = crc32c(bytes(b[21:])).to_bytes(4, "big")
    return bytes(b)


def peak_of_a_streamed_read(server: MotoServer, tmp: Path, log: bytes, child: str) -> dict:
    """Put ``log`` in ``server`` as the one segment of ``s3://mem/logdir/big-0``, and run
    ``python -c child OPTIONS_JSON URL`` with ``KAFKALOG_READ_PARALLELISM=2`` (the child measures its peak RSS);
    the JSON of the child's last line."""
    pdir = tmp / "big-0"
    pdir.mkdir()
    (pdir / "00000000000000000000.log").write_bytes(log)
    upload_tree(server.client(), pdir, "mem", "logdir/big-0")
    env = {**os.environ, "KAFKALOG_READ_PARALLELISM": "2", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", child, json.dumps(server.options),
                          "s3://mem/logdir/big-0/00000000000000000000.log"], env=env, capture_output=True,
                         text=True, timeout=600, check=True)  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])
