"""``__remote_log_metadata``'s records (KIP-405): what ``TopicBasedRemoteLogMetadataManager`` writes per segment.

The value is framed as ``__cluster_metadata``'s (``RemoteLogMetadataSerde`` is an ``AbstractApiMessageSerde``: frame
version, api key and version as unsigned varints, then the message); the key is null. One table per api key, as
Kafka's ``storage/src/main/resources/message/*Record.json`` define them.
"""

from __future__ import annotations

from .schema import F, M, Message

__all__ = ["REMOTE_LOG_RECORDS", "REMOTE_LOG_TYPE_NAMES", "SEGMENT_STATES", "PARTITION_DELETE_STATES"]

_TOPIC_ID_PARTITION = [F("Name", "string"), F("Id", "uuid"), F("Partition", "int32")]
_SEGMENT_ID = F("RemoteLogSegmentId", "RemoteLogSegmentIdEntry", fields=[
    F("TopicIdPartition", "TopicIdPartitionEntry", fields=_TOPIC_ID_PARTITION), F("Id", "uuid"),
])  # fmt: skip

SEGMENT_METADATA: Message = M("RemoteLogSegmentMetadataRecord", 0, "0-1", "0+", [
    _SEGMENT_ID,
    F("StartOffset", "int64"),
    F("EndOffset", "int64"),
    F("BrokerId", "int32"),
    F("MaxTimestampMs", "int64"),
    F("EventTimestampMs", "int64"),
    F("SegmentLeaderEpochs", "[]SegmentLeaderEpochEntry", fields=[F("LeaderEpoch", "int32"), F("Offset", "int64")]),
    F("SegmentSizeInBytes", "int32"),
    F("CustomMetadata", "bytes", nullable="0+", default="null"),
    F("RemoteLogSegmentState", "int8"),
    F("TxnIndexEmpty", "bool", tagged="0+", tag=0),
    F("BrokerLeaderEpoch", "int32", "1+", tagged="1+", tag=1),
])  # fmt: skip

SEGMENT_UPDATE: Message = M("RemoteLogSegmentMetadataUpdateRecord", 1, "0-1", "0+", [
    _SEGMENT_ID,
    F("BrokerId", "int32"),
    F("EventTimestampMs", "int64"),
    F("CustomMetadata", "bytes", nullable="0+", default="null"),
    F("RemoteLogSegmentState", "int8"),
    F("BrokerLeaderEpoch", "int32", "1+", tagged="1+", tag=0, default="-1"),
    F("EndOffset", "int64", "1+", tagged="1+", tag=1, default="-1"),
])  # fmt: skip

PARTITION_DELETE: Message = M("RemotePartitionDeleteMetadataRecord", 2, "0-1", "0+", [
    F("TopicIdPartition", "TopicIdPartitionEntry", fields=_TOPIC_ID_PARTITION),
    F("BrokerId", "int32"),
    F("EventTimestampMs", "int64"),
    F("RemotePartitionDeleteState", "int8"),
    F("BrokerLeaderEpoch", "int32", "1+", tagged="1+", tag=0),
    F("EndOffset", "int64", "1+", tagged="1+", tag=1),
])  # fmt: skip

REMOTE_LOG_RECORDS: dict[int, Message] = {m.api_key: m for m in (SEGMENT_METADATA, SEGMENT_UPDATE, PARTITION_DELETE)}
#: the names kafka-dump-log.sh's --remote-log-metadata-decoder gives the types (MetadataRecordType-style)
REMOTE_LOG_TYPE_NAMES: dict[int, str] = {
    0: "REMOTE_LOG_SEGMENT_METADATA_RECORD",
    1: "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD",
    2: "REMOTE_PARTITION_DELETE_METADATA_RECORD",
}
#: RemoteLogSegmentState ids
SEGMENT_STATES: dict[int, str] = {
    0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED", 2: "DELETE_SEGMENT_STARTED", 3: "DELETE_SEGMENT_FINISHED",
}
#: RemotePartitionDeleteState ids
PARTITION_DELETE_STATES: dict[int, str] = {
    0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED", 2: "DELETE_PARTITION_FINISHED",
}
