"""Driver side of decoding: a micro-batch of raw Kafka rows becomes typed rows and dead letters.

:meth:`ValueDecoder.decode` runs the decoding pass (:mod:`icesink.jobs.kafka.decode.task`) once,
caches its output (decoded Arrow streams, a few rows per Spark partition, and the raw
bytes of the values that could not be decoded), merges the types the executors found
into the batch's type, and returns two lazy DataFrames over the cache: the rows, of
that type, and the dead letters. Kafka is read once; values are parsed once.

With a fixed schema (``value.schema``) only its fields are kept, and each takes the
declared type where the values convert without loss (``int`` values into a ``bigint``
field); otherwise the values keep their own type and the sink converts them to the
table's, or dead-letters the rows it cannot convert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_type

from icesink import ConfigError
from icesink.jobs.kafka.decode import debezium
from icesink.jobs.kafka.decode.formats import registry_values
from icesink.jobs.kafka.decode.passes import DATA, PASS_COLUMNS, PASS_DDL, REJECTED, SKIPPED, WRITTEN
from icesink.jobs.kafka.decode.registry import SchemaRegistry
from icesink.jobs.kafka.decode.registry_values import mark_renamed
from icesink.jobs.kafka.decode.rejected_rows import DEAD_LETTER_DDL, dead_letter_function
from icesink.jobs.kafka.decode.spec import (
    KAFKA_COLUMNS,
    KAFKA_INPUT_COLUMNS,
    SPEC_OPTION,
    TIMESTAMP_COLUMN,
    DecodeSpec,
)
from icesink.jobs.kafka.decode.task import conform_function, decode_function
from icesink.jobs.kafka.decode.types import merge_schemas, without_nulls

logger = logging.getLogger(__name__)


class ValueFormat(StrEnum):
    """How Kafka values are encoded (``value.format``)."""

    JSON = "json"  # one JSON object per value
    DEBEZIUM_JSON = "debezium-json"  # a Debezium change event, JSON converter, schemas on or off
    AVRO = "avro"  # Avro framed for a schema registry (Confluent's wire format)
    DEBEZIUM_AVRO = "debezium-avro"  # a Debezium change event, Avro converter with a schema registry
    JSON_SCHEMA = "json-schema"  # JSON framed for a schema registry, with a JSON Schema
    PROTOBUF = "protobuf"  # Protobuf framed for a schema registry (with Confluent's message indexes)

    @property
    def debezium(self) -> bool:
        """Whether the values are Debezium change events."""
        return self in (ValueFormat.DEBEZIUM_JSON, ValueFormat.DEBEZIUM_AVRO)

    @property
    def framed(self) -> bool:
        """Whether the values are framed for a schema registry (``value.schema-registry`` is needed)."""
        return self in (
            ValueFormat.AVRO,
            ValueFormat.DEBEZIUM_AVRO,
            ValueFormat.JSON_SCHEMA,
            ValueFormat.PROTOBUF,
        )


@dataclass(frozen=True)
class DecodeOptions:
    """How values are decoded.

    Attributes:
        format: The values' encoding.
        fixed_schema: The fields to keep and their types; ``None`` infers both per batch.
        metadata_columns: Add ``_kafka_topic``, ``_kafka_partition``, ``_kafka_offset``
            and ``_kafka_timestamp`` to every row.
        registry: Where framed values' schemas are (the registry formats need one).
    """

    format: ValueFormat = ValueFormat.JSON
    fixed_schema: st.StructType | None = None
    metadata_columns: bool = True
    registry: SchemaRegistry | None = None


@dataclass
class DecodedBatch:
    """One decoded micro-batch; call :meth:`release` when done with it.

    Attributes:
        rows: The decoded rows (lazy, over the cache).
        dead_letters: The values that could not be decoded: ``column``, ``reason``,
            ``value`` and ``original_row``, as the dead-letter table takes them (lazy).
        input_rows: Kafka records in the batch.
        rejected_rows: Records in ``dead_letters``.
        has_values: Whether any value was decoded (else ``rows`` has only what options add).
        decoded_in_source: Whether the source decoded the values as it read them (its rows
            were the decoding pass's, a few per task, not one per record).
        payloads: The decoded Arrow streams (lazy, over the cache): ``rows`` is
            ``payloads.mapInArrow(conform, <rows' schema>)``.
        conform: The function that makes ``rows`` of ``payloads``.
        written: The messages of the files the source's tasks wrote (with a plan of the
            sink's, :mod:`icesink.jobs.kafka.decode.written`); ``rows`` are the rest.
        written_rows: The rows in those files (counted in ``input_rows``).
        skipped_rows: Debezium tombstones, skipped (counted in ``input_rows``).
    """

    rows: DataFrame
    dead_letters: DataFrame
    input_rows: int
    rejected_rows: int
    has_values: bool
    decoded_in_source: bool
    payloads: DataFrame
    conform: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
    _cache: DataFrame
    written: list[str]
    written_rows: int
    skipped_rows: int = 0

    def release(self) -> None:
        """Drop the cached decoding output."""
        self._cache.unpersist()


class ValueDecoder:
    """Decodes the ``value`` column of Kafka micro-batches (Spark's Kafka schema) into typed rows.

    Args:
        options: How values are decoded.
    """

    def __init__(self, options: DecodeOptions) -> None:
        self.options = options
        self._registry = registry_values(options.format, options.registry)
        self._spec = DecodeSpec(
            debezium=options.format.debezium,
            fixed_schema=options.fixed_schema,
            metadata_columns=options.metadata_columns,
            framing=None if self._registry is None else self._registry.framing,
        )
        self._fixed_arrow = (
            pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in options.fixed_schema.fields])
            if options.fixed_schema is not None
            else None
        )

    @property
    def metadata_columns(self) -> bool:
        """Whether every row gets the ``_kafka_*`` columns, its topic among them."""
        return self._spec.metadata_columns

    def in_range_columns(self) -> frozenset[str]:
        """Timestamp columns the decoder keeps within the range the sink writes (out-of-range
        Kafka timestamps are rejected): the sink need not check them."""
        return frozenset({TIMESTAMP_COLUMN}) if self._spec.metadata_columns else frozenset()

    def fixed_schema(self) -> st.StructType | None:
        """The rows' Spark schema when it is fixed (``value.schema``): to create the table up front."""
        if self._fixed_arrow is None:
            return None
        return from_arrow_schema(self._target([]), prefer_timestamp_ntz=True)

    @property
    def decodes_in_source(self) -> bool:
        """Whether a source may decode the values as it reads them (not framed ones: their
        schemas come from the registry, on the driver, per batch)."""
        return self._registry is None

    def source_options(self) -> dict[str, str]:
        """The options that make ``icesink-kafka-decoded`` decode as this decoder does.

        With them, the source yields the decoding pass's rows itself
        (:mod:`icesink.jobs.kafka.decoding_source`) and :meth:`decode` skips the pass.
        """
        return {SPEC_OPTION: self._spec.to_json()}

    def schema_of(self, records: Iterable[pa.RecordBatch]) -> st.StructType | None:
        """The type of the rows raw Kafka ``records`` decode to, decoded here; ``None`` when no value decodes.

        The type :meth:`decode` gives a batch of just these records.
        """
        raw = (batch.select(list(KAFKA_INPUT_COLUMNS)) for batch in records)
        passed = [b.select(["kind", "schema"]).to_pydict() for b in decode_function(self._spec)(raw)]
        schemas = [
            pa.ipc.read_schema(pa.py_buffer(schema))
            for columns in passed
            for kind, schema in zip(columns["kind"], columns["schema"], strict=True)
            if kind == DATA
        ]
        return from_arrow_schema(self._target(schemas), prefer_timestamp_ntz=True) if schemas else None

    def decode(self, batch_df: DataFrame) -> DecodedBatch:
        """Decode one micro-batch (see the module docstring).

        ``batch_df`` holds raw Kafka records, or, from a source that decodes as it reads
        (with :meth:`source_options`), the decoding pass's rows already.

        Raises:
            ConfigError: ``batch_df`` has neither the Kafka source's columns nor the pass's.
        """
        decoded_in_source = tuple(batch_df.columns) == PASS_COLUMNS
        spec = self._spec
        if decoded_in_source:
            passed = batch_df
        else:
            missing = [c for c in KAFKA_INPUT_COLUMNS if c not in batch_df.columns]
            if missing:
                raise ConfigError(
                    f"the batch lacks the Kafka source's columns {missing} (it has {batch_df.columns})",
                    hint="decode the DataFrame of a Kafka source (format 'kafka', 'icesink-kafka' or "
                    "'icesink-kafka-decoded') as loaded",
                )
            passed, spec = self._decoding_pass(batch_df.select(*KAFKA_INPUT_COLUMNS))
        cache = passed.persist(StorageLevel.MEMORY_AND_DISK_DESER)
        try:
            written_only = F.when(F.col("kind") == WRITTEN, F.col("payload")).alias("payload")
            summary = cache.select("kind", "num_rows", "schema", written_only).collect()
        except BaseException:
            cache.unpersist()
            raise
        schemas = [pa.ipc.read_schema(pa.py_buffer(r["schema"])) for r in summary if r["kind"] == DATA]
        decoded = sum(r["num_rows"] for r in summary if r["kind"] == DATA)
        rejected = sum(r["num_rows"] for r in summary if r["kind"] == REJECTED)
        skipped = sum(r["num_rows"] for r in summary if r["kind"] == SKIPPED)
        written = [bytes(r["payload"]).decode() for r in summary if r["kind"] == WRITTEN]
        written_rows = sum(r["num_rows"] for r in summary if r["kind"] == WRITTEN)
        target = self._target(schemas)
        spark_schema = mark_renamed(from_arrow_schema(target, prefer_timestamp_ntz=True), spec)
        payloads = cache.filter(F.col("kind") == DATA).select("payload")
        conform = conform_function(target)
        rows = payloads.mapInArrow(conform, spark_schema)
        dead_letters = (
            cache.filter(F.col("kind") == REJECTED)
            .select("payload")
            .mapInArrow(dead_letter_function(), DEAD_LETTER_DDL)
        )
        logger.debug("decoded %s values, %s rejected, as %s", decoded, rejected, spark_schema.simpleString())
        return DecodedBatch(
            rows,
            dead_letters,
            decoded + rejected + written_rows + skipped,
            rejected,
            bool(schemas),
            decoded_in_source,
            payloads,
            conform,
            cache,
            written,
            written_rows,
            skipped,
        )

    def _decoding_pass(self, raw: DataFrame) -> tuple[DataFrame, DecodeSpec]:
        """The first pass over raw Kafka rows (framed values' schemas read from the registry first),
        and the spec it ran with."""
        spec = self._spec
        if self._registry is not None:
            raw, spec = self._registry.prepare(raw, spec)
        return raw.mapInArrow(decode_function(spec), PASS_DDL), spec

    def _target(self, schemas: list[pa.Schema]) -> pa.Schema:
        """The batch's type: the values' fields, then the Debezium and the Kafka columns."""
        merged = without_nulls(merge_schemas(schemas))
        added = debezium.COLUMNS if self._spec.debezium else ()
        data = [f for f in merged if f.name not in added]
        if self._fixed_arrow is not None:
            by_name = {f.name: f for f in data}
            data = [
                f.with_type(_conform(by_name[f.name].type, f.type)) if f.name in by_name else f
                for f in self._fixed_arrow
            ]
        fields = [*data]
        if self._spec.debezium:
            fields += [
                pa.field(debezium.OP_COLUMN, pa.string()),
                pa.field(debezium.SOURCE_TS_COLUMN, pa.timestamp("us", tz="UTC")),
            ]
        if self._spec.metadata_columns:
            fields += list(KAFKA_COLUMNS)
        return pa.schema([f.with_nullable(True) for f in fields])


def _conform(inferred: pa.DataType, fixed: pa.DataType) -> pa.DataType:
    """``fixed`` where the inferred values convert to it without loss, else ``inferred``."""
    if inferred.equals(fixed) or pa.types.is_null(inferred):
        return fixed
    if pa.types.is_integer(inferred) and (pa.types.is_int64(fixed) or pa.types.is_float64(fixed)):
        return fixed
    if pa.types.is_int32(inferred) and pa.types.is_int32(fixed):
        return fixed
    if pa.types.is_struct(inferred) and pa.types.is_struct(fixed):
        by_name = {f.name: f for f in inferred}
        return pa.struct(
            [f.with_type(_conform(by_name[f.name].type, f.type)) if f.name in by_name else f for f in fixed]
        )
    if pa.types.is_list(inferred) and pa.types.is_list(fixed):
        return pa.list_(_conform(inferred.value_type, fixed.value_type))
    return inferred


def _arrow_type(data_type: st.DataType) -> pa.DataType:
    return to_arrow_type(data_type, timezone="UTC")
