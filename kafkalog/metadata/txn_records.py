"""The transaction coordinator's ``__transaction_state`` records (``TransactionLogKey``/``TransactionLogValue``).

Key: int16 key version (0), then the key. Value: int16 value version (0, or 1 = flexible), then the value; a null
value is a tombstone (the transactional id expired).
"""

from __future__ import annotations

from .schema import F, M, Message

__all__ = ["TXN_KEY", "TXN_VALUE", "TXN_STATES"]

TXN_KEY: Message = M("TransactionLogKey", 0, "0", "none", [F("TransactionalId", "string")])

TXN_VALUE: Message = M("TransactionLogValue", 0, "0-1", "1+", [
    F("ProducerId", "int64"),
    F("PreviousProducerId", "int64", "1+", tagged="1+", tag=0, default="-1"),
    F("NextProducerId", "int64", "1+", tagged="1+", tag=1, default="-1"),
    F("ProducerEpoch", "int16"),
    F("TransactionTimeoutMs", "int32"),
    F("TransactionStatus", "int8"),
    F("TransactionPartitions", "[]PartitionsSchema", nullable="0+", fields=[
        F("Topic", "string"), F("PartitionIds", "[]int32"),
    ]),
    F("TransactionLastUpdateTimestampMs", "int64"),
    F("TransactionStartTimestampMs", "int64"),
    F("ClientTransactionVersion", "int16", "1+", tagged="1+", tag=2, default="0"),
])  # fmt: skip

#: TransactionState ids as the coordinator stores them, with the names it prints
TXN_STATES: dict[int, str] = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}
