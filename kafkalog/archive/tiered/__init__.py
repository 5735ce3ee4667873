"""Tiered-storage (KIP-405) objects as RemoteStorageManagers write them to buckets.

* :mod:`.rsm_config`: the broker's ``rsm.config.*`` keys from a file (:func:`load_rsm_config`).
* :mod:`.manifest`: Aiven's ``.rsm-manifest`` (chunk index, where the indexes sit, compression, encryption).
* :mod:`.aiven`: :class:`AivenSegment`, byte ranges of the original segment from just the chunks that cover them,
  and :func:`materialize`, a segment written out as plain local files; :func:`open_ahead`, segments opened
  ahead of the one being read.

Kafka's own LocalTieredStorage layout stores segments untransformed and needs none of this.
"""

from __future__ import annotations

from kafkalog.archive.tiered.aiven import AivenSegment, ChunkDamage, is_aiven_item, materialize, open_ahead
from kafkalog.archive.tiered.manifest import ChunkIndex, SegmentManifest, parse_manifest
from kafkalog.archive.tiered.rsm_config import RsmConfig, as_rsm_config, load_rsm_config, rsm_config_from_properties

__all__ = [
    "AivenSegment",
    "ChunkDamage",
    "ChunkIndex",
    "RsmConfig",
    "as_rsm_config",
    "SegmentManifest",
    "is_aiven_item",
    "load_rsm_config",
    "materialize",
    "open_ahead",
    "parse_manifest",
    "rsm_config_from_properties",
]
