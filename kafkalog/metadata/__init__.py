"""Kafka's internal topics and the KRaft metadata log: record schemas as tables, one codec, decoders, replay.

* :mod:`.schema`, :mod:`.codec`: the tables' shape and the one generic reader/writer (flexible versions, tagged
  fields, compact strings/arrays, UUIDs), Kafka's JSON converters.
* :mod:`.metadata_records`, :mod:`.kraft_records`, :mod:`.group_records`, :mod:`.txn_records`: the tables.
* :mod:`.decode`: one record of each topic; :mod:`.dump_text`: what ``kafka-dump-log.sh`` prints for it.
* :mod:`.snapshot`: KRaft snapshot names; :mod:`.image`: :func:`read_metadata_log`, the image a broker replays;
  :mod:`.internal_topics`: :func:`consumer_offsets`, :func:`transaction_states`;
  :mod:`.dir_assignments`: KIP-858 log-dir assignments checked against the image.

Apart from the log and the cleaner: ``kafkalog.records`` and ``kafkalog.log`` never import this package.
"""

from __future__ import annotations

from .decode import (
    ControlMessage,
    GroupRecord,
    MetadataRecord,
    TxnRecord,
    decode_control_record,
    decode_group_record,
    decode_metadata_record,
    decode_txn_record,
)
from .image import (
    LOST,
    MIGRATING,
    UNASSIGNED,
    BrokerImage,
    MetadataImage,
    PartitionImage,
    TopicImage,
    read_metadata_log,
)
from .internal_topics import TransactionState, consumer_offsets, transaction_states
from .snapshot import SnapshotId, list_snapshots, parse_snapshot_name

__all__ = [
    "LOST",
    "MIGRATING",
    "UNASSIGNED",
    "BrokerImage",
    "ControlMessage",
    "GroupRecord",
    "MetadataImage",
    "MetadataRecord",
    "PartitionImage",
    "SnapshotId",
    "TopicImage",
    "TransactionState",
    "TxnRecord",
    "consumer_offsets",
    "decode_control_record",
    "decode_group_record",
    "decode_metadata_record",
    "decode_txn_record",
    "list_snapshots",
    "parse_snapshot_name",
    "read_metadata_log",
    "transaction_states",
]
