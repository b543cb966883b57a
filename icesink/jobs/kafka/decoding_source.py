"""``icesink-kafka-decoded``: the Kafka source that decodes values where it reads them.

The ``icesink-kafka`` source hands Spark raw records, and the decoding pass
(:func:`~icesink.jobs.kafka.decode.task.decode_function` through ``mapInArrow``) gets
them back from the JVM in another Python worker: every value crosses between Python and
the JVM twice before it is parsed. This source runs the same decoding inside the source's
own ``read()``, on the record batches as they come from the consumer, and yields what the
decoding pass yields (:data:`~icesink.jobs.kafka.decode.task.PASS_DDL`: per record batch
and type, the decoded rows as a compressed Arrow stream, and the undecodable values). The
values cross to the JVM once, already decoded and compressed, and
:meth:`~icesink.jobs.kafka.decode.decoder.ValueDecoder.decode` takes such a micro-batch
as it is.

The options are ``icesink-kafka``'s (offsets, rate limits and ``maxPartitions`` work the
same), plus ``decode.spec``: the :class:`~icesink.jobs.kafka.decode.task.DecodeSpec` as
JSON (:meth:`ValueDecoder.source_options
<icesink.jobs.kafka.decode.decoder.ValueDecoder.source_options>` gives it). Checkpoints
hold the same offsets as ``icesink-kafka``'s, so a query can move between the two.

This module joins the source and the decoding; neither of them imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

from icesink import ConfigError
from icesink.jobs.kafka.decode.spec import SPEC_OPTION, DecodeSpec
from icesink.jobs.kafka.decode.task import decode_function
from icesink.jobs.kafka.source.kafka import KafkaBatchReader, KafkaDataSource, KafkaStreamReader
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions, check_client_config
from icesink.jobs.kafka.source.kafka_range_reader import KAFKA_SCHEMA

DECODED_SOURCE_NAME = "icesink-kafka-decoded"
PASS_SCHEMA = StructType(
    [
        StructField("kind", StringType()),
        StructField("num_rows", LongType()),
        StructField("schema", BinaryType()),
        StructField("payload", BinaryType()),
    ]
)
""":data:`~icesink.jobs.kafka.decode.task.PASS_DDL` as a schema (parsing DDL needs a session)."""


def register_decoding_source(spark: Any) -> str:
    """Register the source with a SparkSession; the format name, ``icesink-kafka-decoded``."""
    spark.dataSource.register(DecodingKafkaDataSource)
    return DECODED_SOURCE_NAME


class DecodingKafkaDataSource(KafkaDataSource):
    """The ``icesink-kafka-decoded`` data source (see the module)."""

    @classmethod
    def name(cls) -> str:
        """The format name, ``icesink-kafka-decoded``."""
        return DECODED_SOURCE_NAME

    def schema(self) -> StructType:
        """The decoding pass's rows: ``kind, num_rows, schema, payload``."""
        kafka_options, _ = _split_options(self.options)
        check_client_config(KafkaSourceOptions.from_options(kafka_options))
        return PASS_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A reader for ``spark.readStream``."""
        kafka_options, spec = _split_options(self.options)
        options = KafkaSourceOptions.from_options(kafka_options, "stream")
        return KafkaStreamReader(options, KAFKA_SCHEMA, decode_function(spec))

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader for ``spark.read``."""
        kafka_options, spec = _split_options(self.options)
        options = KafkaSourceOptions.from_options(kafka_options, "batch")
        return KafkaBatchReader(options, KAFKA_SCHEMA, decode_function(spec))


def _split_options(options: Mapping[str, str]) -> tuple[dict[str, str], DecodeSpec]:
    """The Kafka options and the decode spec (a data source's option keys come in any case)."""
    kafka_options = {k: v for k, v in options.items() if k.lower() != SPEC_OPTION}
    text = next((v for k, v in options.items() if k.lower() == SPEC_OPTION), None)
    if text is None:
        raise ConfigError(
            f"the {DECODED_SOURCE_NAME} source needs the option {SPEC_OPTION!r}",
            hint="take the options of ValueDecoder(...).source_options(), or read raw records with "
            "format 'icesink-kafka'",
            option=SPEC_OPTION,
        )
    try:
        spec = DecodeSpec.from_json(text)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(
            f"option {SPEC_OPTION!r} has value {text[:200]!r}, which is not a decode spec: {e}",
            hint="take it from ValueDecoder(...).source_options()",
            option=SPEC_OPTION,
        ) from e
    return kafka_options, spec
