"""The group coordinator's ``__consumer_offsets`` records (``group-coordinator/src/main/resources/common/message``).

A key is an int16 record type (which ``kafka-dump-log.sh`` prints as the key's ``type``) followed by the key
struct, never flexible; a value is an int16 value version followed by the value, and a null value is a tombstone.
Classic groups store each member's subscription and assignment as ``ConsumerProtocol`` bytes, also tabled here.
"""

from __future__ import annotations

from .schema import F, M, Message

__all__ = ["GROUP_KEYS", "GROUP_VALUES", "DUMPED_TYPES", "CONSUMER_SUBSCRIPTION", "CONSUMER_ASSIGNMENT"]

_GROUP = [F("Group", "string")]
_GROUP_ID = [F("GroupId", "string")]
_MEMBER = [F("GroupId", "string"), F("MemberId", "string")]
_TOPIC_METADATA = [F("Topics", "[]TopicMetadata", fields=[
    F("TopicId", "uuid"),
    F("TopicName", "string"),
    F("NumPartitions", "int32"),
    F("PartitionMetadata", "[]PartitionMetadata", fields=[F("Partition", "int32"), F("Racks", "[]string")]),
])]  # fmt: skip
_TOPIC_PARTITIONS = [F("TopicId", "uuid"), F("Partitions", "[]int32")]
_OFFSET_COMMIT_KEY = [F("Group", "string"), F("Topic", "string"), F("Partition", "int32")]

#: record type -> key table
GROUP_KEYS: dict[int, Message] = {
    0: M("OffsetCommitKey", 0, "0-1", "none", _OFFSET_COMMIT_KEY),
    1: M("OffsetCommitKey", 1, "0-1", "none", _OFFSET_COMMIT_KEY),
    2: M("GroupMetadataKey", 2, "2", "none", _GROUP),
    3: M("ConsumerGroupMetadataKey", 3, "3", "none", _GROUP_ID),
    4: M("ConsumerGroupPartitionMetadataKey", 4, "4", "none", _GROUP_ID),
    5: M("ConsumerGroupMemberMetadataKey", 5, "5", "none", _MEMBER),
    6: M("ConsumerGroupTargetAssignmentMetadataKey", 6, "6", "none", _GROUP_ID),
    7: M("ConsumerGroupTargetAssignmentMemberKey", 7, "7", "none", _MEMBER),
    8: M("ConsumerGroupCurrentMemberAssignmentKey", 8, "8", "none", _MEMBER),
    9: M("ShareGroupPartitionMetadataKey", 9, "9", "none", _GROUP_ID),
    10: M("ShareGroupMemberMetadataKey", 10, "10", "none", _MEMBER),
    11: M("ShareGroupMetadataKey", 11, "11", "none", _GROUP_ID),
    12: M("ShareGroupTargetAssignmentMetadataKey", 12, "12", "none", _GROUP_ID),
    13: M("ShareGroupTargetAssignmentMemberKey", 13, "13", "none", _MEMBER),
    14: M("ShareGroupCurrentMemberAssignmentKey", 14, "14", "none", _MEMBER),
    15: M("ShareGroupStatePartitionMetadataKey", 15, "15", "none", _GROUP_ID),
}

_OFFSET_COMMIT_VALUE = M("OffsetCommitValue", None, "0-4", "4+", [
    F("offset", "int64"),
    F("leaderEpoch", "int32", "3+", default=-1),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
    F("expireTimestamp", "int64", "1", default=-1),
])
_MEMBER_ASSIGNMENT = [
    F("MemberEpoch", "int32"),
    F("PreviousMemberEpoch", "int32"),
    F("State", "int8"),
    F("AssignedPartitions", "[]TopicPartitions", fields=_TOPIC_PARTITIONS),
]

#: record type -> value table
GROUP_VALUES: dict[int, Message] = {
    0: _OFFSET_COMMIT_VALUE,
    1: _OFFSET_COMMIT_VALUE,
    2: M("GroupMetadataValue", None, "0-4", "4+", [
        F("protocolType", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("currentStateTimestamp", "int64", "2+", default=-1),
        F("members", "[]MemberMetadata", fields=[
            F("memberId", "string"),
            F("groupInstanceId", "string", "3+", nullable="3+", default="null"),
            F("clientId", "string"),
            F("clientHost", "string"),
            F("rebalanceTimeout", "int32", "1+"),
            F("sessionTimeout", "int32"),
            F("subscription", "bytes"),
            F("assignment", "bytes"),
        ]),
    ]),
    3: M("ConsumerGroupMetadataValue", None, "0", "0+", [F("Epoch", "int32")]),
    4: M("ConsumerGroupPartitionMetadataValue", None, "0", "0+", _TOPIC_METADATA),
    5: M("ConsumerGroupMemberMetadataValue", None, "0", "0+", [
        F("InstanceId", "string", nullable="0+"),
        F("RackId", "string", nullable="0+"),
        F("ClientId", "string"),
        F("ClientHost", "string"),
        F("SubscribedTopicNames", "[]string"),
        F("SubscribedTopicRegex", "string", nullable="0+"),
        F("RebalanceTimeoutMs", "int32", default=-1),
        F("ServerAssignor", "string", nullable="0+"),
        F("ClassicMemberMetadata", "ClassicMemberMetadata", nullable="0+", tagged="0+", tag=0, default="null",
          fields=[
              F("SessionTimeoutMs", "int32"),
              F("SupportedProtocols", "[]ClassicProtocol", fields=[F("Name", "string"), F("Metadata", "bytes")]),
          ]),
    ]),
    6: M("ConsumerGroupTargetAssignmentMetadataValue", None, "0", "0+", [F("AssignmentEpoch", "int32")]),
    7: M("ConsumerGroupTargetAssignmentMemberValue", None, "0", "0+", [
        F("TopicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS),
    ]),
    8: M("ConsumerGroupCurrentMemberAssignmentValue", None, "0", "0+", [
        *_MEMBER_ASSIGNMENT,
        F("PartitionsPendingRevocation", "[]TopicPartitions", fields=_TOPIC_PARTITIONS),
    ]),
    9: M("ShareGroupPartitionMetadataValue", None, "0", "0+", _TOPIC_METADATA),
    10: M("ShareGroupMemberMetadataValue", None, "0", "0+", [
        F("RackId", "string", nullable="0+"),
        F("ClientId", "string"),
        F("ClientHost", "string"),
        F("SubscribedTopicNames", "[]string"),
    ]),
    11: M("ShareGroupMetadataValue", None, "0", "0+", [F("Epoch", "int32")]),
    12: M("ShareGroupTargetAssignmentMetadataValue", None, "0", "0+", [F("AssignmentEpoch", "int32")]),
    13: M("ShareGroupTargetAssignmentMemberValue", None, "0", "0+", [
        F("TopicPartitions", "[]TopicPartition", fields=_TOPIC_PARTITIONS),
    ]),
    14: M("ShareGroupCurrentMemberAssignmentValue", None, "0", "0+", _MEMBER_ASSIGNMENT),
    15: M("ShareGroupStatePartitionMetadataValue", None, "0", "0+", [
        F("InitializedTopics", "[]TopicPartitionsInfo", fields=[
            F("TopicId", "uuid"), F("TopicName", "string"), F("Partitions", "[]int32"),
        ]),
        F("DeletingTopics", "[]TopicInfo", fields=[F("TopicId", "uuid"), F("TopicName", "string")]),
    ]),
}  # fmt: skip

#: the record types kafka-dump-log.sh's offsets decoder prints; it reports any other as an unknown record type
DUMPED_TYPES = frozenset(GROUP_KEYS)

_CONSUMER_TOPIC_PARTITION = [F("Topic", "string"), F("Partitions", "[]int32")]

#: ConsumerProtocolSubscription / ConsumerProtocolAssignment, embedded in a classic consumer group's members
CONSUMER_SUBSCRIPTION: Message = M("ConsumerProtocolSubscription", None, "0-3", "none", [
    F("Topics", "[]string"),
    F("UserData", "bytes", nullable="0+", default="null"),
    F("OwnedPartitions", "[]TopicPartition", "1+", fields=_CONSUMER_TOPIC_PARTITION),
    F("GenerationId", "int32", "2+", default="-1"),
    F("RackId", "string", "3+", nullable="3+", default="null"),
])
CONSUMER_ASSIGNMENT: Message = M("ConsumerProtocolAssignment", None, "0-3", "none", [
    F("AssignedPartitions", "[]TopicPartition", fields=_CONSUMER_TOPIC_PARTITION),
    F("UserData", "bytes", nullable="0+", default="null"),
])
