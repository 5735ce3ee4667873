"""The partition log: ``Log`` and its parts (config, loader, producer state, leader-epoch cache, segments).

Names load on first access (:mod:`kafkalog._lazy`), so that ``kafkalog.log.config`` and friends can be
imported on their own without pulling in the whole log (and its segment/index dependencies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from kafkalog.log.config import LogConfig
    from kafkalog.log.epoch_cache import EpochEntry, LeaderEpochFileCache
    from kafkalog.log.log import (
        EARLIEST_TIMESTAMP,
        LATEST_TIMESTAMP,
        MAX_TIMESTAMP,
        Log,
        LogAppendInfo,
        TimestampAndOffset,
    )
    from kafkalog.log.producer_state import ProducerStateEntry, ProducerStateManager
    from kafkalog.log.recovery_plan import RecoveryPlan, plan_recovery
    from kafkalog.log.salvage import SalvageReport, salvage_partition

_EXPORTS = {  # module -> the names it defines
    "kafkalog.log.config": ("LogConfig",),
    "kafkalog.log.epoch_cache": ("EpochEntry", "LeaderEpochFileCache"),
    "kafkalog.log.log": (
        "Log",
        "LogAppendInfo",
        "TimestampAndOffset",
        "EARLIEST_TIMESTAMP",
        "LATEST_TIMESTAMP",
        "MAX_TIMESTAMP",
    ),
    "kafkalog.log.recovery_plan": ("RecoveryPlan", "plan_recovery"),
    "kafkalog.log.salvage": ("SalvageReport", "salvage_partition"),
    "kafkalog.log.producer_state": ("ProducerStateEntry", "ProducerStateManager"),
}

__all__ = [
    "EARLIEST_TIMESTAMP",
    "EpochEntry",
    "LATEST_TIMESTAMP",
    "LeaderEpochFileCache",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "MAX_TIMESTAMP",
    "ProducerStateEntry",
    "ProducerStateManager",
    "RecoveryPlan",
    "SalvageReport",
    "TimestampAndOffset",
    "plan_recovery",
    "salvage_partition",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
