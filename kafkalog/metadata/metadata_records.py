"""The KRaft metadata records of Kafka 4.0 (``metadata/src/main/resources/common/metadata/*.json``) as tables.

Each record in ``__cluster_metadata`` is framed by ``MetadataRecordSerde``: unsigned varints frame version (1),
api key (the record type below) and record version, then the record itself. ``RECORD_TYPES`` maps the api key
to the record's table and to the name Kafka's ``MetadataRecordType`` prints (``PARTITION_RECORD``).
"""

from __future__ import annotations

from .schema import F, M, Message

__all__ = ["RECORD_TYPES", "TYPE_NAMES", "BY_NAME"]

_ENDPOINT = [F("Name", "string"), F("Host", "string"), F("Port", "uint16"), F("SecurityProtocol", "int16")]
_FEATURE = [F("Name", "string"), F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16")]

_RECORDS: list[tuple[str, Message]] = [
    ("REGISTER_BROKER_RECORD", M("RegisterBrokerRecord", 0, "0-3", "0+", [
        F("BrokerId", "int32"),
        F("IsMigratingZkBroker", "bool", "2+", default="false"),
        F("IncarnationId", "uuid"),
        F("BrokerEpoch", "int64"),
        F("EndPoints", "[]BrokerEndpoint", fields=_ENDPOINT),
        F("Features", "[]BrokerFeature", fields=_FEATURE),
        F("Rack", "string", nullable="0+"),
        F("Fenced", "bool", default="true"),
        F("InControlledShutdown", "bool", "1+", default="false"),
        F("LogDirs", "[]uuid", "3+", tagged="3+", tag=0),
    ])),
    ("UNREGISTER_BROKER_RECORD", M("UnregisterBrokerRecord", 1, "0", "0+", [
        F("BrokerId", "int32"), F("BrokerEpoch", "int64"),
    ])),
    ("TOPIC_RECORD", M("TopicRecord", 2, "0", "0+", [F("Name", "string"), F("TopicId", "uuid")])),
    ("PARTITION_RECORD", M("PartitionRecord", 3, "0-2", "0+", [
        F("PartitionId", "int32", default="-1"),
        F("TopicId", "uuid"),
        F("Replicas", "[]int32"),
        F("Isr", "[]int32"),
        F("RemovingReplicas", "[]int32"),
        F("AddingReplicas", "[]int32"),
        F("Leader", "int32", default="-1"),
        F("LeaderRecoveryState", "int8", tagged="0+", tag=0, default="0"),
        F("LeaderEpoch", "int32", default="-1"),
        F("PartitionEpoch", "int32", default="-1"),
        F("Directories", "[]uuid", "1+"),
        F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tagged="2+", tag=1, default="null"),
        F("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=2, default="null"),
    ])),
    ("CONFIG_RECORD", M("ConfigRecord", 4, "0", "0+", [
        F("ResourceType", "int8"), F("ResourceName", "string"), F("Name", "string"),
        F("Value", "string", nullable="0+"),
    ])),
    ("PARTITION_CHANGE_RECORD", M("PartitionChangeRecord", 5, "0-2", "0+", [
        F("PartitionId", "int32", default="-1"),
        F("TopicId", "uuid"),
        F("Isr", "[]int32", nullable="0+", tagged="0+", tag=0, default="null"),
        F("Leader", "int32", tagged="0+", tag=1, default="-2"),
        F("Replicas", "[]int32", nullable="0+", tagged="0+", tag=2, default="null"),
        F("RemovingReplicas", "[]int32", nullable="0+", tagged="0+", tag=3, default="null"),
        F("AddingReplicas", "[]int32", nullable="0+", tagged="0+", tag=4, default="null"),
        F("LeaderRecoveryState", "int8", tagged="0+", tag=5, default="-1"),
        F("Directories", "[]uuid", "1+", nullable="1+", tagged="1+", tag=8, default="null"),
        F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tagged="2+", tag=6, default="null"),
        F("LastKnownElr", "[]int32", "2+", nullable="2+", tagged="2+", tag=7, default="null"),
    ])),
    ("ACCESS_CONTROL_ENTRY_RECORD", M("AccessControlEntryRecord", 18, "0", "0+", [
        F("Id", "uuid"), F("ResourceType", "int8"), F("ResourceName", "string"), F("PatternType", "int8"),
        F("Principal", "string"), F("Host", "string"), F("Operation", "int8"), F("PermissionType", "int8"),
    ])),
    ("FENCE_BROKER_RECORD", M("FenceBrokerRecord", 7, "0", "0+", [F("Id", "int32"), F("Epoch", "int64")])),
    ("UNFENCE_BROKER_RECORD", M("UnfenceBrokerRecord", 8, "0", "0+", [F("Id", "int32"), F("Epoch", "int64")])),
    ("REMOVE_TOPIC_RECORD", M("RemoveTopicRecord", 9, "0", "0+", [F("TopicId", "uuid")])),
    ("DELEGATION_TOKEN_RECORD", M("DelegationTokenRecord", 10, "0", "0+", [
        F("Owner", "string"), F("Requester", "string"), F("Renewers", "[]string"), F("IssueTimestamp", "int64"),
        F("MaxTimestamp", "int64"), F("ExpirationTimestamp", "int64"), F("TokenId", "string"),
    ])),
    ("USER_SCRAM_CREDENTIAL_RECORD", M("UserScramCredentialRecord", 11, "0", "0+", [
        F("Name", "string"), F("Mechanism", "int8"), F("Salt", "bytes"), F("StoredKey", "bytes"),
        F("ServerKey", "bytes"), F("Iterations", "int32"),
    ])),
    ("FEATURE_LEVEL_RECORD", M("FeatureLevelRecord", 12, "0", "0+", [
        F("Name", "string"), F("FeatureLevel", "int16"),
    ])),
    ("CLIENT_QUOTA_RECORD", M("ClientQuotaRecord", 14, "0", "0+", [
        F("Entity", "[]EntityData", fields=[F("EntityType", "string"), F("EntityName", "string", nullable="0+")]),
        F("Key", "string"), F("Value", "float64"), F("Remove", "bool"),
    ])),
    ("PRODUCER_IDS_RECORD", M("ProducerIdsRecord", 15, "0", "0+", [
        F("BrokerId", "int32"), F("BrokerEpoch", "int64"), F("NextProducerId", "int64"),
    ])),
    ("BROKER_REGISTRATION_CHANGE_RECORD", M("BrokerRegistrationChangeRecord", 17, "0-2", "0+", [
        F("BrokerId", "int32"),
        F("BrokerEpoch", "int64"),
        F("Fenced", "int8", tagged="0+", tag=0, default="0"),
        F("InControlledShutdown", "int8", "1+", tagged="1+", tag=1, default="0"),
        F("LogDirs", "[]uuid", "2+", tagged="2+", tag=2),
    ])),
    ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", M("RemoveAccessControlEntryRecord", 19, "0", "0+", [F("Id", "uuid")])),
    ("NO_OP_RECORD", M("NoOpRecord", 20, "0", "0+", [])),
    ("ZK_MIGRATION_STATE_RECORD", M("ZkMigrationStateRecord", 21, "0", "0+", [F("ZkMigrationState", "int8")])),
    ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", M("RemoveUserScramCredentialRecord", 22, "0", "0+", [
        F("Name", "string"), F("Mechanism", "int8"),
    ])),
    ("BEGIN_TRANSACTION_RECORD", M("BeginTransactionRecord", 23, "0", "0+", [
        F("Name", "string", nullable="0+", tagged="0+", tag=0, default="null"),
    ])),
    ("END_TRANSACTION_RECORD", M("EndTransactionRecord", 24, "0", "0+", [])),
    ("ABORT_TRANSACTION_RECORD", M("AbortTransactionRecord", 25, "0", "0+", [
        F("Reason", "string", nullable="0+", tagged="0+", tag=0, default="null"),
    ])),
    ("REMOVE_DELEGATION_TOKEN_RECORD", M("RemoveDelegationTokenRecord", 26, "0", "0+", [F("TokenId", "string")])),
    ("REGISTER_CONTROLLER_RECORD", M("RegisterControllerRecord", 27, "0", "0+", [
        F("ControllerId", "int32"),
        F("IncarnationId", "uuid"),
        F("ZkMigrationReady", "bool"),
        F("EndPoints", "[]ControllerEndpoint", fields=_ENDPOINT),
        F("Features", "[]ControllerFeature", fields=_FEATURE),
    ])),
]  # fmt: skip

#: api key -> record table
RECORD_TYPES: dict[int, Message] = {m.api_key: m for _, m in _RECORDS}  # type: ignore[misc]
#: api key -> MetadataRecordType name
TYPE_NAMES: dict[int, str] = {m.api_key: name for name, m in _RECORDS}  # type: ignore[misc]
#: MetadataRecordType name -> record table
BY_NAME: dict[str, Message] = dict(_RECORDS)
