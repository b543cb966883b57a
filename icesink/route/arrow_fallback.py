"""Arrow UDFs for the transforms Spark's own expressions cannot compute exactly.

Two cases leave Spark's generated code for a vectorized Python UDF over Arrow batches
(:func:`arrow_column`): ``bucket`` of a decimal with precision above 18, whose unscaled
value does not fit a long, and ``truncate`` of a decimal(38, S) with S above 6, where
Spark would round the subtraction to fewer digits. Both run pyiceberg-core's Rust
transforms on whole Arrow arrays. :func:`hash_decimal_array` (raw hashes, for the
self-check and tests only) is row by row.

Everything below the first function runs inside Spark's Python workers, on one Arrow
batch at a time, and must stay importable there without the driver's state.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import types as T
from pyspark.sql.pandas import functions as pandas_functions

from icesink.errors import PartitionSpecError

__all__ = ["aligned", "arrow_column", "bucket_decimal_array", "hash_decimal_array", "truncate_decimal_array"]

# Decimal's default context keeps 28 digits; these values have up to 38.
_EXACT = Context(prec=80)


def arrow_column(
    function: Callable[..., pa.Array], return_type: T.DataType, *args: int
) -> Callable[[Column], Column]:
    """A scalar Arrow UDF applying ``function(values, *args)`` to each Arrow batch.

    Args:
        function: One of this module's array functions.
        return_type: The Spark type of the result.
        *args: Extra integer arguments (bucket count, truncation width).

    Returns:
        A function from the source Column to the result Column.
    """

    def apply(values: pa.Array) -> pa.Array:
        return function(values, *args)

    # pyspark's stubs only accept an explicit functionType; the type hints above say it.
    arrow_udf: Any = pandas_functions.arrow_udf
    udf: Callable[[Column], Column] = arrow_udf(apply, return_type)
    return udf


def aligned(values: pa.Array) -> pa.Array:
    """``values`` with a 16-byte aligned data buffer, copied if need be.

    Decimal arrays received from Spark are not always aligned, and pyiceberg-core's Rust
    code panics on those ("Memory pointer from external source ... is not aligned").
    """
    data = values.buffers()[1]
    if data is None or data.address % 16 == 0:
        return values
    return pa.concat_arrays([values])  # allocates from Arrow's pool, which aligns to 64


def bucket_decimal_array(values: pa.Array, num_buckets: int) -> pa.Array:
    """Iceberg bucket ids of a decimal array (pyiceberg-core, vectorized)."""
    from pyiceberg_core import transform

    return transform.bucket(aligned(values), num_buckets).cast(pa.int32())


def truncate_decimal_array(values: pa.Array, width: int) -> pa.Array:
    """Iceberg ``truncate[width]`` of a decimal array; fails on a result below the type's range."""
    import pyarrow.compute as pc
    from pyiceberg_core import transform

    truncated = transform.truncate(aligned(values), width)
    # Truncation rounds down, so only the bottom of the range can be left.
    precision, scale = values.type.precision, values.type.scale
    smallest = pa.scalar(Decimal(1 - 10**precision).scaleb(-scale, _EXACT), values.type)
    below = pc.less(truncated, smallest)
    if pc.any(below).as_py():
        value = values.filter(below)[0].as_py()
        raise PartitionSpecError(
            f"truncate[{width}] of this value is below the range of {values.type}: {value}"
        )
    return truncated


def hash_decimal_array(values: pa.Array) -> pa.Array:
    """Raw Iceberg hashes of a decimal array, row by row (checks only, never on the write path)."""
    import mmh3

    scale = values.type.scale
    hashes: list[int | None] = []
    for value in values.to_pylist():
        if value is None:
            hashes.append(None)
            continue
        unscaled = int(value.scaleb(scale, _EXACT))
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        hashes.append(mmh3.hash(unscaled.to_bytes(length, "big", signed=True)))
    return pa.array(hashes, pa.int32())
