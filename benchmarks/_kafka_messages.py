"""The messages of the Kafka benchmarks: JSON events of about 1 KB, and a broker's topic of them."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from tests.support.tansu import TansuBroker

MESSAGE_BYTES = 1024
TOPIC = "bench-events"
EVENT_TYPES = ("view", "click", "add_to_cart", "remove", "checkout", "purchase", "refund", "search")
_WORDS = [
    "".join(random.Random(n).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(2 + n % 9))
    for n in range(2000)
]


def message(i: int, rng: random.Random) -> bytes:
    """One event of about :data:`MESSAGE_BYTES` bytes (deterministic for ``i`` and the generator).

    The free text is random words, so it compresses like real text, not like a repeated filler.
    """
    event: dict[str, Any] = {
        "event_id": i,
        "user_id": rng.randrange(1_000_000),
        "session_id": f"{rng.getrandbits(128):032x}",
        "type": EVENT_TYPES[i % len(EVENT_TYPES)],
        "ts": f"2024-05-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d}.{i % 1000:03d}Z",
        "amount": round(rng.random() * 500, 2),
        "currency": "EUR",
        "country": ("DE", "FR", "NL", "PL", "ES")[i % 5],
        "device": {"os": ("ios", "android", "web")[i % 3], "version": f"{i % 17}.{i % 5}", "model": "m" * 12},
        "tags": ["promo", "returning"] if i % 2 else ["new"],
        "page": f"/products/{rng.randrange(50_000)}",
        "referrer": "https://www.example.com/search?q=" + rng.choice(_WORDS),
        "text": "",
    }
    room = MESSAGE_BYTES - len(json.dumps(event, separators=(",", ":")))
    words: list[str] = []
    length = 0  # of the words so far, each with a space: the text is " ".join(words) cut to room
    while length < room:
        words.append(rng.choice(_WORDS))
        length += len(words[-1]) + 1
    event["text"] = " ".join(words)[: max(0, room)]
    return json.dumps(event, separators=(",", ":")).encode()


def produce(broker: TansuBroker, messages: int, partitions: int, topic: str = TOPIC, seed: int = 42) -> float:
    """Create ``topic`` and produce ``messages`` events, round robin over its partitions; seconds taken."""
    rng = random.Random(seed)
    broker.create_topic(topic, partitions)
    start = time.perf_counter()
    chunk = 50_000
    for first in range(0, messages, chunk):
        records = [
            (i % partitions, None, message(i, rng)) for i in range(first, min(messages, first + chunk))
        ]
        broker.produce(topic, records, linger_ms=20)
    return time.perf_counter() - start
