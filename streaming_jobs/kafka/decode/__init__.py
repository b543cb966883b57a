"""Decoding Kafka values into typed rows: JSON (schema inferred per batch, or fixed) and Debezium.

Use::

    from sink.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat
    decoding = DecodingSink(IcebergSink.from_options({...}), ValueDecoder(DecodeOptions()))
    kafka_df.writeStream.foreachBatch(decoding).option("checkpointLocation", ck).start()

Layout, in the order a micro-batch meets it:

- :mod:`sink.decode.sink`: the ``foreachBatch`` function (decode, dead-letter, write);
- :mod:`sink.decode.decoder`: driver side, two passes over the batch, one cache;
- :mod:`sink.decode.task`: executor side, the ``mapInArrow`` functions;
- :mod:`sink.decode.chunk`: one Arrow batch of JSON values into Arrow tables;
- :mod:`sink.decode.debezium`: change-event envelopes unwrapped;
- :mod:`sink.decode.types`: types merged across a batch, integers narrowed, casts;
- :mod:`sink.decode.rejects`: undecodable values to the dead-letter table;
- :mod:`sink.decode.ddl`: a fixed schema given as a Spark DDL string.

The names below are imported on first use, so Spark's Python workers, which import
:mod:`sink.decode.task`, do not load the driver's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sink.decode.ddl import DdlError, parse_ddl
    from sink.decode.decoder import DecodedBatch, DecodeOptions, ValueDecoder, ValueFormat
    from sink.decode.sink import DecodingSink

_EXPORTS = {
    "DdlError": "sink.decode.ddl",
    "parse_ddl": "sink.decode.ddl",
    "DecodedBatch": "sink.decode.decoder",
    "DecodeOptions": "sink.decode.decoder",
    "ValueDecoder": "sink.decode.decoder",
    "ValueFormat": "sink.decode.decoder",
    "DecodingSink": "sink.decode.sink",
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
        raise AttributeError(f"module 'sink.decode' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
