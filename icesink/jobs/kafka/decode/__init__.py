"""Decoding Kafka values into typed rows: JSON (schema inferred per batch, or fixed) and Debezium.

Use::

    from icesink.jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat
    decoding = DecodingSink(IcebergSink.from_options({...}), ValueDecoder(DecodeOptions()))
    kafka_df.writeStream.foreachBatch(decoding).option("checkpointLocation", ck).start()

Layout, in the order a micro-batch meets it:

- :mod:`icesink.jobs.kafka.decode.sink`: the ``foreachBatch`` function (decode, dead-letter, write);
- :mod:`icesink.jobs.kafka.decode.decoder`: driver side, two passes over the batch, one cache;
- :mod:`icesink.jobs.kafka.decode.task`: executor side, the ``mapInArrow`` functions, given a
  :mod:`icesink.jobs.kafka.decode.spec`, passing rows of :mod:`icesink.jobs.kafka.decode.passes`,
  undecodable values as :mod:`icesink.jobs.kafka.decode.rejected_rows`;
- :mod:`icesink.jobs.kafka.decode.chunk`: one Arrow batch of JSON values into Arrow tables;
- :mod:`icesink.jobs.kafka.decode.debezium`: change-event envelopes unwrapped;
- :mod:`icesink.jobs.kafka.decode.types`: types merged across a batch, integers narrowed, casts;
- :mod:`icesink.jobs.kafka.decode.rejects`: undecodable values to the dead-letter table;
- :mod:`icesink.jobs.kafka.decode.ddl`: a fixed schema given as a Spark DDL string.

The names below are imported on first use, so Spark's Python workers, which import
:mod:`icesink.jobs.kafka.decode.task`, do not load the driver's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icesink.jobs.kafka.decode.ddl import DdlError, parse_ddl
    from icesink.jobs.kafka.decode.decoder import DecodedBatch, DecodeOptions, ValueDecoder, ValueFormat
    from icesink.jobs.kafka.decode.sink import DecodingSink

_EXPORTS = {
    "DdlError": "icesink.jobs.kafka.decode.ddl",
    "parse_ddl": "icesink.jobs.kafka.decode.ddl",
    "DecodedBatch": "icesink.jobs.kafka.decode.decoder",
    "DecodeOptions": "icesink.jobs.kafka.decode.decoder",
    "ValueDecoder": "icesink.jobs.kafka.decode.decoder",
    "ValueFormat": "icesink.jobs.kafka.decode.decoder",
    "DecodingSink": "icesink.jobs.kafka.decode.sink",
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
        raise AttributeError(f"module 'icesink.jobs.kafka.decode' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
