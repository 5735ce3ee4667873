"""LogConfig: Kafka's keys and defaults, Kafka-style parsing, ConfigError naming the key."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalog.errors import ConfigError
from kafkalog.log.config import LONG_MAX, LogConfig
from tests.conftest import GOLDEN, needs_golden


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == 7 * 24 * 3600 * 1000 == c.retention_ms
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10 * 1024 * 1024 == c.max_index_size
    assert c.index_interval_bytes == 4096
    assert c.retention_bytes == -1
    assert c.file_delete_delay_ms == 60000
    assert c.message_timestamp_type == "CreateTime" and not c.is_log_append_time
    assert c.flush_messages == LONG_MAX == c.flush_ms
    assert c.cleanup_policy == ("delete",) and c.delete and not c.compact
    assert c.max_message_bytes == 1048588
    assert c.preallocate is False and c.init_file_size() == 0
    assert c.min_insync_replicas == 1
    assert LogConfig.from_properties({}) == c == LogConfig.from_properties(None)


def test_str_and_int_values() -> None:
    c = LogConfig.from_properties(
        {
            "segment.bytes": "4096",
            "segment.ms": 3600000,
            "index.interval.bytes": " 0 ",
            "segment.index.bytes": "64",
            "retention.ms": "-1",
            "retention.bytes": -5,
            "message.timestamp.type": "LogAppendTime",
            "preallocate": "TRUE",
            "cleanup.policy": "compact, delete",
            "min.cleanable.dirty.ratio": "0.25",
            "unclean.leader.election.enable": True,
            "compression.type": "zstd",
        }
    )
    assert (c.segment_bytes, c.segment_ms, c.index_interval_bytes, c.segment_index_bytes) == (4096, 3600000, 0, 64)
    assert c.retention_ms == -1 and c.retention_bytes == -5
    assert c.is_log_append_time and c.preallocate and c.init_file_size() == 4096
    assert c.compact and c.delete and c.cleanup_policy == ("compact", "delete")
    assert c.min_cleanable_dirty_ratio == 0.25 and c.unclean_leader_election_enable
    assert c.overridden >= {"segment.bytes", "preallocate"}


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"segment.bytes": "13"}, "segment.bytes"),
        ({"segment.bytes": 0}, "segment.bytes"),
        ({"segment.bytes": "1GB"}, "segment.bytes"),
        ({"segment.bytes": 2**31}, "segment.bytes"),
        ({"segment.bytes": 1.5}, "segment.bytes"),
        ({"segment.bytes": True}, "segment.bytes"),
        ({"segment.bytes": ""}, "segment.bytes"),
        ({"segment.bytes": None}, "segment.bytes"),
        ({"segment.ms": 0}, "segment.ms"),
        ({"segment.ms": str(2**63)}, "segment.ms"),
        ({"segment.jitter.ms": -1}, "segment.jitter.ms"),
        ({"segment.index.bytes": 3}, "segment.index.bytes"),
        ({"index.interval.bytes": -1}, "index.interval.bytes"),
        ({"retention.ms": -2}, "retention.ms"),
        ({"retention.bytes": "x"}, "retention.bytes"),
        ({"file.delete.delay.ms": -1}, "file.delete.delay.ms"),
        ({"flush.messages": 0}, "flush.messages"),
        ({"message.timestamp.type": "createtime"}, "message.timestamp.type"),
        ({"message.timestamp.type": "NoTimestampType"}, "message.timestamp.type"),
        ({"message.timestamp.type": 0}, "message.timestamp.type"),
        ({"cleanup.policy": "remove"}, "cleanup.policy"),
        ({"cleanup.policy": ""}, "cleanup.policy"),
        ({"preallocate": "yes"}, "preallocate"),
        ({"preallocate": 1}, "preallocate"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"min.cleanable.dirty.ratio": "nan"}, "min.cleanable.dirty.ratio"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"compression.gzip.level": 0}, "compression.gzip.level"),
        ({"max.message.bytes": -1}, "max.message.bytes"),
        ({"min.insync.replicas": 0}, "min.insync.replicas"),
        ({"segment_bytes": 1}, "segment_bytes"),
        ({"no.such.key": 1}, "no.such.key"),
        ({"log.segment.bytes": 1}, "log.segment.bytes"),  # a broker key, not a topic key
    ],
)
def test_bad_keys_and_values(props: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as info:
        LogConfig.from_properties(props)
    assert isinstance(info.value, ValueError)


def test_compaction_lag_conflict() -> None:
    with pytest.raises(ConfigError, match="min.compaction.lag.ms"):
        LogConfig.from_properties({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="segment.bytes"):
        LogConfig(segment_bytes=1)
    assert LogConfig(cleanup_policy=["compact"]).cleanup_policy == ("compact",)  # type: ignore[arg-type]


def test_to_properties_round_trip() -> None:
    c = LogConfig.from_properties({"segment.bytes": 4096, "cleanup.policy": "delete,compact"})
    props = c.to_properties()
    assert props["segment.bytes"] == "4096" and props["cleanup.policy"] == "delete,compact"
    assert props["preallocate"] == "false" and "message.format.version" not in props
    assert LogConfig.from_properties(props) == c
    assert c.to_properties(only_overridden=True) == {"segment.bytes": "4096", "cleanup.policy": "delete,compact"}
    assert set(LogConfig().to_properties()) <= set(LogConfig.config_names())


def test_with_overrides_and_derived_values() -> None:
    base = LogConfig.from_properties({"segment.ms": 1000})
    c = base.with_overrides({"cleanup.policy": "compact", "max.compaction.lag.ms": 500})
    assert c.segment_ms == 1000 and c.max_segment_ms() == 500
    assert base.max_segment_ms() == 1000
    j = LogConfig.from_properties({"segment.jitter.ms": 100, "segment.ms": 50})
    assert all(0 <= j.random_segment_jitter() < 50 for _ in range(200))
    assert LogConfig().random_segment_jitter() == 0
    assert LogConfig().local_retention_ms_effective() == LogConfig().retention_ms


@needs_golden
def test_every_golden_topic_config_is_accepted() -> None:
    assert GOLDEN is not None
    seen = 0
    for scen in GOLDEN.rglob("SCENARIOS.json"):
        text = scen.read_text()

        def walk(o: object) -> None:
            nonlocal seen
            if isinstance(o, dict):
                for k, v in o.items():
                    if k == "topicConfig":
                        props = {kk: vv for kk, vv in v.items() if "|" not in str(vv)}
                        c = LogConfig.from_properties(props)
                        for kk, vv in props.items():
                            assert c.to_properties()[kk] == str(vv)
                        seen += 1
                    else:
                        walk(v)
            elif isinstance(o, list):
                for v in o:
                    walk(v)

        walk(json.loads(text))
    assert seen > 10


@given(
    st.integers(14, 2**31 - 1),
    st.integers(1, 2**63 - 1),
    st.integers(4, 2**31 - 1),
    st.integers(-1, 2**63 - 1),
    st.sampled_from(["CreateTime", "LogAppendTime"]),
)
def test_property_round_trip(segment_bytes: int, segment_ms: int, index_bytes: int, retention_ms: int, ts: str) -> None:
    props = {
        "segment.bytes": str(segment_bytes),
        "segment.ms": segment_ms,
        "segment.index.bytes": index_bytes,
        "retention.ms": str(retention_ms),
        "message.timestamp.type": ts,
    }
    c = LogConfig.from_properties(props)
    assert LogConfig.from_properties(c.to_properties()) == c
    assert (c.segment_bytes, c.segment_ms, c.segment_index_bytes, c.retention_ms) == (
        segment_bytes,
        segment_ms,
        index_bytes,
        retention_ms,
    )
