"""JSON messages for the Kafka job's end-to-end tests, placed so that a position tells what it holds.

Message ``i`` of a :class:`MessageSet` goes to partition ``i % partitions`` at offset
``i // partitions`` (produced in order, with an idempotent producer), so every row of the
table and every dead letter is checked against the message it came from, not counted.
One message in ``malformed_every`` is malformed (broken JSON, not JSON, not UTF-8, not an
object, a tombstone). From ``evolve_at`` on, the messages gain a field (``email``) and
their ``counter`` outgrows 32 bits (int to long), so the table's schema must evolve.

:func:`check_exactly_once` reads the table and its dead-letter table back: every produced
message once in one of them, the malformed ones exactly in the dead-letter table.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from pyiceberg.catalog import Catalog

from tests.support.kafka_broker import KafkaBroker

Position = tuple[int, int]
"""(partition, offset) of a message."""
COUNTER_BASE_AFTER = 3_000_000_000  # beyond int


@dataclass(frozen=True)
class Produced:
    """What a topic holds: every message's position, and the malformed ones'."""

    topic: str
    positions: frozenset[Position]
    malformed: frozenset[Position]


@dataclass(frozen=True)
class MessageSet:
    """``count`` JSON messages over ``partitions`` partitions.

    Attributes:
        count: How many messages.
        partitions: Over how many partitions, message ``i`` in partition ``i % partitions``.
        malformed_every: Message ``i`` is malformed when ``i % malformed_every`` is its last value.
        evolve_at: From this message on, the new shape (``email``, a 64-bit ``counter``);
            ``None``: never.
    """

    count: int
    partitions: int
    malformed_every: int
    evolve_at: int | None = None

    def is_malformed(self, i: int) -> bool:
        return i % self.malformed_every == self.malformed_every - 1

    def value_of(self, i: int) -> bytes | None:
        """Message ``i``'s value: a JSON object, or one of five kinds of malformed value."""
        if self.is_malformed(i):
            kind = (i // self.malformed_every) % 5
            return [b'{"id": %d, "name": "cut' % i, b"not json", None, b'{"id": "\xff\xfe"}', b"[1, 2]"][kind]
        return json.dumps(self.event_of(i)).encode()

    def event_of(self, i: int) -> dict[str, Any]:
        """The fields of well-formed message ``i``, as the table's row holds them."""
        event: dict[str, Any] = {"id": i, "name": f"user-{i}", "amount": i / 8, "ts": "2024-05-01T12:00:00Z"}
        if self.evolve_at is None:
            return event
        if i < self.evolve_at:
            return {**event, "counter": i}
        return {**event, "counter": COUNTER_BASE_AFTER + i, "email": f"user-{i}@example.com"}

    def position_of(self, i: int) -> Position:
        return i % self.partitions, i // self.partitions

    def index_of(self, partition: int, offset: int) -> int:
        return offset * self.partitions + partition

    def produce(self, broker: KafkaBroker, topic: str, chunk: int = 50_000) -> Produced:
        """Create ``topic`` and produce every message to it, in order; what it then holds."""
        broker.create_topic(topic, self.partitions)
        for first in range(0, self.count, chunk):
            indexes = range(first, min(first + chunk, self.count))
            records = [(i % self.partitions, None, self.value_of(i)) for i in indexes]
            delivered = broker.produce(topic, records, linger_ms=20)
            assert delivered == [self.position_of(i) for i in indexes]
        malformed = {self.position_of(i) for i in range(self.count) if self.is_malformed(i)}
        positions = frozenset(map(self.position_of, range(self.count)))
        return Produced(topic, positions, frozenset(malformed))


def check_exactly_once(
    catalog: Catalog, table_name: str, messages: MessageSet, produced: Produced
) -> list[dict[str, Any]]:
    """Every produced message once in the table or the dead-letter table; returns the table's rows.

    Each row holds the fields of its message (and ``None`` for the fields its message lacked);
    each dead letter keeps its message's value (base64) and position.
    """
    rows = catalog.load_table(table_name).scan().to_arrow().to_pylist()
    dead = [
        json.loads(r["original_row"])
        for r in catalog.load_table(f"{table_name}__dlq").scan().to_arrow().to_pylist()
    ]
    in_table = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    in_dlq = Counter((d["_kafka_partition"], d["_kafka_offset"]) for d in dead)
    assert len(rows) + len(dead) == len(produced.positions)
    assert max(in_table.values()) == 1, "a message is in the table twice"
    assert not in_dlq or max(in_dlq.values()) == 1, "a message is in the dead-letter table twice"
    assert set(in_dlq) == produced.malformed
    assert set(in_table) | set(in_dlq) == produced.positions
    fields = {name for i in (0, messages.count - 1) for name in messages.event_of(i)}
    for row in rows:
        event = messages.event_of(messages.index_of(row["_kafka_partition"], row["_kafka_offset"]))
        assert {name: row[name] for name in fields} == {name: event.get(name) for name in fields}
    for letter in dead:
        raw = messages.value_of(messages.index_of(letter["_kafka_partition"], letter["_kafka_offset"]))
        assert letter["_kafka_value"] == (None if raw is None else base64.b64encode(raw).decode())
    return rows
