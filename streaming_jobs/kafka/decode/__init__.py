"""Decoding Kafka values into typed rows: JSON (schema inferred per batch, or fixed) and Debezium.

Use::

    from streaming_jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat
    decoding = DecodingSink(IcebergSink.from_options({...}), ValueDecoder(DecodeOptions()))
    kafka_df.writeStream.foreachBatch(decoding).option("checkpointLocation", ck).start()

Layout, in the order a micro-batch meets it:

- :mod:`streaming_jobs.kafka.decode.sink`: the ``foreachBatch`` function (decode, dead-letter, write);
- :mod:`streaming_jobs.kafka.decode.decoder`: driver side, two passes over the batch, one cache;
- :mod:`streaming_jobs.kafka.decode.task`: executor side, the ``mapInArrow`` functions, given a
  :mod:`streaming_jobs.kafka.decode.spec`, passing rows of :mod:`streaming_jobs.kafka.decode.passes`,
  undecodable values as :mod:`streaming_jobs.kafka.decode.rejected_rows`;
- :mod:`streaming_jobs.kafka.decode.chunk`: one Arrow batch of JSON values into Arrow tables;
- :mod:`streaming_jobs.kafka.decode.debezium`: change-event envelopes unwrapped;
- :mod:`streaming_jobs.kafka.decode.types`: types merged across a batch, integers narrowed, casts;
- :mod:`streaming_jobs.kafka.decode.rejects`: undecodable values to the dead-letter table;
- :mod:`streaming_jobs.kafka.decode.ddl`: a fixed schema given as a Spark DDL string.

The names below are imported on first use, so Spark's Python workers, which import
:mod:`streaming_jobs.kafka.decode.task`, do not load the driver's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streaming_jobs.kafka.decode.ddl import DdlError, parse_ddl
    from streaming_jobs.kafka.decode.decoder import DecodedBatch, DecodeOptions, ValueDecoder, ValueFormat
    from streaming_jobs.kafka.decode.sink import DecodingSink

_EXPORTS = {
    "DdlError": "streaming_jobs.kafka.decode.ddl",
    "parse_ddl": "streaming_jobs.kafka.decode.ddl",
    "DecodedBatch": "streaming_jobs.kafka.decode.decoder",
    "DecodeOptions": "streaming_jobs.kafka.decode.decoder",
    "ValueDecoder": "streaming_jobs.kafka.decode.decoder",
    "ValueFormat": "streaming_jobs.kafka.decode.decoder",
    "DecodingSink": "streaming_jobs.kafka.decode.sink",
}
__all__ = [
    "DdlError",
    "DecodeOptions",
    "DecodedBatch",
    "DecodingSink",
    "ValueDecoder",
    "ValueFormat",
    "parse_ddl",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'streaming_jobs.kafka.decode' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
