"""``CleanerConfig``: the broker's ``log.cleaner.*`` keys (Kafka's ``CleanerConfig``), with Kafka's defaults and
bounds, and the per-thread shares the cleaner derives from them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalog.errors import ConfigError
from kafkalog.limits import INT_MAX

__all__ = ["CLEANER_KEYS", "CleanerConfig"]


def _number(name: str, value: Any, kind: type, minimum: float | None) -> Any:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        n = kind(value.strip()) if isinstance(value, str) else kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}") from None
    if kind is float and math.isnan(n):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if minimum is not None and n < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {n}")
    return n


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {value!r}")


#: Kafka key -> (attribute, type, minimum)
CLEANER_KEYS: dict[str, tuple[str, type, float | None]] = {
    "log.cleaner.enable": ("enable", bool, None),
    "log.cleaner.threads": ("threads", int, 0),
    "log.cleaner.dedupe.buffer.size": ("dedupe_buffer_size", int, None),
    "log.cleaner.io.buffer.size": ("io_buffer_size", int, 0),
    "log.cleaner.io.buffer.load.factor": ("dedupe_buffer_load_factor", float, None),
    "log.cleaner.io.max.bytes.per.second": ("max_io_bytes_per_second", float, None),
    "log.cleaner.backoff.ms": ("backoff_ms", int, 0),
    "message.max.bytes": ("max_message_size", int, 0),
}


@dataclass(frozen=True)
class CleanerConfig:
    """The cleaner's broker settings (Kafka 4.0 defaults). Topic settings come from each log's ``LogConfig``."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1024 * 1024 + 12  # message.max.bytes: how far the I/O buffers may grow
    max_io_bytes_per_second: float = float("inf")
    backoff_ms: int = 15 * 1000

    @classmethod
    def from_properties(cls, props: Mapping[str, Any] | None = None) -> CleanerConfig:
        """Read the ``log.cleaner.*`` keys (and ``message.max.bytes``) of ``props``; other keys are ignored."""
        values: dict[str, Any] = {}
        for key, raw in (props or {}).items():
            spec = CLEANER_KEYS.get(key)
            if spec is None:
                continue
            attr, kind, minimum = spec
            values[attr] = _bool(key, raw) if kind is bool else _number(key, raw, kind, minimum)
        return cls(**values)

    @property
    def offset_map_memory(self) -> int:
        """One cleaner thread's share of the dedupe buffer (Kafka caps it at ``Int.MaxValue``)."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), INT_MAX)

    @property
    def cleaner_io_buffer_size(self) -> int:
        """The size of one thread's read and write buffers: half its share of ``log.cleaner.io.buffer.size``."""
        return self.io_buffer_size // max(self.threads, 1) // 2
