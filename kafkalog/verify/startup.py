"""What Kafka's ``LogManager`` does at startup with the dirs of a log dir, predicted offline.

Kafka 4's ``loadLogs`` lists every directory of a log dir (``File.isDirectory``: a symlink to a dir counts) but
``remote-log-index-cache`` and parses its name (``UnifiedLog.parseTopicPartitionName``); a name it cannot parse
throws, and the broker does not start ("Kafka's log directories (and children) should only contain Kafka topic
data"). Two current logs (or two ``-future`` logs) of one partition in the log dirs of one broker throw too
("Duplicate log directories ..."). Once the metadata image is known, a log whose topic id is missing, unknown
to the metadata log, or whose partition no longer lists the broker is stray (``isStrayKraftReplica``): it is
renamed ``-stray`` and no longer served. Malformed ``partition.metadata`` takes the whole log dir offline
(``PartitionMetadataFile.read`` raises ``KafkaStorageException``).

:func:`kafka_topic_partition` is Kafka's name rule (looser than :func:`kafkalog.names.parse_partition_dir`: Kafka
does not validate the topic); :func:`startup_problems` gives every refusal per log dir, each naming the dir and
what Kafka will do. ``verify`` reports them on its log-dir findings (exit 1); ``recover``, ``dirs describe`` and
``dirs assignments`` name the dirs Kafka refuses (:func:`refused_dirs`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from ..checkpoint.leader_epoch import read_leader_epoch_checkpoint
from ..checkpoint.meta_properties import read_meta_properties
from ..checkpoint.partition_metadata import read_partition_metadata
from ..errors import KafkaLogError
from ..limits import INT_MAX
from ..names import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX

if TYPE_CHECKING:
    from ..metadata.image import MetadataImage

__all__ = [
    "METADATA_TOPIC",
    "REFUSED_NAME",
    "kafka_topic_partition",
    "refused_dirs",
    "startup_problems",
]

#: the KRaft metadata log's topic: loaded by the raft layer, never by the LogManager
METADATA_TOPIC = "__cluster_metadata"
#: tiered storage's index cache: the one dir ``loadLogs`` skips by name
REMOTE_INDEX_CACHE = "remote-log-index-cache"
#: Kafka's words for a dir it refuses, after the dir's path
REFUSED_NAME = ("not in the form of topic-partition or topic-partition.uniqueId-delete|-future|-stray: Kafka's "
                "LogManager refuses to start (parseTopicPartitionName: a log dir may hold only Kafka topic data); "
                "move it out of the log dir")

_SUFFIXED = {suffix: re.compile(r"^(\S+)-(\S+)\.(\S+)" + suffix + "$")
             for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)}
_JAVA_INT = re.compile(r"^[+-]?[0-9]+$")


def kafka_topic_partition(name: str) -> tuple[str, int, str] | None:
    """(topic, partition, suffix) as Kafka's ``parseTopicPartitionName`` reads a dir name (suffix ``-delete``,
    ``-future``, ``-stray`` or ""), None where Kafka throws. Java's ``Integer.parseInt`` takes a sign and leading
    zeros, so ``t-007`` is partition 7 to Kafka."""
    if not name or "-" not in name:
        return None
    suffix = ""
    for s, pattern in _SUFFIXED.items():
        if name.endswith(s):
            if not pattern.match(name):
                return None
            suffix = s
    stem = name[: name.rfind(".")] if suffix else name
    index = stem.rfind("-")
    topic, digits = stem[:index], stem[index + 1 :]
    if not topic or not digits or not _JAVA_INT.match(digits) or not -(INT_MAX + 1) <= int(digits) <= INT_MAX:
        return None
    return topic, int(digits), suffix


def _listed_dirs(log_dir: str) -> list[str]:
    """The names ``loadLogs`` looks at: directories (symlinks followed, as ``File.isDirectory``), sorted."""
    try:
        names = sorted(os.listdir(log_dir))
    except OSError:
        return []
    return [n for n in names if n != REMOTE_INDEX_CACHE and os.path.isdir(os.path.join(log_dir, n))]


def refused_dirs(log_dir: str) -> list[str]:
    """The paths of the dirs of ``log_dir`` whose name Kafka cannot parse: any one stops the broker at startup."""
    return [os.path.join(log_dir, n) for n in _listed_dirs(log_dir) if kafka_topic_partition(n) is None]


def startup_problems(log_dirs: Iterable[str]) -> dict[str, list[str]]:
    """Every startup refusal Kafka would meet in ``log_dirs``, as problem lines per log dir: names Kafka cannot
    parse; duplicate current or future logs of one partition in the log dirs of one broker (same ``cluster.id``
    and ``node.id`` in ``meta.properties``; a dir with the ``directory.id`` of another is a copy of it, and a dir
    without ``meta.properties`` belongs to no known broker: neither is compared); a malformed ``partition.metadata``
    or ``leader-epoch-checkpoint`` in any dir Kafka loads (the log dir goes offline); and, when one of them holds
    ``__cluster_metadata-0``, logs the metadata image makes stray."""
    dirs = sorted(set(log_dirs))
    out: dict[str, list[str]] = {d: [] for d in dirs}
    metas = {d: _meta(d) for d in dirs}
    brokers: dict[tuple, list[str]] = {}  # (cluster.id, node.id) -> its log dirs; a dir alone when unknown
    for d in dirs:
        meta = metas[d]
        if meta is None or meta.node_id is None:
            brokers[("dir", d)] = [d]  # whose it is cannot be told: compared with no other dir
            continue
        group = brokers.setdefault((meta.cluster_id, meta.node_id), [])
        if meta.directory_id and any(metas[o].directory_id == meta.directory_id for o in group):
            brokers[("copy", d)] = [d]  # a copy of a dir already in the group, not a second dir of the broker
        else:
            group.append(d)
    for group in brokers.values():
        meta = metas[group[0]]
        node = None if meta is None else meta.node_id
        image = _metadata_image(group)  # the broker's own metadata log, when one of its log dirs holds it
        seen: dict[tuple[str, int, str], str] = {}
        for d in group:
            for name in _listed_dirs(d):
                path = os.path.join(d, name)
                parsed = kafka_topic_partition(name)
                if parsed is None:
                    out[d].append(f"{path}: {REFUSED_NAME}")
                    continue
                topic, partition, suffix = parsed
                if topic == METADATA_TOPIC:
                    continue  # the raft layer's, not the LogManager's
                topic_id = _loaded_files(path, out[d])  # every dir Kafka loads, -delete and -stray ones too
                if suffix in (DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX):
                    continue
                tp = (topic, partition, suffix)
                if tp in seen:
                    what = "future logs" if suffix else "logs"
                    out[d].append(f"{path}: duplicate {what} of {topic}-{partition} (also {seen[tp]}): Kafka's "
                                  "LogManager refuses to start (Duplicate log directories); delete the copy in the "
                                  "dir known to have failed recently")
                else:
                    seen[tp] = path
                if image is not None and node is not None:
                    from ..metadata.dir_assignments import stray_reason  # the record decoders: only with an image

                    stray = stray_reason(image.topics_by_id, node, topic_id, partition)
                    if stray is not None:
                        out[d].append(f"{path}: {stray}: Kafka marks the log stray at startup (renames it "
                                      f"{topic}-{partition}.<uuid>-stray) and no longer serves it")
                    elif image.topics_by_id[topic_id].name != topic:
                        out[d].append(f"{path}: its topic id {topic_id} is topic "
                                      f"{image.topics_by_id[topic_id].name!r} in the metadata log, not {topic!r}")
    return out


def _meta(log_dir: str) -> Any:
    """The log dir's ``MetaProperties``; None when absent or unreadable (``verify`` reports that itself)."""
    try:
        return read_meta_properties(os.path.join(log_dir, "meta.properties"))
    except (KafkaLogError, OSError, ValueError):
        return None


def _loaded_files(pdir: str, problems: list[str]) -> str | None:
    """The topic id of a dir Kafka loads; a malformed ``partition.metadata`` or ``leader-epoch-checkpoint`` is an
    ``IOException`` in Kafka's checkpoint reader, which takes the whole log dir offline."""
    topic_id = None
    for name, read in (("leader-epoch-checkpoint", read_leader_epoch_checkpoint),
                       ("partition.metadata", read_partition_metadata)):
        path = os.path.join(pdir, name)
        if not os.path.exists(path):
            continue
        try:
            value = read(path)
        except (KafkaLogError, OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}: Kafka takes the whole log dir offline at startup (KafkaStorageException "
                            f"reading {name})")
            continue
        if name == "partition.metadata":
            topic_id = value
    return topic_id


def _metadata_image(log_dirs: Collection[str]) -> MetadataImage | None:
    """The metadata image of the first ``__cluster_metadata-0`` among ``log_dirs`` (one broker's; None: none, or
    unreadable: then the stray rule cannot be predicted)."""
    from ..metadata.image import read_metadata_log  # the record decoders: loaded only when there is one

    for d in log_dirs:
        path = os.path.join(d, f"{METADATA_TOPIC}-0")
        if os.path.isdir(path):
            try:
                image = read_metadata_log(path)
            except (KafkaLogError, OSError, ValueError):
                return None
            return image if image.topics or image.brokers else None
    return None
