"""Executor side of values framed for a schema registry (Confluent's wire format).

A framed value is one magic byte (0), the schema's id in the registry (4 bytes, big-endian),
then the encoded value. :func:`unframe` splits one Arrow array of values into their payloads,
at the same positions, and the reasons of the values that are not framed so or name a schema
id the registry does not know: those become dead letters (the chunk decoder sees an empty
payload in their place, and the decoding task puts their reason back). Only
pyarrow is imported here: the workers need nothing else.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pyarrow as pa

MAGIC_BYTE = 0
HEADER_BYTES = 5  # the magic byte and the schema id


def schema_id(value: bytes) -> int | None:
    """The schema id of a framed value; ``None`` when it is not framed (too short, another magic byte)."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(value[1:HEADER_BYTES], "big")


def unframe(
    values: pa.Array, known_ids: Collection[int], refused: Mapping[int, str] | None = None
) -> tuple[pa.Array, dict[int, str]]:
    """The payloads of framed ``values`` (same length, nulls kept) and the reasons of the unframed ones.

    Args:
        values: The Kafka values (binary).
        known_ids: The schema ids the registry holds a schema of this job's format for.
        refused: Schema ids whose schema the job cannot read, with the reason.

    Returns:
        The payloads, an empty payload in place of each rejected value, and the rejected
        values' positions with their reason.
    """
    payloads: list[bytes | None] = []
    reasons: dict[int, str] = {}
    for position, value in enumerate(values.to_pylist()):
        if value is None:
            payloads.append(None)
            continue
        payload, reason = _split(value, known_ids, refused or {})
        if reason is not None:
            reasons[position] = reason
        payloads.append(payload)
    return pa.array(payloads, pa.binary()), reasons


def _split(value: bytes, known_ids: Collection[int], refused: Mapping[int, str]) -> tuple[bytes, str | None]:
    if len(value) < HEADER_BYTES:
        return (
            b"",
            f"not framed for a schema registry: {len(value)} bytes, less than the {HEADER_BYTES}-byte header",
        )
    if value[0] != MAGIC_BYTE:
        return b"", (
            f"not framed for a schema registry: magic byte {value[0]}, not {MAGIC_BYTE} "
            "(the producer must use a schema registry serializer)"
        )
    found = int.from_bytes(value[1:HEADER_BYTES], "big")
    if found in refused:
        return b"", f"schema id {found} is not read: {refused[found]}"
    if found not in known_ids:
        return (
            b"",
            f"unknown schema id {found}: the schema registry holds no schema of this format with that id",
        )
    return value[HEADER_BYTES:], None
