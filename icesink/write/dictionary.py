"""Which columns a task's data files dictionary-encode: those a dictionary makes smaller.

Arrow's Parquet writer dictionary-encodes every column and falls back to plain values only
when a column chunk's dictionary outgrows its page limit (1 MiB). parquet-java, the writer
behind Iceberg's Java library and Spark's own Parquet sink, also falls back when a column
chunk's first page is no smaller with the dictionary (the dictionary plus the bit-packed
indices) than as plain values (``isCompressionSatisfying``). Columns of nearly unique values
(event times, ids, amounts with many cents) fail that test: their dictionary is as large as
the values, the indices come on top, hashing every value costs CPU, and the result
compresses worse than plain values do: the reference workload's timestamp columns take
less space plain (``benchmarks/README.md``, "Figures behind the code's thresholds" and
"A dictionary only where it makes a column smaller").

This module applies parquet-java's test once per table and task, to a sample of its first
rows: a page's worth at most (parquet-java's first page holds at most 20,000 values), and at
least :data:`MIN_SAMPLE_ROWS`, so that a first handful of rows decides nothing. Until a
sample is taken, and for types the test does not size (booleans, nested columns),
every column keeps its dictionary, as Arrow does.

A column of long values (free text, say) is judged on its first :data:`DICTIONARY_PAGE_BYTES`
of values only, the most a dictionary page holds before both writers give the dictionary
up: hashing 20,000 such values (the test's whole cost) cost the Kafka job's tasks of 1 KB
messages about a tenth of their decoding and writing.
"""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SAMPLE_ROWS = 20_000
"""Rows the test looks at: parquet-java's default row limit of a page (``page.row.count.limit``)."""

MIN_SAMPLE_ROWS = 1_000
"""A task's rows of a table decide nothing before a batch of this many arrives."""

SAMPLE_VALUES = 64 * SAMPLE_ROWS
"""Values the test looks at, at most: a table of more than 64 columns samples fewer rows
(never fewer than :data:`MIN_SAMPLE_ROWS`), so that the test costs a task about as much
however wide the table (0.25 ms per column of 20,000 values)."""


DICTIONARY_PAGE_BYTES = 1024 * 1024
"""What a dictionary page holds before parquet-java and Arrow give a column's dictionary up
(``parquet.dictionary.page.size``, Arrow's ``dictionary_pagesize_limit``): the test looks at
a variable-width column's first values up to as many bytes."""


class DictionaryColumns:
    """The ``use_dictionary`` of one table's files in one task, decided from its first rows.

    Shared by the task's writers of the table; a writer reads :attr:`use_dictionary` when it
    begins its file, possibly on another thread than the one that samples.

    Args:
        schema: The Arrow schema of the data files.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._schema = schema
        self._use: bool | list[str] = True
        self.plain_columns: tuple[str, ...] | None = None
        """The top-level columns written without a dictionary; ``None`` before the sample."""

    @property
    def use_dictionary(self) -> bool | list[str]:
        """``True`` (every column), or the Parquet column paths to dictionary-encode."""
        return self._use

    def sample(self, rows: pa.RecordBatch | pa.Table) -> None:
        """Decide from ``rows`` (in the file schema), unless decided or ``rows`` are too few."""
        if self.plain_columns is not None or rows.num_rows < MIN_SAMPLE_ROWS:
            return
        columns = max(1, len(self._schema))
        sample = rows.slice(0, max(MIN_SAMPLE_ROWS, min(SAMPLE_ROWS, SAMPLE_VALUES // columns)))
        plain = tuple(name for name in self._schema.names if not dictionary_pays(sample.column(name)))
        if plain:  # a single assignment: writers on other threads see the old choice or the new
            paths = zip(self._schema.names, leaf_paths(self._schema), strict=True)
            self._use = [path for name, leaves in paths if name not in plain for path in leaves]
        self.plain_columns = plain


def dictionary_pays(values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether ``values`` take fewer bytes dictionary-encoded than plain (parquet-java's test).

    Plain: every non-null value (with its 4-byte length, for strings and binary). With the
    dictionary: each distinct value once, and an index of ``ceil(log2(distinct))`` bits per
    value. Types the test does not size keep their dictionary.
    """
    width = _plain_width(values.type)
    if width is None and not _variable_width(values.type):
        return True
    present = len(values) - int(values.null_count)
    if present == 0:
        return True
    if width is not None:
        distinct = int(pc.count_distinct(values, mode="only_valid").as_py())
        plain = present * width
        dictionary = distinct * width
    else:
        lengths = pc.binary_length(values)
        values, lengths, present = _first_page(values, lengths, present)
        unique = pc.unique(values.drop_null())
        distinct = len(unique)
        plain = int(pc.sum(lengths).as_py() or 0) + 4 * present
        dictionary = int(pc.sum(pc.binary_length(unique)).as_py() or 0) + 4 * distinct
    index_bits = (distinct - 1).bit_length()
    return dictionary + math.ceil(present * index_bits / 8) < plain


def _first_page(
    values: pa.Array | pa.ChunkedArray, lengths: pa.Array | pa.ChunkedArray, present: int
) -> tuple[pa.Array | pa.ChunkedArray, pa.Array | pa.ChunkedArray, int]:
    """The first values of a variable-width column that hold :data:`DICTIONARY_PAGE_BYTES`
    (all of them when they hold less), their lengths and how many are not null."""
    total = int(pc.sum(lengths).as_py() or 0)
    if total <= DICTIONARY_PAGE_BYTES:
        return values, lengths, present
    ends = np.cumsum(pc.fill_null(lengths, 0).to_numpy())
    rows = int(np.searchsorted(ends, DICTIONARY_PAGE_BYTES)) + 1  # the value that reaches the limit too
    values, lengths = values.slice(0, rows), lengths.slice(0, rows)
    return values, lengths, rows - int(values.null_count)


def _plain_width(arrow_type: pa.DataType) -> int | None:
    """Bytes of one plain value of ``arrow_type`` in Parquet, for the fixed-width types sized here."""
    t = pa.types
    if any(is_type(arrow_type) for is_type in (t.is_integer, t.is_floating, t.is_date, t.is_time)):
        return 4 if arrow_type.bit_width <= 32 else 8  # INT32 and FLOAT hold the narrower types
    if t.is_timestamp(arrow_type):
        return 8
    if t.is_fixed_size_binary(arrow_type):
        return int(arrow_type.byte_width)
    if t.is_decimal(arrow_type):  # written as integers (store_decimal_as_integer), else as few bytes as fit
        precision = int(arrow_type.precision)
        if precision <= 18:
            return 4 if precision <= 9 else 8
        return next(n for n in range(9, 33) if 2 ** (8 * n - 1) > 10**precision)
    return None


def _variable_width(arrow_type: pa.DataType) -> bool:
    t = pa.types
    return any(
        is_type(arrow_type) for is_type in (t.is_string, t.is_binary, t.is_large_string, t.is_large_binary)
    )


def leaf_paths(schema: pa.Schema) -> list[list[str]]:
    """For each field of ``schema``, the Parquet paths of its columns in a file (one for a
    primitive field, ``a.b`` for a struct's field, ...).

    Taken from the Parquet schema Arrow writes for ``schema``, so that nested columns are
    named as the writer names them.
    """
    if not any(pa.types.is_nested(field.type) for field in schema):
        return [[name] for name in schema.names]
    sink = io.BytesIO()
    pq.write_table(schema.empty_table(), sink)
    parquet_schema = pq.read_metadata(io.BytesIO(sink.getvalue())).schema
    paths = iter(parquet_schema.column(i).path for i in range(len(parquet_schema)))
    return [list(itertools.islice(paths, _leaves(field.type))) for field in schema]


def _leaves(arrow_type: pa.DataType) -> int:
    """How many Parquet columns a field of ``arrow_type`` is written as."""
    if isinstance(arrow_type, pa.StructType):
        return sum(_leaves(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if isinstance(arrow_type, pa.MapType):
        return _leaves(arrow_type.key_type) + _leaves(arrow_type.item_type)
    if isinstance(arrow_type, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
        return _leaves(arrow_type.value_type)
    return 1
