"""Every exception kafkalog raises for bad data, bad arguments or failed storage.

One hierarchy in one place, so callers can catch ``KafkaLogError`` and know nothing else escapes for bad input.
Names follow Kafka's where a Kafka exception means the same thing (``CorruptRecordException``,
``KafkaStorageException``, ...). Errors that are also argument errors subclass ``ValueError`` so generic
callers keep working.
"""

from __future__ import annotations


class KafkaLogError(Exception):
    """Base of every kafkalog error."""


# --- record format -------------------------------------------------------------------------------------------


class CorruptRecordError(KafkaLogError):
    """Bytes that do not form a valid record batch: bad CRC, truncated, impossible lengths, bad varints."""

    def __init__(self, message: str, *, position: int | None = None) -> None:
        super().__init__(message if position is None else f"{message} (at position {position})")
        self.position = position


class InvalidRecordError(KafkaLogError):
    """A well-formed batch or record that breaks a rule (e.g. offsets going backwards, bad control record)."""


class ProducerFencedError(InvalidRecordError):
    """An append with a producer epoch older than the one already seen (Kafka's InvalidProducerEpochException)."""


class OutOfOrderSequenceError(InvalidRecordError):
    """An idempotent append whose first sequence does not follow the last one (Kafka's OutOfOrderSequenceException)."""


class InvalidTxnStateError(InvalidRecordError):
    """A non-transactional write by a producer with an open transaction."""


class TransactionCoordinatorFencedError(InvalidRecordError):
    """A transaction marker from an older coordinator epoch than already seen."""


class UnsupportedCompressionError(KafkaLogError):
    """A compression codec id kafkalog does not know (Kafka knows 0-4)."""


class UnsupportedMagicError(CorruptRecordError):
    """A magic byte other than 0, 1 or 2."""


# --- KRaft metadata and internal-topic records ------------------------------------------------------------------


class MessageDecodeError(KafkaLogError):
    """A Kafka message (a metadata, KRaft control, group coordinator or transaction log record) that cannot be read
    with its schema: the finding names what was expected and where, and the caller keeps going with the next one."""

    def __init__(self, message: str, *, offset: int | None = None, kafka_text: str | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        #: what Kafka's own reader says about the same bytes (kafka-dump-log.sh prints it), when it says something
        self.kafka_text = kafka_text


class UnknownRecordTypeError(MessageDecodeError):
    """A record type id (metadata api key, coordinator key version, control type) no table here describes."""

    def __init__(self, family: str, type_id: int, *, offset: int | None = None, kafka_text: str | None = None) -> None:
        super().__init__(f"unknown {family} record type {type_id}", offset=offset, kafka_text=kafka_text)
        self.family = family
        self.type_id = type_id


class UnsupportedRecordVersionError(MessageDecodeError):
    """A known record type at a version outside the versions its schema lists."""

    def __init__(self, name: str, version: int, *, offset: int | None = None) -> None:
        super().__init__(f"can't read version {version} of {name}", offset=offset)
        self.name = name
        self.version = version


class MalformedRecordError(MessageDecodeError):
    """Bytes that end early, carry an impossible length, a bad varint or leftover bytes after the message."""


class CorruptKraftSnapshotError(KafkaLogError):
    """A KRaft ``.checkpoint`` snapshot breaking the raft layer's rules (CRC, offsets, header/footer records)."""


# --- indexes, segments, logs -----------------------------------------------------------------------------------


class CorruptIndexError(KafkaLogError):
    """An index file failing its sanity check (Kafka's ``CorruptIndexException``)."""


class IndexFullError(KafkaLogError):
    """Appending to an index that has no free slot."""


class InvalidOffsetError(KafkaLogError):
    """An index or log append with an offset that does not move forward (Kafka's ``InvalidOffsetException``)."""


class OffsetOutOfRangeError(KafkaLogError):
    """A read or truncation at an offset the log does not hold."""


class LogSegmentOffsetOverflowError(KafkaLogError):
    """A batch whose offsets cannot be stored relative to the segment's base offset (i32)."""


class IndexOffsetOverflowError(LogSegmentOffsetOverflowError):
    """An index entry whose offset cannot be stored relative to the index's base offset (Kafka's
    ``IndexOffsetOverflowException``)."""


class IndexStateError(KafkaLogError, ValueError):
    """An index operation its current state forbids: writing a read-only index, shrinking it below its entries,
    reading a slot past the last entry, or a time-index timestamp going backwards (Kafka's
    ``IllegalArgumentException`` / ``IllegalStateException`` in the index classes)."""


class CleanerError(KafkaLogError):
    """A log the cleaner cannot clean (Kafka marks such a partition uncleanable): a batch larger than the I/O
    buffers may grow to, an empty legacy batch to keep, an offset map too small to make progress."""


class CleanerCorruptBatchError(CorruptRecordError):
    """A batch a cleaning pass read fails its CRC: the pass is refused before anything is rewritten (a rewrite
    would give the damaged records a fresh, valid CRC). Names the segment (``path``), the batch's ``position``
    and ``base_offset``/``last_offset``."""

    def __init__(self, path: str, position: int, base_offset: int, last_offset: int, stored: int,
                 computed: int) -> None:
        super().__init__(
            f"{path}: batch at offsets {base_offset}-{last_offset}, position {position}, fails its CRC (stored "
            f"{stored}, computed {computed}); cleaning would rewrite the damaged records under a valid CRC, so the "
            f"partition is not cleaned: run `kafkalog recover --salvage` on it first")
        self.position = position
        self.path = path
        self.base_offset = base_offset
        self.last_offset = last_offset


class LogCleaningAbortedError(CleanerError):
    """A pass stopped on request (pause, truncation, deletion, a move); what it wrote is removed."""


class CorruptSnapshotError(KafkaLogError):
    """A producer-state ``.snapshot`` file that fails its CRC or structure check."""


# --- checkpoints and metadata ----------------------------------------------------------------------------------


class CorruptCheckpointError(KafkaLogError):
    """A checkpoint or metadata file (offset checkpoint, leader-epoch, partition.metadata, meta.properties,
    clean-shutdown marker) whose content is malformed."""

    def __init__(self, message: str, *, path: object | None = None) -> None:
        super().__init__(message if path is None else f"{path}: {message}")
        self.path = path


class InconsistentMetadataError(KafkaLogError):
    """Log dirs that disagree on ``cluster.id`` / ``node.id``, or a topic id that does not match."""


# --- arguments --------------------------------------------------------------------------------------------------


class InvalidArgumentError(KafkaLogError, ValueError):
    """A bad argument value that no more specific class covers (also a ValueError, for generic callers)."""


class InvalidArgumentTypeError(KafkaLogError, TypeError):
    """An argument of a type the function does not take (also a TypeError, for generic callers)."""


class NothingToCheckError(InvalidArgumentError):
    """A path given to a check holds nothing Kafka wrote (an empty or mistyped dir): a check of nothing must not
    pass for a clean one. ``path`` is the path as given."""

    def __init__(self, message: str, *, path: object | None = None) -> None:
        super().__init__(message if path is None else f"{path}: {message}")
        self.path = path


# --- configuration and names ----------------------------------------------------------------------------------


class ConfigError(KafkaLogError, ValueError):
    """A bad configuration key or value."""


class InvalidTopicError(KafkaLogError, ValueError):
    """A topic name Kafka would refuse (also every name that could escape a log dir)."""


class InvalidPartitionDirError(KafkaLogError, ValueError):
    """A directory name that is not ``<topic>-<partition>`` (with an optional Kafka suffix)."""


# --- storage and log dirs --------------------------------------------------------------------------------------


class KafkaStorageError(KafkaLogError):
    """An I/O failure, or an operation on a log dir that is offline (Kafka's ``KafkaStorageException``)."""


def io_cause(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` when it is an I/O failure (an OSError, or a KafkaStorageError raised from one),
    else None: the one test every layer uses to decide whether an error should take a log dir offline."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, KafkaStorageError) and isinstance(exc.__cause__, OSError):
        return exc.__cause__
    return None


class LogMovedError(KafkaLogError):
    """The ``Log`` handle was replaced by a KIP-113 replica move (``alter_log_dir``): the partition is healthy and
    lives on in another log dir. Not a storage failure: fetch the log again (``LogManager.get_log``) and retry.
    ``new_dir`` is the partition dir the log moved to."""

    def __init__(self, message: str, *, new_dir: str | None = None) -> None:
        super().__init__(message)
        self.new_dir = new_dir


class ResourceExhaustedError(KafkaLogError):
    """The process ran out of descriptors, memory or mappings (EMFILE, ENFILE, ENOMEM, mmap's EAGAIN). Retriable:
    nothing is wrong with the disk and no log dir goes offline; the same call succeeds once handles are freed.
    Deliberately not a ``KafkaStorageError`` (which means the dir failed) nor an ``OSError`` (which every layer
    below the manager reads as an I/O failure). ``errno`` is the code behind it."""

    retriable = True

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class MoveRestartsExhaustedError(KafkaLogError):
    """A KIP-113 replica move gave up: the source changed under its copy (retention or a roll removed a file it
    was copying) more often than the move restarts. No dir failed and nothing was lost: the source keeps serving
    and the half-made copy is gone. Retriable: move again later (with retention or rolls less busy). Deliberately
    not a ``KafkaStorageError``, which means a dir failed."""

    retriable = True


class LogDirLockedError(KafkaStorageError):
    """Someone else holds the log dir's ``.lock``: a Kafka broker, a LogManager or a kafkalog writer (``path`` is
    the lock file, and the message starts with it)."""

    def __init__(self, message: str, *, path: object | None = None) -> None:
        super().__init__(message if path is None else f"{path}: {message}")
        self.path = path


class NoLiveLogDirsError(KafkaStorageError):
    """Every log dir is offline: the manager stops (Kafka halts the broker)."""


# --- tiered-storage objects --------------------------------------------------------------------------------------


class TieredConfigError(ConfigError):
    """A tiered-storage object that cannot be read with the RemoteStorageManager configuration given: none given
    for an encrypted object, a bad ``rsm.config`` file, a key file that is missing or holds no RSA private key, or
    no key pair for the id an object was encrypted with. Nothing is known about the object's bytes (exit 2)."""


class TieredKeyError(TieredConfigError):
    """The configured private key does not unwrap an object's data key (the wrong key pair for that bucket)."""


class CorruptTieredObjectError(KafkaLogError):
    """A tiered-storage object whose bytes are bad: a malformed ``.rsm-manifest``, a manifest that does not match
    its object (sizes, chunk index), or a chunk that fails its AES-GCM tag or does not decompress to its size.
    ``obj`` names the object; ``chunk`` and ``original_range`` (``(position, size)`` in the original segment) say
    which chunk, when one chunk is to blame."""

    def __init__(self, message: str, *, obj: str | None = None, chunk: int | None = None,
                 original_range: tuple[int, int] | None = None) -> None:  # fmt: skip
        super().__init__(message if obj is None else f"{obj}: {message}")
        self.obj = obj
        self.chunk = chunk
        self.original_range = original_range


# --- Iceberg tables ----------------------------------------------------------------------------------------------


class IcebergConfigError(ConfigError):
    """An Iceberg catalog that cannot be used: a bad ``--catalog-config`` file, a catalog that cannot be reached,
    a table name that is not ``NAMESPACE.TABLE``, or a table that is not kafkalog's (its schema, its isolation).
    The table is untouched (exit 2)."""


class IcebergCommitError(KafkaLogError):
    """A sync whose snapshot could not be committed: other writers kept committing to the table while it retried
    (the table holds none of this sync's rows; the next sync resumes from what the table says)."""
