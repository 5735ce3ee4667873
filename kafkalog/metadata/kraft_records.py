"""KRaft's control records (``clients/src/main/resources/common/message``): leader change, snapshot header and
footer, kraft.version and voters, as tables.

A control record's key is ``ControlRecordType``'s (int16 version, int16 type); its value is the message itself,
whose first field ``Version`` (int16) is also the version it is read at, as ``ControlRecordUtils`` reads it.
"""

from __future__ import annotations

from ..records.control import ControlRecordType
from .schema import F, M, Message

__all__ = ["CONTROL_MESSAGES", "PRINTED_AS"]

_VOTER = [F("VoterId", "int32"), F("VoterDirectoryId", "uuid", "1+")]

CONTROL_MESSAGES: dict[ControlRecordType, Message] = {
    ControlRecordType.LEADER_CHANGE: M("LeaderChangeMessage", None, "0-1", "0+", [
        F("Version", "int16"),
        F("LeaderId", "int32"),
        F("Voters", "[]Voter", fields=_VOTER),
        F("GrantingVoters", "[]Voter", fields=_VOTER),
    ]),
    ControlRecordType.SNAPSHOT_HEADER: M("SnapshotHeaderRecord", None, "0", "0+", [
        F("Version", "int16"),
        F("LastContainedLogTimestamp", "int64"),
    ]),
    ControlRecordType.SNAPSHOT_FOOTER: M("SnapshotFooterRecord", None, "0", "0+", [F("Version", "int16")]),
    ControlRecordType.KRAFT_VERSION: M("KRaftVersionRecord", None, "0", "0+", [
        F("Version", "int16"),
        F("KRaftVersion", "int16"),
    ]),
    ControlRecordType.KRAFT_VOTERS: M("VotersRecord", None, "0", "0+", [
        F("Version", "int16"),
        F("Voters", "[]Voter", fields=[
            F("VoterId", "int32"),
            F("VoterDirectoryId", "uuid"),
            F("Endpoints", "[]Endpoint", fields=[F("Name", "string"), F("Host", "string"), F("Port", "uint16")]),
            F("KRaftVersionFeature", "KRaftVersionFeature", fields=[
                F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16"),
            ]),
        ]),
    ]),
}  # fmt: skip

#: the word kafka-dump-log.sh prints before the record's JSON (LEADER_CHANGE is printed as ``controlType: ...``)
PRINTED_AS: dict[ControlRecordType, str] = {
    ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeader",
    ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooter",
    ControlRecordType.KRAFT_VERSION: "KRaftVersion",
    ControlRecordType.KRAFT_VOTERS: "KRaftVoters",
}
