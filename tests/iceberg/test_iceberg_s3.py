"""Iceberg sync of an archive behind ``s3://`` (a real S3 protocol server): the same rows as from disk."""

from __future__ import annotations

import pytest

pytest.importorskip("pyiceberg")
pytest.importorskip("pyiceberg_core")
pytest.importorskip("moto")

from kafkalog.iceberg import sync  # noqa: E402
from tests.conftest import GOLDEN, needs_golden  # noqa: E402
from tests.iceberg.test_iceberg_sync import expected, open_table  # noqa: E402
from tests.iceberg_expect import table_rows  # noqa: E402
from tests.s3server import MotoServer, upload_tree  # noqa: E402

pytestmark = needs_golden


def test_s3_archive_syncs_and_resumes(tmp_path):
    server = MotoServer().start()
    try:
        client = server.client()
        upload_tree(client, GOLDEN / "logdir" / "golden-txn-0", "archive", "logs/golden-txn-0")
        result = sync(["s3://archive/logs"], "kafka.history", warehouse=tmp_path / "wh",
                      storage_options=server.options)  # fmt: skip
        assert table_rows(open_table(tmp_path / "wh")) == expected("golden-txn-0")
        assert result.next_offsets == {"golden-txn-0": 207}
        again = sync(["s3://archive/logs"], "kafka.history", warehouse=tmp_path / "wh",
                     storage_options=server.options)  # fmt: skip
        assert again.snapshot_id is None
    finally:
        server.stop()
