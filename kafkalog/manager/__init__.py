"""Several log dirs owned as a Kafka broker's LogManager owns them (see ``docs/log-manager.md``)."""

from kafkalog.manager.failure_channel import LogDirFailureChannel
from kafkalog.manager.log_manager import BrokerConfig, LoadProgress, LogDirOfflineEvent, LogManager
from kafkalog.manager.sanity_checker import CheckStatus, PartitionCheckState, SanityCheckRun

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
