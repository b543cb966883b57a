"""What the driver sends a lookup task, and what the task sends back.

Small, frozen and picklable; each travels as one JSON string (keys as an Arrow IPC
stream in base64), so nothing of the driver's or the executor's objects crosses the wire.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from icesink.write.messages import _decode_value, _encode_value, decode_keys, encode_keys

_REPORT_KEY = "lookup_report"


@dataclass(frozen=True)
class LookupTask:
    """One data file to search for a batch's keys.

    Attributes:
        index: Number of the task in its plan (unique in the plan; names its delete file).
        data_file: Full URI of the data file.
        spec_id: Partition spec of the data file.
        partition: Its partition values (Iceberg representation, spec order).
        record_count: Rows in the data file.
        key_field_ids: Field ids of the key columns, in the order of ``keys``' columns.
        keys: The batch's keys that the file can hold (partition and column bounds allow them).
        delete_files: Position delete files that already apply to the data file.
        partition_keys: Every key of the batch in the file's partition, one table shared
            by the partition's tasks (``None``: not known). A Spark lookup ships it once
            per partition and the task searches the file for all of them: a key outside
            the file's bounds cannot be in it, so the result is the same, and the keys do
            not travel once per data file. Not part of the task's JSON or equality.
    """

    index: int
    data_file: str
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    key_field_ids: tuple[int, ...]
    keys: pa.Table
    delete_files: tuple[str, ...] = ()
    partition_keys: pa.Table | None = field(default=None, compare=False, repr=False)

    def to_json(self, key_set: str | None = None) -> str:
        """Encode for the wire; with ``key_set``, the keys are that shared key set's (not included)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "partition_keys"}
        data["partition"] = [_encode_value(v) for v in self.partition]
        if key_set is None:
            data["keys"] = encode_keys(self.keys)
        else:
            del data["keys"]
            data["key_set"] = key_set
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str, key_sets: Mapping[str, pa.Table] | None = None) -> LookupTask:
        """Decode what :meth:`to_json` produced (``key_sets``: the shared key sets by name)."""
        data = json.loads(text)
        data["partition"] = tuple(_decode_value(v) for v in data["partition"])
        data["key_field_ids"] = tuple(data["key_field_ids"])
        data["delete_files"] = tuple(data["delete_files"])
        if "key_set" in data:
            data["keys"] = (key_sets or {})[data.pop("key_set")]
        else:
            data["keys"] = decode_keys(data["keys"])
        return cls(**data)


@dataclass(frozen=True)
class LookupReport:
    """What lookup tasks did, summed.

    Attributes:
        files_read: Data files whose key columns were read.
        rows_read: Rows of key columns read (after row groups skipped by their statistics).
        rows_matched: Live rows found holding one of the batch's keys.
        row_groups_skipped: Row groups whose statistics excluded every key.
    """

    files_read: int = 0
    rows_read: int = 0
    rows_matched: int = 0
    row_groups_skipped: int = 0

    def __add__(self, other: LookupReport) -> LookupReport:
        return LookupReport(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_json(self) -> str:
        return json.dumps({_REPORT_KEY: [getattr(self, f.name) for f in fields(self)]})

    @staticmethod
    def is_report(text: str) -> bool:
        """Whether a task's output line is a report (else a delete file message)."""
        return text.startswith('{"' + _REPORT_KEY)

    @classmethod
    def from_json(cls, text: str) -> LookupReport:
        return cls(*json.loads(text)[_REPORT_KEY])
