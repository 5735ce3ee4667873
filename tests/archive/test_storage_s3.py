"""kafkalog.archive.storage, discovery and verification against a real S3 protocol server (moto's, on 127.0.0.1).

The golden log dir and Kafka's damaged copies (``unclean/input``) are uploaded once; every remote answer must equal
the answer for the same files on local disk. Failures (missing bucket, missing object, a server that goes away
mid-read) must raise a typed error naming the object, quickly.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from kafkalog.archive import storage
from kafkalog.archive.discovery import discover_segments
from kafkalog.errors import KafkaLogError, KafkaStorageError
from kafkalog.verify import verify_partition, verify_segment
from kafkalog.verify.remote import localized, verify_partition_at, verify_segment_at
from tests.conftest import GOLDEN, needs_golden
from tests.s3server import MotoServer, golden_archive_fixture, upload_tree

pytest.importorskip("pyarrow")
pytest.importorskip("moto")

pytestmark = [needs_golden]

BUCKET = "archive"


#: moto's server holding golden/logdir at s3://archive/logdir and the damaged copies at s3://archive/unclean
s3 = pytest.fixture(scope="module", name="s3")(golden_archive_fixture)


def _rel(path: str, root: str) -> str:
    assert path.startswith(root), (path, root)
    return path[len(root) :].lstrip("/")


def _items_by_rel(items, root: str) -> dict:
    return {_rel(i.path, root): i for i in items}


def _same_row(remote_row: dict, local_row: dict, remote_root: str, local_root: str) -> None:
    r, loc = dict(remote_row), dict(local_row)
    for key in ("path", "partition_dir"):
        if key in r:
            assert _rel(r.pop(key), remote_root) == _rel(loc.pop(key), local_root)
    for key in ("error", "index_error"):  # messages name the file: the remote one, not a scratch copy
        if loc.get(key):
            loc[key] = loc[key].replace(local_root, remote_root)
    assert r == loc


# ------------------------------------------------------------------------------------------------- storage


def test_list_stat_and_read_range_match_the_local_files(s3) -> None:
    opts = s3.options
    url = f"s3://{BUCKET}/logdir/golden-none-0"
    entries = storage.list_tree(url, opts)
    local = GOLDEN / "logdir" / "golden-none-0"
    assert {storage.basename(e.url): e.size for e in entries} == {p.name: p.stat().st_size for p in local.iterdir()}
    log = f"{url}/00000000000000000000.log"
    data = (local / "00000000000000000000.log").read_bytes()
    assert storage.stat_size(log, opts) == len(data)
    assert storage.stat_size(f"{url}/nope.log", opts) == -1
    assert storage.read_range(log, 61, 200, opts) == data[61:200]
    assert storage.read_range(log, len(data) - 5, None, opts) == data[-5:]


def test_fetch_copies_a_range_in_bounded_chunks(s3, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(storage, "CHUNK", 1000)  # many reads for one range
    log = f"s3://{BUCKET}/logdir/golden-segments-0/00000000000000000000.log"
    data = (GOLDEN / "logdir" / "golden-segments-0" / "00000000000000000000.log").read_bytes()
    assert storage.fetch(log, str(tmp_path / "x"), 123, 3456, s3.options) == 3456 - 123
    assert (tmp_path / "x").read_bytes() == data[123:3456]


def test_aws_environment_variables_are_used_when_no_options(s3, monkeypatch) -> None:
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    entries = storage.list_tree(f"s3://{BUCKET}/logdir/golden-gzip-0")
    assert any(e.url.endswith(".log") for e in entries)


def test_parse_storage_options_rejects_unknown_keys() -> None:
    assert storage.parse_storage_options(["endpoint_url=http://x:1", "REGION=eu"]) == {
        "endpoint_url": "http://x:1",
        "region": "eu",
    }
    with pytest.raises(KafkaLogError, match="storage option"):
        storage.parse_storage_options(["bogus=1"])
    with pytest.raises(ValueError):
        storage.parse_storage_options(["endpoint_url"])


# ----------------------------------------------------------------------------------------------- discovery


def test_discovery_of_a_bucket_prefix_equals_local_discovery(s3) -> None:
    remote_root = f"s3://{BUCKET}/logdir"
    local_root = str(GOLDEN / "logdir")
    remote = _items_by_rel(discover_segments(remote_root, options=s3.options), remote_root)
    local = _items_by_rel(discover_segments(local_root), local_root)
    assert remote.keys() == local.keys() and len(remote) > 20
    for rel, item in remote.items():
        loc = local[rel]
        assert dataclasses.replace(item, path=loc.path, partition_dir=loc.partition_dir) == loc


def test_discovery_of_one_remote_segment_finds_its_index_sizes(s3) -> None:
    url = f"s3://{BUCKET}/logdir/golden-txn-0/00000000000000000000.log"
    [item] = discover_segments(url, options=s3.options)
    [loc] = discover_segments(GOLDEN / "logdir" / "golden-txn-0" / "00000000000000000000.log")
    assert (item.path, item.topic, item.partition) == (url, loc.topic, loc.partition)
    assert (item.index_size, item.timeindex_size, item.txnindex_size) == (
        loc.index_size, loc.timeindex_size, loc.txnindex_size,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------- verification


@pytest.mark.parametrize("prefix", ["logdir", "unclean"])
def test_remote_segment_and_partition_reports_equal_the_local_ones(s3, prefix: str) -> None:
    remote_root = f"s3://{BUCKET}/{prefix}"
    local_root = str(GOLDEN / ("logdir" if prefix == "logdir" else "unclean/input"))
    remote = _items_by_rel(discover_segments(remote_root, options=s3.options), remote_root)
    local = _items_by_rel(discover_segments(local_root), local_root)
    statuses = set()
    by_dir: dict[str, tuple[list, list]] = {}
    for rel, item in sorted(remote.items()):
        r = verify_segment_at(item, options=s3.options)
        loc = verify_segment(local[rel])
        _same_row(r.to_dict(), loc.to_dict(), remote_root, local_root)
        statuses.add(r.status)
        pair = by_dir.setdefault(item.partition_dir, ([], []))
        pair[0].append(r)
        pair[1].append(loc)
    for remote_reports, local_reports in by_dir.values():
        _same_row(
            verify_partition_at(remote_reports, s3.options).to_dict(), verify_partition(local_reports).to_dict(),
            remote_root, local_root,
        )  # fmt: skip
    # the damaged copies are flagged remotely exactly as locally (and the golden dir is clean)
    assert statuses == ({"ok"} if prefix == "logdir" else {"ok", "corrupt"})


def test_remote_partition_report_reads_the_log_dir_checkpoints(s3) -> None:
    url = f"s3://{BUCKET}/logdir/golden-deleterecords-0"
    reports = [verify_segment_at(i, options=s3.options) for i in discover_segments(url, options=s3.options)]
    rep = verify_partition_at(reports, s3.options)
    assert rep.checkpoint_log_start_offset == 28  # golden README: log start offset 28 in the checkpoint
    assert rep.partition_dir == url


def test_remote_partition_checks_its_metadata_files_as_locally(s3, tmp_path: Path) -> None:
    """A damaged leader-epoch-checkpoint is found in the bucket as on disk (the executor fetches the dir's files)."""
    src = GOLDEN / "logdir" / "golden-segments-0"
    local = tmp_path / "logdir" / "golden-segments-0"
    local.mkdir(parents=True)
    for f in src.iterdir():
        (local / f.name).write_bytes(f.read_bytes())
    (local / "leader-epoch-checkpoint").write_text("0\n2\n3 0\n1 50\n")  # epochs going backwards
    upload_tree(s3.client(), tmp_path / "logdir", BUCKET, "damaged-epochs")
    url = f"s3://{BUCKET}/damaged-epochs/golden-segments-0"
    remote_reports = [verify_segment_at(i, options=s3.options) for i in discover_segments(url, options=s3.options)]
    local_reports = [verify_segment(i) for i in discover_segments(str(local))]
    remote, here = verify_partition_at(remote_reports, s3.options), verify_partition(local_reports)
    assert here.status == "corrupt" and any("leader-epoch-checkpoint" in p for p in here.problems)
    _same_row(remote.to_dict(), here.to_dict(), url, str(local))


def test_localized_partition_and_segment(s3) -> None:
    url = f"s3://{BUCKET}/logdir/golden-txn-0"
    local_dir = GOLDEN / "logdir" / "golden-txn-0"
    with localized(url, s3.options) as path:
        p = Path(path)
        assert p.name == "golden-txn-0"
        assert sorted(f.name for f in p.iterdir()) == sorted(f.name for f in local_dir.iterdir())
        assert (p.parent / "recovery-point-offset-checkpoint").read_bytes() == (
            GOLDEN / "logdir" / "recovery-point-offset-checkpoint"
        ).read_bytes()
    assert not p.exists()
    with localized(url + "/00000000000000000000.log", s3.options) as path:
        p = Path(path)
        assert p.read_bytes() == (local_dir / "00000000000000000000.log").read_bytes()
        assert (p.parent / "00000000000000000000.index").is_file()


# ------------------------------------------------------------------------------------------------ failures


def test_missing_bucket_and_missing_object_name_the_object(s3) -> None:
    with pytest.raises(storage.ObjectNotFoundError, match="s3://no-such-bucket/x"):
        discover_segments("s3://no-such-bucket/x", options=s3.options)
    with pytest.raises(storage.ObjectNotFoundError, match="s3://archive/logdir/nothing-here"):
        storage.list_tree(f"s3://{BUCKET}/logdir/nothing-here", s3.options)
    missing = f"s3://{BUCKET}/logdir/golden-none-0/00000000000000000099.log"
    with pytest.raises(FileNotFoundError, match="00000000000000000099.log"):
        storage.read_range(missing, 0, 10, s3.options)


def test_a_vanished_object_makes_the_segment_unreadable(s3) -> None:
    [item] = discover_segments(f"s3://{BUCKET}/logdir/golden-none-0/00000000000000000000.log", options=s3.options)
    gone = dataclasses.replace(item, path=item.path.replace("golden-none-0", "golden-none-gone"))
    rep = verify_segment_at(gone, options=s3.options)
    assert rep.status == "unreadable" and "golden-none-gone" in rep.error
    assert isinstance(rep.exception, KafkaStorageError)


def test_closed_port_fails_fast_with_the_object_in_the_error() -> None:
    from tests.s3server import free_port

    opts = {"endpoint_url": f"http://127.0.0.1:{free_port()}", "access_key": "a", "secret_key": "b",
            "connect_timeout": "1", "request_timeout": "2", "max_attempts": "2"}  # fmt: skip
    t = time.monotonic()
    with pytest.raises(storage.StorageError, match="s3://archive/logdir"):
        storage.list_tree("s3://archive/logdir", opts)
    assert time.monotonic() - t < 60  # bounded retries, never a hang


def test_server_stopped_mid_read_is_a_storage_error(tmp_path: Path, monkeypatch) -> None:
    """A dedicated server is stopped between two chunk reads of one fetch."""
    server = MotoServer().start()
    try:
        client = server.client()
        client.create_bucket(Bucket="bkt")
        client.put_object(Bucket="bkt", Key="big.log", Body=b"x" * 50_000)
        opts = {**server.options, "connect_timeout": "1", "request_timeout": "2", "max_attempts": "2"}
        monkeypatch.setattr(storage, "CHUNK", 10_000)
        calls = {"n": 0}
        real_resolve = storage.resolve

        class StopAfterOpen:
            """The real file system; the server stops once the object is open (its size known), so every range
            read after that meets a dead endpoint."""

            def __init__(self, fs):
                self.fs = fs

            def open_input_file(self, path):
                f = self.fs.open_input_file(path)
                server.stop()
                calls["n"] += 1
                return f

        monkeypatch.setattr(storage, "resolve", lambda url, options=None: (
            StopAfterOpen(real_resolve(url, options)[0]), real_resolve(url, options)[1]))
        t = time.monotonic()
        with pytest.raises(storage.StorageError, match="s3://bkt/big.log"):
            storage.fetch("s3://bkt/big.log", str(tmp_path / "out"), options=opts)
        assert calls["n"] == 1 and time.monotonic() - t < 60
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------------- CLI


def _cli(args: list[str]):
    from click.testing import CliRunner
    from kafkalog_cli.main import main as cli_main

    return CliRunner().invoke(cli_main, args)


def _opts(s3) -> list[str]:
    return [f"--storage-option={k}={v}" for k, v in s3.options.items()]


def _without_paths(text: str) -> list[str]:
    """Output lines with every file path cut to its last component (remote runs read a scratch copy)."""
    import re

    return [re.sub(r"[^\s\"]*/([^\s/\"]+)", r"\1", line) for line in text.splitlines()]


@pytest.mark.parametrize("case", ["logdir/golden-txn-0", "unclean/unclean-corrupt-crc-0"])
def test_cli_verify_of_a_remote_partition_equals_the_local_verify(s3, case: str) -> None:
    local = GOLDEN / ("logdir" + case[len("logdir") :] if case.startswith("logdir") else "unclean/input" + case[7:])
    remote = _cli(["verify", "--json", f"s3://{BUCKET}/{case}", *_opts(s3)])
    here = _cli(["verify", "--json", str(local)])
    assert remote.exit_code == here.exit_code == (0 if case.startswith("logdir") else 1), remote.output
    assert _without_paths(remote.output) == _without_paths(here.output)
    # the report names the objects asked about, never the scratch copy they were read from
    assert remote.output == here.output.replace(str(local), f"s3://{BUCKET}/{case}")


def test_cli_dump_of_a_remote_segment_equals_the_local_dump(s3) -> None:
    rel = "golden-zstd-0/00000000000000000000"
    for suffix in (".log", ".index", ".timeindex"):
        remote = _cli(["dump", "--deep-iteration", f"s3://{BUCKET}/logdir/{rel}{suffix}", *_opts(s3)])
        here = _cli(["dump", "--deep-iteration", str(GOLDEN / "logdir" / f"{rel}{suffix}")])
        assert remote.exit_code == here.exit_code == 0, remote.output
        assert _without_paths(remote.output) == _without_paths(here.output) and len(here.output) > 200
        assert remote.output == here.output.replace(str(GOLDEN / "logdir"), f"s3://{BUCKET}/logdir")


def test_cli_remote_errors_are_one_line_naming_the_object(s3) -> None:
    missing = f"s3://{BUCKET}/logdir/golden-none-0/00000000000000000777.log"
    for cmd in (["verify"], ["dump"]):
        res = _cli([*cmd, missing, *_opts(s3)])
        assert res.exit_code == 2 and missing in res.output and "Traceback" not in res.output
    res = _cli(["verify", "s3://archive/x", "--storage-option", "colour=blue"])
    assert res.exit_code == 2 and "storage option" in res.output
