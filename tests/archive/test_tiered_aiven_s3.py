"""Aiven tiered-storage objects in a real S3 protocol server (moto's): the golden encrypted variant uploaded under a
``key.prefix`` as the plugin lays it out, read by the library, ``kafkalog verify`` and (one Spark test) the
DataSource and the validation job with the broker's RSM configuration."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from kafkalog_cli.main import main

from kafkalog.archive.tiered import AivenSegment, load_rsm_config
from tests.aiven_writer import AIVEN, golden_segments
from tests.conftest import needs_golden
from tests.s3server import MotoServer, upload_tree

pytest.importorskip("pyarrow")
pytest.importorskip("moto")

pytestmark = [needs_golden]

BUCKET = "tiered-bucket"
PREFIX = "tenant/a/"  # key.prefix: the plugin prepends it to every object key
VARIANT = "encrypted-zstd-chunk256"


@pytest.fixture(scope="module")
def s3():
    server = MotoServer().start()
    try:
        upload_tree(server.client(), AIVEN / "variants" / VARIANT / "remote", BUCKET, PREFIX.rstrip("/"))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def rsm_file(tmp_path_factory) -> Path:
    """The variant's configuration as a broker of this bucket has it (key.prefix set, keys next to it)."""
    d = tmp_path_factory.mktemp("conf")
    src = AIVEN / "variants" / VARIANT
    (d / "keys").mkdir()
    for name in ("private.pem", "public.pem"):
        (d / "keys" / name).write_bytes((src / "keys" / name).read_bytes())
    text = (src / "rsm.properties").read_text().replace("storage.root=remote", "")
    (d / "rsm.properties").write_text(text + f"key.prefix={PREFIX}\n")
    return d / "rsm.properties"


def test_ranged_read_and_verify_from_s3(s3, rsm_file: Path) -> None:
    result = json.loads((AIVEN / "variants" / VARIANT / "RESULT.json").read_text())
    seg = result["segments"][2]
    url = f"s3://{BUCKET}/{PREFIX}{seg['mainPath']}.log"
    s = AivenSegment.open(url, rsm=load_rsm_config(rsm_file), options=s3.options)
    want = next(f for f in seg["fetch"]["logSegment"] if f["call"] == "fetchLogSegment(md, 100, 700)")
    assert hashlib.sha256(s.read(100, 701)).hexdigest() == want["sha256"]
    opts = [a for k, v in s3.options.items() for a in ("--storage-option", f"{k}={v}")]
    res = CliRunner().invoke(main, ["verify", "--json", f"s3://{BUCKET}/{PREFIX.rstrip('/')}", "--rsm-config",
                                    str(rsm_file), *opts], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    segs = [json.loads(x) for x in res.stdout.splitlines() if '"type": "segment"' in x]
    assert len(segs) == 5 and {s["status"] for s in segs} == {"ok"} and sum(s["recordCount"] for s in segs) == 105
    assert all(s["path"].startswith(f"s3://{BUCKET}/{PREFIX}tiered-") for s in segs)
    res = CliRunner().invoke(main, ["dump", "--deep-iteration", "--json", url, "--rsm-config", str(rsm_file), *opts],
                             catch_exceptions=False)  # fmt: skip
    offsets = [json.loads(x)["offset"] for x in res.stdout.splitlines() if '"type": "record"' in x]
    assert res.exit_code == 0 and offsets == list(range(42, 61))  # the third segment, restored from the bucket


@pytest.mark.spark
def test_datasource_and_validation_job_read_the_bucket(spark, s3, rsm_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from kafkalog.records import read_record_columns
    from kafkalog.spark import validate_archive
    from kafkalog.spark.datasource import read_scan_metrics

    root = f"s3://{BUCKET}/{PREFIX.rstrip('/')}"
    df = spark.read.format("kafkalog").options(**s3.options).option("rsmConfig", str(rsm_file)).load(root)
    rows = sorted(df.select("offset", "timestamp", "key", "value").collect())
    want = []
    for seg in golden_segments():
        t = read_record_columns(seg.log).to_arrow(["offset", "timestamp", "key", "value"])
        want += list(zip(*(t[c].to_pylist() for c in ("offset", "timestamp", "key", "value")), strict=True))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in rows] == want and len(rows) == 105
    # a starting offset seeks with the offset index out of .indexes: fewer original bytes restored than the segments
    m2 = tmp_path / "m2"
    n = (spark.read.format("kafkalog").options(**s3.options).option("rsmConfig", str(rsm_file))
         .option("metricsDir", str(m2)).option("startingOffsets", "95").load(root).count())  # fmt: skip
    assert n == 10
    assert read_scan_metrics(str(m2))["log_bytes_fetched"] < sum(len(s.log) for s in golden_segments()[-1:])
    # timestamps resolve to offsets on the driver, out of the segments' .indexes and restored chunks
    lo_ts, hi_ts = want[30][1], want[80][1]
    lo = min(o for o, ts, _, _ in want if ts >= lo_ts)
    hi = min(o for o, ts, _, _ in want if ts >= hi_ts)
    ranged = (spark.read.format("kafkalog").options(**s3.options).option("rsmConfig", str(rsm_file))
              .options(startingTimestamp=str(lo_ts), endingTimestamp=str(hi_ts)).load(root))  # fmt: skip
    assert sorted(r.offset for r in ranged.select("offset").collect()) == list(range(lo, hi))
    report = validate_archive(spark, root, options=s3.options, rsm=str(rsm_file)).collect()
    assert len(report) == 5 and {r.status for r in report} == {"ok"} and {r.index_status for r in report} == {"ok"}
    # without the configuration: the query fails at planning naming the object, never zero rows
    with pytest.raises(Exception, match=r"TieredConfigError.*stored encrypted"):
        spark.read.format("kafkalog").options(**s3.options).load(root).count()
    # and the validation job reports every encrypted segment unreadable
    bare = validate_archive(spark, root, options=s3.options).collect()
    assert {r.status for r in bare} == {"unreadable"} and all("rsm-config" in r.error for r in bare)


def test_timestamps_resolve_to_offsets_from_the_bucket(s3, rsm_file: Path) -> None:
    """Kafka's ListOffsets rule over the encrypted tiered segments (``kafkalog.log.timestamp_offsets``): largest
    timestamps out of each segment's ``.indexes``, the search over restored chunks; the earliest offset whose
    timestamp is >= each probe, as the records say."""
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.log.timestamp_offsets import PartitionTimes
    from kafkalog.records import read_record_columns

    recs = []
    for seg in golden_segments():
        t = read_record_columns(seg.log).to_arrow(["offset", "timestamp"])
        recs += list(zip(t["offset"].to_pylist(), t["timestamp"].to_pylist(), strict=True))
    rsm = load_rsm_config(rsm_file)
    items = discover_segments(f"s3://{BUCKET}/{PREFIX.rstrip('/')}", options=s3.options, key_prefix=rsm.key_prefix)
    assert len(items) == 5
    times = PartitionTimes(items, s3.options, rsm)
    stamps = sorted({ts for _, ts in recs})
    for t in [stamps[0] - 1, *stamps[:: max(1, len(stamps) // 12)], stamps[-1], stamps[-1] + 1]:
        assert times.offset_for(t) == min((o for o, ts in recs if ts >= t), default=None), t


def test_plain_chunks_from_s3_are_read_into_place(s3, monkeypatch) -> None:
    """Untransformed chunks on S3 come through pyarrow's ``readinto`` into their slice of ``read``'s result (no
    bytes object per ranged GET), byte for byte what the plugin's fetches return; a cut object is the same typed
    error as from a local dir."""
    from kafkalog.archive import storage
    from kafkalog.errors import CorruptTieredObjectError

    upload_tree(s3.client(), AIVEN / "variants" / "plain-chunk512" / "remote", BUCKET, "plain")
    result = json.loads((AIVEN / "variants" / "plain-chunk512" / "RESULT.json").read_text())
    real_range = storage.read_range
    monkeypatch.setattr(storage, "read_range", lambda url, *a, **k: (_ for _ in ()).throw(AssertionError(url))
                        if url.endswith(".log") else real_range(url, *a, **k))  # fmt: skip
    for seg in result["segments"]:
        s = AivenSegment.open(f"s3://{BUCKET}/plain/{seg['mainPath']}.log", options=s3.options)
        for f in seg["fetch"]["logSegment"]:
            end = None if f["endPosition"] is None else f["endPosition"] + 1
            assert hashlib.sha256(s.read(f["startPosition"], end)).hexdigest() == f["sha256"], f["call"]
    seg = result["segments"][0]
    s = AivenSegment.open(f"s3://{BUCKET}/plain/{seg['mainPath']}.log", options=s3.options)
    s3.client().put_object(Bucket=BUCKET, Key=f"plain/{seg['mainPath']}.log", Body=b"x" * 700)
    with pytest.raises(CorruptTieredObjectError, match="object ends at byte 700"):
        s.read()


def test_segments_opened_ahead_send_each_log_head_once_beside_the_manifest_read(s3, rsm_file: Path) -> None:
    """Behind the latency proxy: each segment's ``.log`` is opened (HEAD) once, in flight with its manifest's
    read, and its prefetch and chunk reads are GETs alone; the bytes are the golden segments'."""
    from kafkalog.archive import storage
    from kafkalog.archive.discovery import discover_segments
    from kafkalog.archive.tiered import open_ahead
    from tests.latency_proxy import LatencyProxy

    rsm = load_rsm_config(rsm_file)
    with LatencyProxy(s3.port, delay_s=0.1) as proxy:
        opts = {**s3.options, "endpoint_url": proxy.endpoint}
        items = discover_segments(f"s3://{BUCKET}/{PREFIX}", options=opts, key_prefix=PREFIX)
        assert len(items) == 5
        proxy.trace = []
        got = [bytes(seg.read()) for _, seg, err in open_ahead(
            items, lambda i: AivenSegment.open(i.path, rsm=rsm, options=opts, object_size=i.size_bytes),
            options=opts)]  # fmt: skip
        trace, proxy.trace = proxy.trace, None
    assert got == [s.log for s in golden_segments()]
    for item in items:
        key = "/" + BUCKET + item.path.split(BUCKET, 1)[1][: -len(".log")]
        log = [r for r in trace if unquote(r.line.split()[1].split("?")[0]) == key + ".log"]
        manifest = [r for r in trace if unquote(r.line.split()[1].split("?")[0]) == key + ".rsm-manifest"]
        assert [r.kind for r in log].count("HEAD") == 1 and all(r.kind == "GET" for r in log[1:]), log
        assert log[0].kind == "HEAD" and len(log) >= 2
        # the .log's open was sent before the manifest's GET was answered: in flight together
        manifest_get = next(r for r in manifest if r.kind == "GET")
        assert log[0].arrived < manifest_get.answered
    assert not storage._KEPT  # released once the caller moved past each segment
