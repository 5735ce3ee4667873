"""Every schema table, version by version, against the schemas compiled into Kafka's generated classes (the
oracle's jar): field names, order, types, nullability, flexible encodings and tags. ``tests/java/SchemaDump.java``
prints Kafka's side; :func:`_render` prints ours in the same shape."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from kafkalog.metadata.group_records import CONSUMER_ASSIGNMENT, CONSUMER_SUBSCRIPTION, GROUP_KEYS, GROUP_VALUES
from kafkalog.metadata.kraft_records import CONTROL_MESSAGES
from kafkalog.metadata.metadata_records import RECORD_TYPES
from kafkalog.metadata.schema import Field, Message
from kafkalog.metadata.txn_records import TXN_KEY, TXN_VALUE
from tests.oracle import ORACLE, java_executable

LIB = ORACLE.parent.parent / "lib" if ORACLE is not None else None
JAVAC = shutil.which("javac")
CLASSES = re.compile(
    r"^org/apache/kafka/(common/metadata/\w+Record|coordinator/group/generated/\w+(Key|Value)"
    r"|coordinator/transaction/generated/TransactionLog(Key|Value)"
    r"|common/message/(KRaftVersionRecord|SnapshotHeaderRecord|SnapshotFooterRecord|VotersRecord"
    r"|LeaderChangeMessage|ConsumerProtocolSubscription|ConsumerProtocolAssignment))\.class$"
)

pytestmark = pytest.mark.skipif(
    LIB is None or not (LIB / "kafka-oracle.jar").is_file() or JAVAC is None or java_executable() is None,
    reason="needs the Kafka oracle's jars and a JDK (javac) to read Kafka's compiled schemas",
)

_PRIMITIVE = {"int8": "INT8", "int16": "INT16", "uint16": "UINT16", "int32": "INT32", "int64": "INT64",
              "float64": "FLOAT64", "bool": "BOOLEAN", "uuid": "UUID"}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _type(f: Field, version: int, flexible: bool) -> str:
    if f.is_array:
        inner = "{" + _fields(f.fields, version, flexible) + "}" if f.is_struct else _prim(f.element, flexible, False)
        return ("?[]" if version in f.nullable else "[]") + inner
    if f.is_struct:  # Kafka's schema objects do not mark a nullable struct; its presence byte is checked on bytes
        return "{" + _fields(f.fields, version, flexible) + "}"
    return _prim(f.type, flexible, version in f.nullable)


def _prim(kind: str, flexible: bool, nullable: bool) -> str:
    if kind in ("string", "bytes"):
        return ("COMPACT_" if flexible else "") + ("NULLABLE_" if nullable else "") + kind.upper()
    return _PRIMITIVE[kind]


def _fields(fields: tuple[Field, ...], version: int, flexible: bool) -> str:
    out, tags = "", []
    for f in fields:
        if flexible and version in f.tagged:
            tags.append((f.tag, f))
        elif version in f.versions:
            out += f"{_snake(f.name)}={_type(f, version, flexible)},"
    if flexible:
        out += "TAGS<" + "".join(f"{t}:{_snake(f.name)}={_type(f, version, flexible)};" for t, f in sorted(tags)) + ">"
    return out


def _render(message: Message) -> list[str]:
    return [f"{message.name} v{v} {_fields(message.fields, v, v in message.flexible)}"
            for v in range(message.valid.low, message.valid.high + 1)]


def test_every_table_matches_kafkas_compiled_schema(tmp_path: Path) -> None:
    assert LIB is not None and JAVAC is not None
    jars = sorted(str(p) for p in LIB.glob("*.jar"))
    with zipfile.ZipFile(LIB / "kafka-oracle.jar") as jar:
        classes = sorted(n[:-6].replace("/", ".") for n in jar.namelist() if CLASSES.match(n))
    src = Path(__file__).parents[1] / "java" / "SchemaDump.java"
    classpath = ":".join(jars)
    subprocess.run([JAVAC, "-d", str(tmp_path), "-cp", classpath, str(src)], check=True, capture_output=True)
    run = subprocess.run([java_executable(), "-cp", f"{classpath}:{tmp_path}", "SchemaDump", *classes],
                         check=True, capture_output=True, text=True, timeout=120)
    kafka = set(run.stdout.splitlines())
    tables = [*RECORD_TYPES.values(), *CONTROL_MESSAGES.values(), *GROUP_VALUES.values(), TXN_KEY, TXN_VALUE,
              CONSUMER_SUBSCRIPTION, CONSUMER_ASSIGNMENT, *{m.name: m for m in GROUP_KEYS.values()}.values()]
    ours = {line for m in tables for line in _render(m)}
    assert len(kafka) > 80
    assert sorted(ours - kafka) == [] and sorted(kafka - ours) == []
