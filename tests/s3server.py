"""A real S3 protocol server for tests: moto's standalone server on 127.0.0.1 (a subprocess, a free port).

``MotoServer`` starts and stops one; :func:`upload_tree` copies a local dir into a bucket with boto3 (a client
independent of the code under test). The ``s3`` fixture in test modules is session-scoped: one server for the run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

#: credentials moto accepts (it does not check them unless IAM auth is switched on)
ACCESS_KEY = "kafkalog-test"
SECRET_KEY = "kafkalog-secret"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MotoServer:
    """``python -m moto.server -H 127.0.0.1 -p PORT`` as a child process."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> MotoServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.proc.returncode}")
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=1).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("moto server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def options(self) -> dict[str, str]:
        """kafkalog storage options pointing at this server."""
        return {"endpoint_url": self.endpoint, "access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "region": REGION}

    @property
    def env(self) -> dict[str, str]:
        """The standard AWS environment variables pointing at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }

    def client(self):
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )  # fmt: skip


def upload_tree(client, local: Path, bucket: str, prefix: str) -> None:
    """Every file under ``local`` to ``s3://bucket/prefix/<relative path>`` (the bucket is created if needed)."""
    existing = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        client.create_bucket(Bucket=bucket)
    for dirpath, _, names in os.walk(local):
        for name in names:
            path = Path(dirpath) / name
            key = f"{prefix}/{path.relative_to(local).as_posix()}"
            client.upload_file(str(path), bucket, key)


def golden_archive_server(golden: Path, bucket: str = "archive") -> MotoServer:
    """A started server holding golden/logdir at ``s3://bucket/logdir`` and Kafka's damaged copies
    (golden/unclean/input) at ``s3://bucket/unclean``; the caller stops it."""
    server = MotoServer().start()
    try:
        client = server.client()
        upload_tree(client, golden / "logdir", bucket, "logdir")
        upload_tree(client, golden / "unclean" / "input", bucket, "unclean")
    except Exception:
        server.stop()
        raise
    return server


def golden_archive(golden: Path | None, bucket: str = "archive") -> Iterator[MotoServer]:
    """Fixture body (``s3 = pytest.fixture(scope="module")(golden_archive_fixture)`` in a test module): a
    :func:`golden_archive_server` for the module, stopped afterwards."""
    assert golden is not None
    server = golden_archive_server(golden, bucket)
    try:
        yield server
    finally:
        server.stop()


def golden_archive_fixture() -> Iterator[MotoServer]:
    from tests.conftest import GOLDEN

    yield from golden_archive(GOLDEN)
