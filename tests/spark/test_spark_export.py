"""``export_archive`` / ``kafkalog spark export``: Parquet written by the tasks, read back equal to the DataSource.

Kafka's golden logdir exported on local[2] reads back with ``spark.read.parquet`` with the DataSource's schema and
rows; an ``s3://`` output on moto's server holds the same rows (read back with pyarrow: Spark here has no S3
connector); a corrupt segment fails the export naming it, with no ``_SUCCESS`` and no files left; the CLI once.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import GOLDEN, load_manifest, needs_golden

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.spark, needs_golden]

ORDER = ["topic", "partition", "offset"]
CASES = ["golden-none-0", "golden-zstd-0", "golden-txn-0", "golden-segments-0"]


def _copy(dst: Path, cases: list[str], names: dict[str, str] | None = None) -> Path:
    """A copy of the chosen golden partition dirs under ``dst`` (renamed per ``names``)."""
    assert GOLDEN is not None
    dst.mkdir(parents=True)
    for case in cases:
        shutil.copytree(GOLDEN / "logdir" / case, dst / (names or {}).get(case, case))
    return dst


def _parquet_files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet"))


def test_golden_export_reads_back_as_the_datasource(spark, tmp_path: Path) -> None:
    from kafkalog.errors import InvalidArgumentError
    from kafkalog.spark import export_archive, read_export

    root = str(GOLDEN / "logdir")
    out = tmp_path / "export"
    steps: list[tuple[str, int, int]] = []
    result = export_archive(spark, root, str(out), on_progress=lambda *s: steps.append(s))
    ds = spark.read.format("kafkalog").load(root)
    back = spark.read.parquet(str(out))
    # names, order, types (api.md: the DataSource's schema): the partition columns come back where the files hold
    # them, timestamps as the DataSource's long milliseconds
    assert back.schema == ds.schema
    want = ds.orderBy(*ORDER).collect()
    assert back.orderBy(*ORDER).collect() == want and len(want) > 2000
    assert read_export(spark, str(out)).orderBy(*ORDER).collect() == want
    assert result.rows == len(want) == sum(f.rows for f in result.files)
    # Hive-style dirs, one per partition, the deterministic names the tasks report, and the marker
    on_disk = _parquet_files(out)
    assert on_disk == sorted(str(Path(f.path).relative_to(out)) for f in result.files)
    assert {str(Path(p).parent) for p in on_disk} == {f"topic={c.rsplit('-', 1)[0]}/partition=0"
                                                      for c in (p.name for p in (GOLDEN / "logdir").iterdir()
                                                                if p.is_dir())}  # fmt: skip
    assert all(Path(p).name.startswith("part-") for p in on_disk)
    assert json.loads((out / "_SUCCESS").read_text())["rows"] == len(want)
    assert result.bytes == sum((out / p).stat().st_size for p in on_disk)
    assert {s[0] for s in steps} == {"plan", "write", "commit"} and steps[-1] == ("commit", 1, 1)
    with pytest.raises(InvalidArgumentError, match="already holds files"):  # refused before any job runs
        export_archive(spark, root, str(out))


def test_numeric_topic_names_read_back_typed_by_read_export(spark, tmp_path: Path) -> None:
    """A topic named like a number: Spark would infer its dir values as integers; read_export keeps strings."""
    from kafkalog.spark import export_archive, read_export

    root = _copy(tmp_path / "logdir", ["golden-none-0"], {"golden-none-0": "2024-3"})
    out = tmp_path / "export"
    export_archive(spark, str(root), str(out))
    ds = spark.read.format("kafkalog").load(str(root))
    back = read_export(spark, str(out))
    assert back.schema == ds.schema
    rows = back.orderBy("offset").collect()
    assert rows == ds.orderBy("offset").collect() and {(r.topic, r.partition) for r in rows} == {("2024", 3)}


def test_a_retried_task_overwrites_its_files(tmp_path: Path) -> None:
    """The task body run twice on the same segments (a Spark retry) writes the same names: no duplicate rows, no
    temp file left (in process, no Spark job)."""
    import pyarrow.dataset as pads

    from kafkalog.spark.export import _export_group, _Out, _reader

    reader = _reader([str(GOLDEN / "logdir" / "golden-segments-0")], {}, 2)
    group = reader.partitions()[0]
    dest = _Out(str(tmp_path / "out"), {})
    first = _export_group(reader, 7, group, dest, ("topic", "partition"), "snappy")
    again = _export_group(reader, 7, group, dest, ("topic", "partition"), "snappy")
    assert first["error"] is None and first["files"] == again["files"] and first["files"]
    assert dest.listing() == sorted(f["path"] for f in first["files"])
    assert all(Path(f["path"]).name.startswith("part-00007-") for f in first["files"])
    rows = pads.dataset(str(tmp_path / "out"), format="parquet", partitioning="hive").count_rows()
    assert rows == sum(f["rows"] for f in first["files"]) > 0


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 with an empty bucket ``export``."""
    pytest.importorskip("moto")
    from tests.s3server import MotoServer

    server = MotoServer().start()
    try:
        server.client().create_bucket(Bucket="export")
        yield server
    finally:
        server.stop()


def _plain(rows) -> list[tuple]:
    """Rows (Spark ``Row``s or pyarrow dicts) as comparable tuples."""
    def b(v):
        return None if v is None else bytes(v)

    out = []
    for r in rows:
        d = r if isinstance(r, dict) else r.asDict(recursive=True)
        headers = [(h["key"], b(h["value"])) for h in d["headers"]]
        ts = d["timestamp"]
        ts = ts if isinstance(ts, int) else round(ts.timestamp() * 1000)  # the export's timestamp type, as ms
        out.append((d["topic"], d["partition"], d["offset"], ts, d["timestamp_type"], b(d["key"]),
                    b(d["value"]), headers, d["producer_id"], d["leader_epoch"], d["is_transactional"],
                    d["is_control"]))  # fmt: skip
    return sorted(out, key=lambda t: t[:3])


def test_export_to_s3_holds_the_datasource_rows(spark, s3) -> None:
    import pyarrow.dataset as pads

    from kafkalog.archive import storage
    from kafkalog.spark import export_archive

    roots = [str(GOLDEN / "logdir" / c) for c in CASES]
    out = "s3://export/run1"
    result = export_archive(spark, roots, out, **s3.options)
    keys = sorted(o["Key"] for o in s3.client().list_objects_v2(Bucket="export", Prefix="run1/")["Contents"])
    assert keys == sorted(["run1/_SUCCESS", *(f.path[len("s3://export/"):] for f in result.files)])  # no temp left
    assert {k.split("/")[1] for k in keys if k.endswith(".parquet")} == {f"topic={c.rsplit('-', 1)[0]}" for c in CASES}
    assert all(storage.stat_size(f.path, s3.options) == f.bytes > 0 for f in result.files)
    fs, path = storage.resolve(out, s3.options)
    table = pads.dataset(path, filesystem=fs, format="parquet", partitioning="hive").to_table()
    want = spark.read.format("kafkalog").load(roots).collect()
    assert table.num_rows == result.rows == len(want)
    assert _plain(table.to_pylist()) == _plain(want)


def test_corrupt_segment_fails_the_export_naming_it(spark, tmp_path: Path) -> None:
    from kafkalog.errors import CorruptRecordError
    from kafkalog.spark import export_archive

    root = _copy(tmp_path / "logdir", ["golden-none-0", "golden-gzip-0", "golden-segments-0"])
    log = root / "golden-none-0" / "00000000000000000000.log"
    bad = load_manifest("manifests/golden-none-0.json")["segments"][0]["log"]["batches"][4]
    data = bytearray(log.read_bytes())
    data[bad["position"] + bad["sizeInBytes"] - 3] ^= 0xFF  # inside the 5th batch: its CRC fails
    log.write_bytes(bytes(data))
    out = tmp_path / "export"
    with pytest.raises(CorruptRecordError, match=str(log)) as info:
        export_archive(spark, str(root), str(out), onCorrupt="fail", minPartitions="3")
    assert f"position {bad['position']}" in str(info.value)
    assert not (out / "_SUCCESS").exists()
    assert [p for p in out.rglob("*") if p.is_file()] == []  # the other tasks' files are removed too
    assert list(out.rglob("*")) == []  # and the topic=/partition= dirs they made
    from kafkalog_cli.main import main

    res = CliRunner().invoke(main, ["spark", "export", str(root), "--out", str(out)])
    error = [x for x in res.stderr.splitlines() if x.startswith("kafkalog: error: ")]
    assert res.exit_code == 1 and len(error) == 1 and error[0].startswith(f"kafkalog: error: corrupt record: {log}: ")
    assert "Traceback" not in res.output and not (out / "_SUCCESS").exists()


def test_failed_writes_fail_the_export_in_one_line(spark, tmp_path: Path) -> None:
    """A task that cannot write (here ``out`` is a file) is retried by Spark, then the export raises a
    StorageError with the task's reason on one line."""
    from kafkalog.archive.storage import StorageError
    from kafkalog.spark import export_archive

    out = tmp_path / "a-file"
    out.write_text("not a dir")
    with pytest.raises(StorageError, match=f"^{re.escape(str(out))}: export failed: NotADirectoryError: ") as info:
        export_archive(spark, str(GOLDEN / "logdir" / "golden-none-0"), str(out))
    assert "\n" not in str(info.value) and out.read_text() == "not a dir"


def test_cli_export_end_to_end(spark, tmp_path: Path) -> None:
    """``kafkalog spark export`` in process (it reuses the active session): a flat read_committed export as JSON,
    a refused and an overwritten --out, and exit 2 for an archive without segments."""
    from kafkalog_cli.main import main

    runner = CliRunner()
    roots = [str(GOLDEN / "logdir" / c) for c in CASES]
    out = tmp_path / "export"
    args = ["spark", "export", *roots, "--out", str(out), "--partition-by", "none"]
    res = runner.invoke(main, [*args, "--option", "isolation=read_committed", "--json"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout.strip().splitlines()[-1])
    want = spark.read.format("kafkalog").option("isolation", "read_committed").load(roots).orderBy(*ORDER).collect()
    assert obj["type"] == "export" and obj["rows"] == len(want) and obj["segments"] >= len(CASES)
    assert spark.read.parquet(str(out)).orderBy(*ORDER).collect() == want
    assert sorted(Path(f["path"]).name for f in obj["files"]) == _parquet_files(out)  # flat: no partition dirs
    assert json.loads((out / "_SUCCESS").read_text())["files"] == obj["files"]
    res = runner.invoke(main, args)
    assert res.exit_code == 2 and res.stderr.strip() == f"kafkalog: error: {out}: already holds files (--overwrite replaces them)"
    res = runner.invoke(main, ["spark", "export", roots[0], "--out", str(out), "--overwrite"])
    assert res.exit_code == 0 and res.stdout.startswith("exported ")
    assert "segments to export" in res.stderr and "writing Parquet in" in res.stderr  # a note per step
    assert {str(Path(p).parent) for p in _parquet_files(out)} == {"topic=golden-none/partition=0"}
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(main, ["spark", "export", str(empty), "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and res.stderr.strip() == f"kafkalog: error: {empty}: no segments found to export"
    assert "Traceback" not in res.output


def test_values_that_do_not_compress_are_stored_uncompressed(spark, tmp_path: Path) -> None:
    """With snappy (the default) a value column whose bytes do not shrink is written uncompressed and every other
    column keeps snappy, headers included; only topic and timestamp_type get a dictionary; rows read back equal.
    An explicit zstd is kept for every column."""
    import os as _os

    import pyarrow.parquet as pq

    from kafkalog.log import Log
    from kafkalog.spark import export_archive

    root = tmp_path / "archive"
    for name, value in (("random-0", lambda i: _os.urandom(300)), ("repeated-0", lambda i: b"kafka log " * 30)):
        with Log.open(root / name, {"segment.bytes": str(1 << 30)}) as log:
            for i in range(40):
                log.append_as_leader([(b"k%d" % j, value(j), [("h", b"v")]) for j in range(100)], timestamp=1000 + i)
            log.flush()

    def codecs(out: Path, topic: str) -> dict[str, tuple[str, tuple]]:
        (path,) = (out / f"topic={topic}" / "partition=0").glob("*.parquet")
        meta = pq.ParquetFile(path).metadata.row_group(0)
        return {meta.column(i).path_in_schema: (meta.column(i).compression, meta.column(i).encodings)
                for i in range(meta.num_columns)}  # fmt: skip

    out = tmp_path / "snappy"
    export_archive(spark, str(root), str(out))
    rand, rep = codecs(out, "random"), codecs(out, "repeated")
    assert rand["value"][0] == "UNCOMPRESSED" and rep["value"][0] == "SNAPPY"
    for cols in (rand, rep):
        assert {c for c, (codec, _) in cols.items() if codec != "SNAPPY"} <= {"value"}
        assert "headers.list.element.value" in cols and "RLE_DICTIONARY" not in cols["offset"][1]
        assert "RLE_DICTIONARY" in cols["timestamp_type"][1]
    want = spark.read.format("kafkalog").load(str(root)).orderBy(*ORDER).collect()
    assert spark.read.parquet(str(out)).orderBy(*ORDER).collect() == want and len(want) == 8000
    out = tmp_path / "zstd"
    export_archive(spark, str(root), str(out), compression="zstd")
    assert {codec for codec, _ in codecs(out, "random").values()} == {"ZSTD"}


def _disk_rows(out: Path) -> int:
    import pyarrow.dataset as pads

    return pads.dataset(str(out), format="parquet", partitioning="hive").count_rows()


def test_names_are_unique_and_the_export_checks_what_it_committed(spark, tmp_path: Path) -> None:
    """Two partitions of one task starting at the same offset once wrote the same file (the later overwrote the
    earlier, exit 0): ``--partition-by topic`` on a 20-partition archive in one task, and ``--partition-by
    partition`` on the log dir Kafka's own code generates. Every record read is on disk, in the files reported."""
    from dataclasses import replace

    from kafkalog_cli.main import main

    from kafkalog.archive.storage import StorageError
    from kafkalog.spark.export import _check_committed, _Out
    from tests.oracle import UNAVAILABLE_REASON, run_oracle

    runner = CliRunner()
    root = tmp_path / "twenty"
    root.mkdir()
    for p in range(20):
        shutil.copytree(GOLDEN / "logdir" / "golden-none-0", root / f"orders-{p}")
    out = tmp_path / "by-topic"
    res = runner.invoke(main, ["spark", "export", str(root), "--out", str(out), "--partition-by", "topic",
                               "--option", "minPartitions=1", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout.strip().splitlines()[-1])
    want = spark.read.format("kafkalog").load(str(root)).count()
    assert obj["tasks"] == 1 and obj["rows"] == want == 20 * 146
    assert _disk_rows(out) == want and len(_parquet_files(out)) == len(obj["files"]) == 20
    assert {str(Path(p).parent) for p in _parquet_files(out)} == {"topic=orders"}
    if UNAVAILABLE_REASON is None:
        run_oracle("generate", tmp_path / "gen")
        gen = tmp_path / "gen"
        out = tmp_path / "by-partition"
        res = runner.invoke(main, ["spark", "export", str(gen), "--out", str(out), "--partition-by", "partition"])
        assert res.exit_code == 0, res.output
        want = spark.read.format("kafkalog").load(str(gen)).count()
        assert _disk_rows(out) == want == int(res.stdout.split()[1]) > 3000
    # the commit check itself: a file gone, or rows that do not add up, fail before _SUCCESS would be written
    from kafkalog.spark import export_archive

    out = tmp_path / "checked"
    result = export_archive(spark, str(root / "orders-0"), str(out))
    dest = _Out(str(out), {})
    _check_committed(dest, result.files, result.rows)
    with pytest.raises(StorageError, match="export check failed: 146 records read, 145 written"):
        _check_committed(dest, [replace(f, rows=f.rows - 1) for f in result.files], result.rows)
    Path(result.files[0].path).unlink()
    with pytest.raises(StorageError, match="1 files written, 0 on disk"):
        _check_committed(dest, result.files, result.rows)


def test_timestamps_are_kafkas_milliseconds_as_a_long(spark, tmp_path: Path) -> None:
    """api.md: ``spark.read.parquet(out)`` gives the DataSource's schema, so ``timestamp`` is a plain INT64 (no
    timestamp annotation, which Spark would read as a timestamp) holding the value Kafka stored (-1 included)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import LongType

    from kafkalog.spark import export_archive, read_export

    root = GOLDEN / "logdir" / "golden-none-0"
    out = tmp_path / "export"
    result = export_archive(spark, str(root), str(out))
    (path,) = [f.path for f in result.files]
    col = pq.ParquetFile(path).schema.column(3)
    assert (col.name, col.physical_type, col.logical_type.type) == ("timestamp", "INT64", "NONE")
    table = pq.read_table(path)
    assert table.schema.field("timestamp").type == pa.int64()
    want = [r.timestamp for r in spark.read.format("kafkalog").load(str(root)).orderBy("offset").collect()]
    assert table.sort_by("offset").column("timestamp").to_pylist() == want
    assert spark.read.parquet(str(out)).schema["timestamp"].dataType == LongType()
    assert [r.timestamp for r in read_export(spark, str(out)).orderBy("offset").collect()] == want


def test_timestamp_type_timestamp_stores_parquet_timestamps_of_the_same_milliseconds(spark, tmp_path: Path) -> None:
    """Issue 44: engines expect a Parquet timestamp type. ``timestamp_type="timestamp"`` (CLI ``--timestamp-type
    timestamp``) stores TIMESTAMP(MILLIS, UTC) of Kafka's exact milliseconds; ``read_export`` reads it back as a
    Spark timestamp; ``_SUCCESS`` says which; a bad value is refused before anything is written."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from kafkalog_cli.main import main
    from pyspark.sql.types import TimestampType

    from kafkalog.errors import InvalidArgumentError
    from kafkalog.spark import export_archive, read_export

    root = GOLDEN / "logdir" / "golden-none-0"
    want = [r.timestamp for r in spark.read.format("kafkalog").load(str(root)).orderBy("offset").collect()]
    out = tmp_path / "export"
    result = export_archive(spark, str(root), str(out), timestamp_type="timestamp")
    (path,) = [f.path for f in result.files]
    col = pq.ParquetFile(path).schema.column(3)
    assert (col.name, col.physical_type, col.logical_type.type) == ("timestamp", "INT64", "TIMESTAMP")
    assert "timeUnit=milliseconds" in str(col.logical_type) and "isAdjustedToUTC=true" in str(col.logical_type)
    table = pq.read_table(path).sort_by("offset")
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == want
    assert spark.read.parquet(str(out)).schema["timestamp"].dataType == TimestampType()
    back = read_export(spark, str(out))
    assert back.schema["timestamp"].dataType == TimestampType() and back.columns == spark.read.format(
        "kafkalog"
    ).load(str(root)).columns
    got = back.selectExpr("unix_millis(timestamp) AS ms").orderBy("ms").collect()
    assert [r.ms for r in got] == sorted(want)
    assert json.loads((out / "_SUCCESS").read_text())["timestamp_type"] == "timestamp"
    with pytest.raises(InvalidArgumentError, match="timestamp_type must be long or timestamp"):
        export_archive(spark, str(root), str(tmp_path / "bad"), timestamp_type="ms")
    assert not (tmp_path / "bad").exists()
    res = CliRunner().invoke(main, ["spark", "export", str(root), "--out", str(tmp_path / "cli"), "--timestamp-type",
                                    "timestamp", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["timestamp_type"] == "timestamp"
    (cli_file,) = (tmp_path / "cli").rglob("part-*.parquet")
    assert pq.read_table(cli_file).schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    res = CliRunner().invoke(main, ["spark", "export", str(root), "--out", str(tmp_path / "c2"), "--timestamp-type",
                                    "date"])  # fmt: skip
    assert res.exit_code == 2 and "--timestamp-type" in res.output


def test_skip_reports_what_it_dropped_on_the_driver(spark, tmp_path: Path, caplog) -> None:
    """``onCorrupt=skip``: the offsets lost per segment in the result, the CLI's output and the driver's log."""
    import logging

    from kafkalog_cli.main import main

    from kafkalog.spark import export_archive

    root = _copy(tmp_path / "logdir", ["golden-none-0", "golden-gzip-0"])
    log = root / "golden-none-0" / "00000000000000000000.log"
    bad = load_manifest("manifests/golden-none-0.json")["segments"][0]["log"]["batches"][4]
    data = bytearray(log.read_bytes())
    data[bad["position"] + bad["sizeInBytes"] - 3] ^= 0xFF
    log.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="kafkalog.spark"):
        result = export_archive(spark, str(root), str(tmp_path / "out"), onCorrupt="skip")
    lost = f"offsets {bad['baseOffset']}-{bad['lastOffset']} lost"
    (msg,) = result.skipped
    assert msg["segment"] == str(log) and msg["lost_offsets"] == [[bad["baseOffset"], bad["lastOffset"]]]
    assert any(lost in r.getMessage() and str(log) in r.getMessage() for r in caplog.records)
    assert json.loads((tmp_path / "out" / "_SUCCESS").read_text())["skipped"][0]["lost_offsets"] == msg["lost_offsets"]
    res = CliRunner().invoke(main, ["spark", "export", str(root), "--out", str(tmp_path / "cli"),
                                    "--option", "onCorrupt=skip"])  # fmt: skip
    assert res.exit_code == 0 and lost in res.stdout and str(log) in res.stdout, res.output


def test_bad_options_are_refused_by_load_and_by_the_export(spark, tmp_path: Path) -> None:
    """The DataSource through Spark and ``spark export --option``: the one check, exit 2 naming the option."""
    from kafkalog_cli.main import main

    root = str(GOLDEN / "logdir" / "golden-none-0")
    for key, value, named in (("startingOffset", "5", "startingOffset"), ("verifyCrc", "maybe", "verifyCrc"),
                              ("startingOffsets", "-5", "startingOffsets")):  # fmt: skip
        with pytest.raises(Exception, match=named):
            spark.read.format("kafkalog").option(key, value).load(root).count()
        out = tmp_path / f"x-{key}"
        res = CliRunner().invoke(main, ["spark", "export", root, "--out", str(out), "--option", f"{key}={value}"])
        assert res.exit_code == 2 and res.stderr.startswith("kafkalog: error: ") and named in res.stderr, res.output
        assert not out.exists() and "Traceback" not in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Exception, match="no Kafka log files found"):
        spark.read.format("kafkalog").load(str(empty)).count()
