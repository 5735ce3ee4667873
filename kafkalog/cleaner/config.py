"""``CleanerConfig``: the broker's ``log.cleaner.*`` keys (Kafka's ``CleanerConfig``), with Kafka's defaults and
bounds, and the per-thread shares the cleaner derives from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafkalog.limits import INT_MAX
from kafkalog.log.config import ConfigKey, at_least, parse_value  # one parser for every Kafka key

__all__ = ["CLEANER_KEYS", "CleanerConfig"]


#: the broker keys of the cleaner, with Kafka's types and bounds (parsed by ``LogConfig``'s one value parser)
CLEANER_KEYS: dict[str, ConfigKey] = {k.name: k for k in (
    ConfigKey("log.cleaner.enable", "enable", "boolean", True),
    ConfigKey("log.cleaner.threads", "threads", "int", 1, at_least(0)),
    ConfigKey("log.cleaner.dedupe.buffer.size", "dedupe_buffer_size", "long", 128 * 1024 * 1024),
    ConfigKey("log.cleaner.io.buffer.size", "io_buffer_size", "int", 512 * 1024, at_least(0)),
    ConfigKey("log.cleaner.io.buffer.load.factor", "dedupe_buffer_load_factor", "double", 0.9),
    ConfigKey("log.cleaner.io.max.bytes.per.second", "max_io_bytes_per_second", "double", float("inf")),
    ConfigKey("log.cleaner.backoff.ms", "backoff_ms", "long", 15 * 1000, at_least(0)),
    ConfigKey("message.max.bytes", "max_message_size", "int", 1024 * 1024 + 12, at_least(0)),
)}


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
        for name, raw in (props or {}).items():
            key = CLEANER_KEYS.get(name)
            if key is not None:
                values[key.attr] = parse_value(key, raw)
        return cls(**values)

    @property
    def offset_map_memory(self) -> int:
        """One cleaner thread's share of the dedupe buffer (Kafka caps it at ``Int.MaxValue``)."""
        return min(self.dedupe_buffer_size // max(self.threads, 1), INT_MAX)

    @property
    def cleaner_io_buffer_size(self) -> int:
        """The size of one thread's read and write buffers: half its share of ``log.cleaner.io.buffer.size``."""
        return self.io_buffer_size // max(self.threads, 1) // 2
