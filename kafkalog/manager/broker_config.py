"""``BrokerConfig``: the broker-level keys a LogManager reads (Kafka's KafkaConfig subset), parsed with Kafka's
defaults and bounds; log-level keys are ``kafkalog.log.config.LogConfig``'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafkalog.errors import ConfigError
from kafkalog.limits import LONG_MAX

__all__ = ["BrokerConfig"]


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _as_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    try:
        n = int(value.strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if minimum is not None and n < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {n}")
    return n


@dataclass(frozen=True)
class BrokerConfig:
    """The broker-level keys the manager reads, with Kafka's defaults (unknown broker keys are ignored)."""

    num_recovery_threads_per_data_dir: int = 2  # Kafka 4.0 default (was 1 before KIP-1030)
    sanity_check_all_logs: bool = True
    flush_checkpoint_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_ms: int = 60_000  # log.flush.start.offset.checkpoint.interval.ms
    flush_scheduler_ms: int = LONG_MAX  # log.flush.scheduler.interval.ms
    retention_check_ms: int = 300_000  # log.retention.check.interval.ms
    file_delete_delay_ms: int = 60_000  # file.delete.delay.ms / log.segment.delete.delay.ms
    background_threads: int = 10
    # kafkalog's own key (not Kafka's): how many of the recovery threads (all dirs together) load or close a
    # partition at once. CPython runs one thread's Python at a time; more than this only fight over the GIL
    # (kafkalog.io.cpu_gate); a thread waiting on fsync gives its slot away.
    recovery_concurrency: int = 1  # kafkalog.recovery.concurrency
    # kafkalog's own key: the most segment descriptors + index mappings the manager keeps open (its handle
    # cache); None = a quarter of the soft RLIMIT_NOFILE.
    max_open_files: int | None = None  # kafkalog.max.open.files
    node_id: int | None = None
    cluster_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None) -> BrokerConfig:
        p = dict(props or {})
        kw: dict[str, Any] = {}
        ints = {
            "num.recovery.threads.per.data.dir": ("num_recovery_threads_per_data_dir", 1),
            "log.flush.offset.checkpoint.interval.ms": ("flush_checkpoint_ms", 0),
            "log.flush.start.offset.checkpoint.interval.ms": ("flush_start_offset_checkpoint_ms", 0),
            "log.flush.scheduler.interval.ms": ("flush_scheduler_ms", 0),
            "log.retention.check.interval.ms": ("retention_check_ms", 1),
            "log.segment.delete.delay.ms": ("file_delete_delay_ms", 0),
            "file.delete.delay.ms": ("file_delete_delay_ms", 0),
            "background.threads": ("background_threads", 1),
            "kafkalog.recovery.concurrency": ("recovery_concurrency", 1),
            "kafkalog.max.open.files": ("max_open_files", 1),
        }
        for key, (attr, minimum) in ints.items():
            if key in p:
                kw[attr] = _as_int(key, p.pop(key), minimum=minimum)
        if "sanity.check.all.logs.enabled" in p:
            kw["sanity_check_all_logs"] = _as_bool("sanity.check.all.logs.enabled", p.pop("sanity.check.all.logs.enabled"))
        node = p.pop("node.id", None)
        broker = p.pop("broker.id", None)
        if node is not None and broker is not None and _as_int("node.id", node) != _as_int("broker.id", broker):
            raise ConfigError(f"node.id {node} and broker.id {broker} disagree")
        if node is not None or broker is not None:
            kw["node_id"] = _as_int("node.id", node if node is not None else broker)
        if "cluster.id" in p:
            cid = p.pop("cluster.id")
            if not isinstance(cid, str) or not cid:
                raise ConfigError(f"cluster.id must be a non-empty string, got {cid!r}")
            kw["cluster_id"] = cid
        return cls(**kw, extra=p)
