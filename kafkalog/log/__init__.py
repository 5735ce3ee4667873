"""The partition log: ``Log`` and its parts (config, loader, producer state, leader-epoch cache, segments).

Names are imported lazily so that ``kafkalog.log.config`` and friends can be imported on their own without
pulling in the whole log (and its segment/index dependencies).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LogConfig": "kafkalog.log.config",
    "EpochEntry": "kafkalog.log.epoch_cache",
    "LeaderEpochFileCache": "kafkalog.log.epoch_cache",
    "Log": "kafkalog.log.log",
    "LogAppendInfo": "kafkalog.log.log",
    "TimestampAndOffset": "kafkalog.log.log",
    "EARLIEST_TIMESTAMP": "kafkalog.log.log",
    "LATEST_TIMESTAMP": "kafkalog.log.log",
    "MAX_TIMESTAMP": "kafkalog.log.log",
    "RecoveryPlan": "kafkalog.log.recovery_plan",
    "plan_recovery": "kafkalog.log.recovery_plan",
    "SalvageReport": "kafkalog.log.salvage",
    "salvage_partition": "kafkalog.log.salvage",
    "ProducerStateEntry": "kafkalog.log.producer_state",
    "ProducerStateManager": "kafkalog.log.producer_state",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kafkalog.log' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
