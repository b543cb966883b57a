"""What a pyiceberg scan pays for position deletes: per row of a file that has any, not per delete.

pyiceberg 0.12 applies a data file's position deletes batch by batch of the file's rows
(``pyiceberg.io.pyarrow._combine_positional_deletes``): for every record batch it builds the
batch's row positions as an Arrow array from a Python ``range`` and filters out the deleted ones
with ``is_in``. This times that function, as pyiceberg calls it, over the record batches of one
data file of ``--rows`` rows (``--batch-rows`` each, Arrow's scanner default) with 1 deleted
position, 1% and 10% of them, against reading the same rows with no delete (no call at all),
medians of ``--repeats``; and, for scale, Arrow's own decoding of such a file's key column. With
random upsert keys every data file carries some deletes after each batch, so this cost applies
to every row of the table: the reason a pyiceberg scan of an upserted table stays several times
slower than of the same rows compacted ([README](README.md#upserts-over-a-long-stream))::

    .venv/bin/python -m benchmarks.pyiceberg_deletes
    .venv/bin/python -m benchmarks.pyiceberg_deletes --rows 625000 --repeats 9
"""

from __future__ import annotations

import argparse
import functools
import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import _combine_positional_deletes

from benchmarks.key_index_ops import median_ms


def _apply(deletes: pa.ChunkedArray, rows: int, batch_rows: int) -> int:
    """pyiceberg's delete application over a file's record batches: the rows kept."""
    return sum(
        len(_combine_positional_deletes([deletes], start, min(rows, start + batch_rows)))
        for start in range(0, rows, batch_rows)
    )


def measure(rows: int, batch_rows: int, repeats: int) -> dict[str, float]:
    """Milliseconds: ``decode`` (Arrow reads the key column) and, per number of deleted positions,
    pyiceberg's delete application over the file's record batches. Raises if it kept wrong rows."""
    rng = np.random.default_rng(7)
    buffer = io.BytesIO()
    pq.write_table(pa.table({"id": rng.permutation(rows).astype(np.int64)}), buffer)
    data = buffer.getvalue()
    figures = {"decode": median_ms(lambda: pq.read_table(io.BytesIO(data)), repeats)}
    for count in (1, rows // 100, rows // 10):
        positions = np.sort(rng.choice(rows, count, replace=False)).astype(np.int64)
        deletes = pa.chunked_array([pa.array(positions)])
        kept = _apply(deletes, rows, batch_rows)
        if kept != rows - count:
            raise AssertionError(f"{kept} rows kept of {rows} with {count} deleted")
        figures[str(count)] = median_ms(functools.partial(_apply, deletes, rows, batch_rows), repeats)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=625_000, help="rows of the data file (10M keys / 16)")
    parser.add_argument("--batch-rows", type=int, default=131_072)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    figures = measure(args.rows, args.batch_rows, args.repeats)
    print(f"{args.rows:,} rows, record batches of {args.batch_rows:,}, medians of {args.repeats}")
    print(f"Arrow decodes the file's int64 key column: {figures.pop('decode'):.1f} ms")
    for count, ms in figures.items():
        per_million = ms / args.rows * 1_000_000
        print(
            f"{int(count):>9,} deleted: pyiceberg's delete application {ms:7.1f} ms"
            f" ({per_million:.0f} ms a million rows)"
        )


if __name__ == "__main__":
    main()
