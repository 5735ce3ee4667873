"""``LogConfig``: Kafka's per-topic log settings, with Kafka's key names, defaults and validation.

Keys and defaults follow Kafka's ``LogConfig`` / ``TopicConfig`` (4.0 line). Two deliberate choices:
``segment.bytes`` keeps the pre-KIP-1030 minimum of 14 bytes (one legacy record's overhead) so the small segments
used by the golden files and by tests stay legal, and ``message.timestamp.after.max.ms`` keeps the 3.x default
(Long.MAX_VALUE), so replaying old archives never rejects their timestamps. ``message.format.version`` and
``message.downconversion.enable`` (removed in Kafka 4.0) are accepted and kept for old archives.

Values may be given as Python ints/bools/floats or as strings parsed the way Kafka's ``ConfigDef`` parses them
(trimmed; ``Integer.parseInt``/``Long.parseLong``; ``true``/``false`` in any case). An unknown key or a bad value
raises :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import ConfigError
from kafkalog.limits import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN

#: Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``: the smallest segment that can hold one message.
MIN_SEGMENT_BYTES = 14

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_INT_RE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One Kafka config key with its type, default and bound (also the cleaner's ``log.cleaner.*`` keys)."""

    name: str  # Kafka key
    attr: str  # Python attribute
    kind: str  # int, long, double, boolean, string, list, optional-string
    default: Any
    check: Callable[[Any], str | None] | None = None  # returns a reason when the value is invalid


def at_least(lo: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"value must be at least {lo}"


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"value must be between {lo} and {hi}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else f"value must be one of {', '.join(choices)}"


def _subset_of(*choices: str) -> Callable[[Any], str | None]:
    def check(v: tuple[str, ...]) -> str | None:
        if not v:
            return f"value must name at least one of {', '.join(choices)}"
        bad = [x for x in v if x not in choices]
        return f"unknown value(s) {bad}; valid: {', '.join(choices)}" if bad else None

    return check


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "value must be -1 (default) or between 1 and 9"


_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("segment.bytes", "segment_bytes", "int", 1024 * 1024 * 1024, at_least(MIN_SEGMENT_BYTES)),
    ConfigKey("segment.ms", "segment_ms", "long", 7 * 24 * 3600 * 1000, at_least(1)),
    ConfigKey("segment.jitter.ms", "segment_jitter_ms", "long", 0, at_least(0)),
    ConfigKey("segment.index.bytes", "segment_index_bytes", "int", 10 * 1024 * 1024, at_least(4)),
    ConfigKey("index.interval.bytes", "index_interval_bytes", "int", 4096, at_least(0)),
    ConfigKey("flush.messages", "flush_messages", "long", LONG_MAX, at_least(1)),
    ConfigKey("flush.ms", "flush_ms", "long", LONG_MAX, at_least(0)),
    ConfigKey("retention.bytes", "retention_bytes", "long", -1),
    ConfigKey("retention.ms", "retention_ms", "long", 7 * 24 * 3600 * 1000, at_least(-1)),
    ConfigKey("max.message.bytes", "max_message_bytes", "int", 1024 * 1024 + 12, at_least(0)),
    ConfigKey("file.delete.delay.ms", "file_delete_delay_ms", "long", 60000, at_least(0)),
    ConfigKey("delete.retention.ms", "delete_retention_ms", "long", 24 * 3600 * 1000, at_least(0)),
    ConfigKey("min.compaction.lag.ms", "min_compaction_lag_ms", "long", 0, at_least(0)),
    ConfigKey("max.compaction.lag.ms", "max_compaction_lag_ms", "long", LONG_MAX, at_least(1)),
    ConfigKey("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio", "double", 0.5, _between(0, 1)),
    ConfigKey(
        "cleanup.policy",
        "cleanup_policy",
        "list",
        (CLEANUP_POLICY_DELETE,),
        _subset_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
    ),
    ConfigKey("unclean.leader.election.enable", "unclean_leader_election_enable", "boolean", False),
    ConfigKey("min.insync.replicas", "min_insync_replicas", "int", 1, at_least(1)),
    ConfigKey("compression.type", "compression_type", "string", "producer", _one_of(*COMPRESSION_TYPES)),
    ConfigKey("compression.gzip.level", "compression_gzip_level", "int", -1, _gzip_level),
    ConfigKey("compression.lz4.level", "compression_lz4_level", "int", 9, _between(1, 17)),
    ConfigKey("compression.zstd.level", "compression_zstd_level", "int", 3, _between(-131072, 22)),
    ConfigKey("preallocate", "preallocate", "boolean", False),
    ConfigKey(
        "message.timestamp.type", "message_timestamp_type", "string", CREATE_TIME, _one_of(CREATE_TIME, LOG_APPEND_TIME)
    ),
    ConfigKey("message.timestamp.before.max.ms", "message_timestamp_before_max_ms", "long", LONG_MAX, at_least(0)),
    ConfigKey("message.timestamp.after.max.ms", "message_timestamp_after_max_ms", "long", LONG_MAX, at_least(0)),
    ConfigKey("leader.replication.throttled.replicas", "leader_replication_throttled_replicas", "list", ()),
    ConfigKey("follower.replication.throttled.replicas", "follower_replication_throttled_replicas", "list", ()),
    ConfigKey("remote.storage.enable", "remote_storage_enable", "boolean", False),
    ConfigKey("local.retention.ms", "local_retention_ms", "long", -2, at_least(-2)),
    ConfigKey("local.retention.bytes", "local_retention_bytes", "long", -2, at_least(-2)),
    ConfigKey("remote.log.copy.disable", "remote_log_copy_disable", "boolean", False),
    ConfigKey("remote.log.delete.on.disable", "remote_log_delete_on_disable", "boolean", False),
    # removed in Kafka 4.0, still found in the configs of old archives
    ConfigKey("message.format.version", "message_format_version", "optional-string", None),
    ConfigKey("message.downconversion.enable", "message_downconversion_enable", "boolean", True),
)
_BY_NAME = {k.name: k for k in _KEYS}
_BY_ATTR = {k.attr: k for k in _KEYS}
_INT_BOUNDS = {"int": (INT_MIN, INT_MAX), "long": (LONG_MIN, LONG_MAX)}


def parse_value(key: ConfigKey, raw: Any) -> Any:
    """One value, from a Python value or Kafka-style text, type-checked and validated."""
    kind = key.kind
    try:
        if kind in ("int", "long"):
            if isinstance(raw, str):
                text = raw.strip()
                if not _INT_RE.fullmatch(text):
                    raise ValueError(f"expected an integer, got {raw!r}")
                value: Any = int(text)
            elif isinstance(raw, int) and not isinstance(raw, bool):
                value = int(raw)
            else:
                raise ValueError(f"expected an integer, got {type(raw).__name__} {raw!r}")
            lo, hi = _INT_BOUNDS[kind]
            if not lo <= value <= hi:
                raise ValueError(f"{value} does not fit a Java {kind}")
        elif kind == "double":
            if isinstance(raw, str):
                value = float(raw.strip())
            elif isinstance(raw, (int, float)) and not isinstance(raw, bool):
                value = float(raw)
            else:
                raise ValueError(f"expected a number, got {type(raw).__name__}")
            if value != value:
                raise ValueError("NaN is not a valid value")
        elif kind == "boolean":
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                value = raw.strip().lower() == "true"
            else:
                raise ValueError(f"expected true or false, got {raw!r}")
        elif kind == "list":
            if isinstance(raw, str):
                value = tuple(x.strip() for x in raw.split(",")) if raw.strip() else ()
            elif isinstance(raw, (list, tuple)) and all(isinstance(x, str) for x in raw):
                value = tuple(x.strip() for x in raw)
            else:
                raise ValueError(f"expected a comma-separated list, got {raw!r}")
        elif kind == "string":
            if not isinstance(raw, str):
                raise ValueError(f"expected a string, got {type(raw).__name__}")
            value = raw.strip()
        else:  # optional-string
            if raw is not None and not isinstance(raw, str):
                raise ValueError(f"expected a string, got {type(raw).__name__}")
            value = raw.strip() if isinstance(raw, str) else None
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw!r} for configuration {key.name}: {e}") from None
    if key.check is not None:
        reason = key.check(value)
        if reason is not None:
            raise ConfigError(f"Invalid value {raw!r} for configuration {key.name}: {reason}")
    return value


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A topic's log settings; attribute ``segment_bytes`` is Kafka's ``segment.bytes`` and so on."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_bytes: int = -1
    retention_ms: int = 7 * 24 * 3600 * 1000
    max_message_bytes: int = 1024 * 1024 + 12
    file_delete_delay_ms: int = 60000
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    cleanup_policy: tuple[str, ...] = (CLEANUP_POLICY_DELETE,)
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    message_format_version: str | None = None
    message_downconversion_enable: bool = True
    #: Kafka keys given explicitly (Kafka's ``overriddenConfigs``); informational only.
    overridden: frozenset[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        # Direct construction gets the same checks as from_properties (values are normalised, e.g. list -> tuple).
        for key in _KEYS:
            value = getattr(self, key.attr)
            if key.kind == "list" and isinstance(value, list):
                value = tuple(value)
            object.__setattr__(self, key.attr, parse_value(key, value))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) > "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    # -- construction ---------------------------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None = None, *, defaults: LogConfig | None = None) -> LogConfig:
        """Kafka's ``LogConfig.fromProps``: ``props`` override ``defaults`` (Kafka's defaults when None)."""
        props = dict(props or {})
        values: dict[str, Any] = {}
        for name, raw in props.items():
            if not isinstance(name, str):
                raise ConfigError(f"Unknown topic config name: {name!r}")
            key = _BY_NAME.get(name)
            if key is None:
                raise ConfigError(f"Unknown topic config name: {name}")
            values[key.attr] = parse_value(key, raw)
        base = defaults if defaults is not None else cls()
        overridden = frozenset(props) | (defaults.overridden if defaults is not None else frozenset())
        return dataclasses.replace(base, **values, overridden=overridden)

    def with_overrides(self, props: Mapping[str, Any]) -> LogConfig:
        """A copy with some Kafka keys changed."""
        return LogConfig.from_properties(props, defaults=self)

    def to_properties(self, *, only_overridden: bool = False) -> dict[str, str]:
        """Kafka keys and text values (every key, or only those set explicitly)."""
        out = {}
        for key in _KEYS:
            if only_overridden and key.name not in self.overridden:
                continue
            value = getattr(self, key.attr)
            if value is None:
                continue
            out[key.name] = _to_text(value)
        return out

    @staticmethod
    def config_names() -> list[str]:
        """Every Kafka key this class understands, sorted."""
        return sorted(_BY_NAME)

    # -- derived values, as Kafka computes them ---------------------------------------------------------------------

    @property
    def compact(self) -> bool:
        """True when ``cleanup.policy`` includes ``compact``: the log cleaner keeps the last record per key."""
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True when ``cleanup.policy`` includes ``delete``: retention by time and size removes old segments."""
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def is_log_append_time(self) -> bool:
        """True when the broker stamps batches (``message.timestamp.type=LogAppendTime``)."""
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def max_index_size(self) -> int:
        """Kafka's name for ``segment.index.bytes``."""
        return self.segment_index_bytes

    def max_segment_ms(self) -> int:
        """Roll interval: ``segment.ms``, or ``max.compaction.lag.ms`` when compacted and smaller."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    def init_file_size(self) -> int:
        """Bytes to preallocate for a new ``.log`` file (``segment.bytes`` when ``preallocate``, else 0)."""
        return self.segment_bytes if self.preallocate else 0

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """Kafka's ``randomSegmentJitter``: a value in [0, min(jitter, segment.ms)) chosen once per segment."""
        if self.segment_jitter_ms == 0:
            return 0
        return (rng or random).randrange(min(self.segment_jitter_ms, self.segment_ms))

    def local_retention_ms_effective(self) -> int:
        """``local.retention.ms``, or ``retention.ms`` where it is -2 (Kafka's "same as retention")."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    def local_retention_bytes_effective(self) -> int:
        """``local.retention.bytes``, or ``retention.bytes`` where it is -2 (Kafka's "same as retention")."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes


def _check_fields_match() -> None:
    names = {f.name for f in dataclasses.fields(LogConfig)} - {"overridden"}
    assert names == set(_BY_ATTR), names ^ set(_BY_ATTR)
    for f in dataclasses.fields(LogConfig):
        if f.name in _BY_ATTR:
            assert f.default == _BY_ATTR[f.name].default, f.name


_check_fields_match()
