"""URLs besides s3://: Hadoop's local file URL forms, and gs://, abfs://, hdfs:// failing fast with a StorageError
that says what the client is missing (no GCS/Azure/HDFS service here: only the clients' own failures)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafkalog.archive import storage
from kafkalog.archive.discovery import discover_segments
from kafkalog.errors import InvalidArgumentError
from tests.conftest import GOLDEN, needs_golden

pytest.importorskip("pyarrow")


@needs_golden
@pytest.mark.parametrize("form", ["file:{p}", "file://{p}", "file://localhost{p}", "FILE:{p}"])
def test_file_url_forms_are_local_paths(form: str) -> None:
    root = str(GOLDEN / "logdir" / "golden-segments-0")
    url = form.format(p=root)
    assert storage.local_path(url) == root and not storage.is_remote(url)
    want = [(i.path, i.size_bytes) for i in discover_segments([root])]
    assert want and [(i.path, i.size_bytes) for i in discover_segments([url])] == want
    assert storage.stat_size(url + "/00000000000000000000.log") == os.path.getsize(root + "/00000000000000000000.log")


def test_file_url_escapes_and_other_hosts(tmp_path: Path) -> None:
    (tmp_path / "a b").mkdir()
    (tmp_path / "a b" / "x").write_bytes(b"12345")
    assert storage.read_range(f"file:{tmp_path}/a%20b/x", 1, 3) == b"23"
    with pytest.raises(InvalidArgumentError, match="must name a local path"):
        storage.local_path("file://otherhost/data/x")


def _in_child(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (no cached file systems), bounded: a hang fails the test."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def _no_cloud_env(tmp_path: Path) -> dict[str, str]:
    drop = ("GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST", "CLOUDSDK_CONFIG", "AZURE_CLIENT_ID",
            "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "HADOOP_HOME", "ARROW_LIBHDFS_DIR", "CLASSPATH")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(HOME=str(tmp_path), PYTHONPATH=os.pathsep.join(sys.path))
    return env


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("gs://kafkalog-no-such-bucket/archive", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("abfs://archive@kafkalognosuchaccount.dfs.core.windows.net/x", "DefaultAzureCredential"),
        ("hdfs://127.0.0.1:1/archive", "libhdfs"),
    ],
)
def test_cloud_urls_without_a_client_setup_fail_with_what_is_missing(tmp_path: Path, url: str, says: str) -> None:
    """Google's client retried its token requests for minutes without credentials; now a StorageError comes
    back within the connect timeout, naming what to configure (a child process, killed if it hangs)."""
    code = f"""
        from kafkalog.archive import storage
        try:
            storage.list_tree({url!r}, {{"connect_timeout": "2"}})
        except storage.StorageError as exc:
            print("StorageError:", exc)
        """
    proc = _in_child(code, _no_cloud_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("StorageError: " + url) and says in proc.stdout, proc.stdout
