"""Several log dirs owned as a Kafka broker's LogManager owns them (see ``docs/log-manager.md``).

Names load on first access (:mod:`kafkalog._lazy`): ``kafkalog.manager.lock`` or ``.assignments`` import
without the whole manager.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkalog._lazy import lazy_exports

if TYPE_CHECKING:  # what __getattr__ below returns, for type checkers
    from kafkalog.manager.failure_channel import LogDirFailureChannel
    from kafkalog.manager.log_manager import BrokerConfig, LoadProgress, LogDirOfflineEvent, LogManager
    from kafkalog.manager.sanity_checker import CheckStatus, PartitionCheckState, SanityCheckRun

_EXPORTS = {  # module -> the names it defines
    "kafkalog.manager.log_manager": ("BrokerConfig", "LoadProgress", "LogDirOfflineEvent", "LogManager"),
    "kafkalog.manager.sanity_checker": ("CheckStatus", "PartitionCheckState", "SanityCheckRun"),
    "kafkalog.manager.failure_channel": ("LogDirFailureChannel",),
}

__all__ = [
    "BrokerConfig",
    "CheckStatus",
    "LoadProgress",
    "LogDirFailureChannel",
    "LogDirOfflineEvent",
    "LogManager",
    "PartitionCheckState",
    "SanityCheckRun",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
