"""The broker's RemoteStorageManager configuration for Aiven's tiered-storage plugin, as a file.

A broker configures the plugin with ``rsm.config.*`` keys; this module reads those keys with the prefix stripped
(``encryption.key.pairs.key1.private.key.file=...``) from a Java properties file, the way an operator copies them
out of ``server.properties``. Only what reading needs is kept: the object key prefix and the private keys of the
key ring. Key files are read when the configuration is loaded (relative paths against the file's own dir), so
a loaded :class:`RsmConfig` is self-contained: it pickles to Spark executors that cannot see the driver's files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kafkalog.checkpoint.meta_properties import parse_java_properties
from kafkalog.errors import KafkaLogError, TieredConfigError, TieredKeyError

__all__ = ["RsmConfig", "as_rsm_config", "load_rsm_config", "rsm_config_from_properties"]

#: the plugin's prefix on broker keys; accepted in the file too (copied from server.properties as they are)
BROKER_PREFIX = "rsm.config."
#: unwrapped data keys kept per configuration (32 bytes each, a key per segment)
DATA_KEY_CACHE = 4096


@dataclass
class RsmConfig:
    """What reading a bucket needs from the plugin's configuration.

    ``key_prefix`` is the plugin's ``key.prefix`` (prepended to every object key); ``private_keys`` maps each key
    pair id of ``encryption.key.pairs`` to its private key file's PEM bytes; ``active_key_id`` is
    ``encryption.key.pair.id`` (the pair new objects are written with). ``properties`` keeps every key given.
    """

    source: str = ""
    key_prefix: str = ""
    active_key_id: str | None = None
    private_keys: dict[str, bytes] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _data_keys: dict[tuple[str, bytes, bytes], bytes] = field(default_factory=dict, repr=False, compare=False)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_loaded"] = {}  # parsed key objects and unwrapped data keys stay in their process
        state["_data_keys"] = {}
        return state

    def private_key(self, key_id: str, *, obj: str) -> Any:
        """The RSA private key of pair ``key_id`` (parsed once), for the object ``obj`` that names it."""
        if key_id not in self.private_keys:
            known = ", ".join(sorted(self.private_keys)) or "none"
            raise TieredConfigError(f"{obj}: encrypted with key pair {key_id!r}, which {self.source or 'the rsm config'} "
                                    f"does not list (encryption.key.pairs: {known})")  # fmt: skip
        key = self._loaded.get(key_id)
        if key is None:
            from Crypto.PublicKey import RSA  # pycryptodome: OAEP with SHA3-512, which `cryptography` refuses

            try:
                key = RSA.import_key(self.private_keys[key_id])
            except (ValueError, IndexError, TypeError) as exc:
                raise TieredKeyError(f"{self.source}: encryption.key.pairs.{key_id}.private.key.file holds no RSA "
                                     f"private key: {exc}") from None  # fmt: skip
            if not key.has_private():
                raise TieredKeyError(f"{self.source}: encryption.key.pairs.{key_id}.private.key.file holds a public "
                                     "key, not the private one")  # fmt: skip
            self._loaded[key_id] = key
        return key

    def unwrap_data_key(self, key_id: str, wrapped: bytes, *, obj: str) -> bytes:
        """The AES data key ``wrapped`` with pair ``key_id``'s public key (RSA-OAEP, SHA3-512 for the digest and
        MGF1, as the plugin's ``OAEPWithSHA3-512AndMGF1Padding``), unwrapped with its private key. One RSA
        decryption costs ~3 ms of CPU, as much as restoring megabytes of chunks: the result is kept per (key pair,
        wrapped key, private key), so a segment opened again (a split of it, its indexes, a re-read) does not pay it
        twice. At most :data:`DATA_KEY_CACHE` keys, the oldest dropped first."""
        cache_key = (key_id, bytes(wrapped), self.private_keys.get(key_id, b""))
        data_key = self._data_keys.get(cache_key)
        if data_key is not None:
            return data_key
        key = self.private_key(key_id, obj=obj)
        from Crypto.Cipher import PKCS1_OAEP
        from Crypto.Hash import SHA3_512

        try:
            data_key = PKCS1_OAEP.new(key, hashAlgo=SHA3_512).decrypt(wrapped)
        except (ValueError, TypeError):
            raise TieredKeyError(f"{obj}: the private key of pair {key_id!r} in {self.source or 'the rsm config'} "
                                 "does not unwrap this segment's data key (wrong key pair?)") from None  # fmt: skip
        if len(data_key) not in (16, 24, 32):
            raise TieredKeyError(f"{obj}: the unwrapped data key is {len(data_key)} bytes, not an AES key")
        while len(self._data_keys) >= DATA_KEY_CACHE:
            try:
                del self._data_keys[next(iter(self._data_keys))]
            except (StopIteration, KeyError, RuntimeError):  # emptied or changed by another thread meanwhile
                break
        self._data_keys[cache_key] = data_key
        return data_key


def rsm_config_from_properties(props: dict[str, str], *, base_dir: str = ".", source: str = "") -> RsmConfig:
    """An :class:`RsmConfig` from the plugin's keys (``rsm.config.`` prefixes stripped); key files relative to
    ``base_dir``. Raises TieredConfigError for a key pair without a readable private key file."""
    keys = {(k[len(BROKER_PREFIX) :] if k.startswith(BROKER_PREFIX) else k): v.strip() for k, v in props.items()}
    label = source or "rsm config"
    ids = [i.strip() for i in keys.get("encryption.key.pairs", "").split(",") if i.strip()]
    active = keys.get("encryption.key.pair.id") or None
    if keys.get("encryption.enabled", "false").lower() == "true" and not ids:
        raise TieredConfigError(f"{label}: encryption.enabled=true but encryption.key.pairs lists no key pair")
    if active is not None and ids and active not in ids:
        raise TieredConfigError(f"{label}: encryption.key.pair.id {active!r} is not in encryption.key.pairs")
    private: dict[str, bytes] = {}
    for key_id in ids:
        name = f"encryption.key.pairs.{key_id}.private.key.file"
        path = keys.get(name)
        if not path:
            raise TieredConfigError(f"{label}: {name} is not set")
        full = path if os.path.isabs(path) else os.path.join(base_dir, path)
        try:
            with open(full, "rb") as f:
                private[key_id] = f.read(1 << 20)
        except OSError as exc:
            raise TieredConfigError(f"{label}: {name}: cannot read {full}: {exc.strerror or exc}") from None
    return RsmConfig(source=source, key_prefix=keys.get("key.prefix", ""), active_key_id=active,
                     private_keys=private, properties=keys)  # fmt: skip


def load_rsm_config(path: str | os.PathLike) -> RsmConfig:
    """Read the plugin's configuration file (the broker's ``rsm.config.*`` keys, prefix stripped or not).

    Raises TieredConfigError (a ConfigError: exit 2) naming the file when it cannot be read or parsed, or a key
    file it names cannot be read."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(1 << 20)
        text = raw.decode("latin-1")  # java.util.Properties.load(InputStream) reads ISO 8859-1
        props = parse_java_properties(text, path=path)
    except OSError as exc:
        raise TieredConfigError(f"{path}: cannot read the rsm config: {exc.strerror or exc}") from None
    except KafkaLogError as exc:
        raise TieredConfigError(f"{path}: not a properties file: {exc}") from None
    return rsm_config_from_properties(props, base_dir=os.path.dirname(os.path.abspath(path)), source=path)


def as_rsm_config(value: RsmConfig | str | os.PathLike | None) -> RsmConfig | None:
    """``value`` as an :class:`RsmConfig`: a loaded one as is, a path loaded, None as None (what the Spark entry
    points and the DataSource's ``rsmConfig`` option take)."""
    if value is None or isinstance(value, RsmConfig):
        return value
    return load_rsm_config(value)
