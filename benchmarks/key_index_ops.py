"""One partition of the upsert key index in memory: a batch's lookup and a full blob's write, timed.

A partition as a long upsert stream leaves it (a full blob of ``--entries`` keys over
``--files`` data files, and ``--deltas`` delta links of ``--keys`` keys each), built from
seeded random numbers; no table, no Spark. Timed, medians of ``--repeats``: the lookup of
``--keys`` keys (about a third of them new) through the index's own search (cached blobs
searched by binary search) and through joins (the same links as overlays); a full blob's
entries merged in order, and by joins as before; the blob encoded from the merged entries
(in order) and from the joined ones (sorted again)::

    .venv/bin/python -m benchmarks.key_index_ops                       # 625,000 entries: 10M keys / 16
    .venv/bin/python -m benchmarks.key_index_ops --entries 2000000 --keys 20000
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesink.upsert.key_index import BlobRef, decode_blob, encode_blob
from icesink.upsert.key_index_entries import newest_entries
from icesink.upsert.key_index_search import merged_in_order
from icesink.upsert.key_index_view import Chain, KeyIndex, LinkCache

KEYS = pa.schema([pa.field("id", pa.int64())])
PARTITION = (0, (3,))


def _blob(rng: np.random.Generator, ids: np.ndarray, files: int, prefix: str) -> pa.Table:
    paths = pa.array([f"s3://warehouse/db/t/data/id_bucket=3/{prefix}-{n:05d}.parquet" for n in range(files)])
    ordinals = pa.array(rng.integers(0, files, len(ids)).astype(np.int32))
    entries = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "file_path": pa.DictionaryArray.from_arrays(ordinals, paths),
            "pos": pa.array(rng.integers(0, 1_000_000, len(ids)), pa.int64()),
        }
    )
    return decode_blob(encode_blob(entries, ["id"])[0], ["id"])


def median_ms(run: Callable[[], Any], repeats: int) -> float:
    """The median milliseconds of ``repeats`` calls of ``run``."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=625_000, help="keys of the full blob")
    p.add_argument("--keys", type=int, default=6_000, help="keys of a batch in the partition, and of a delta")
    p.add_argument("--deltas", type=int, default=7, help="delta links after the full blob")
    p.add_argument("--files", type=int, default=300, help="data files the full blob names")
    p.add_argument("--repeats", type=int, default=9)
    args = p.parse_args()
    rng = np.random.default_rng(1)
    ids = rng.choice(args.entries * 16, args.entries, replace=False)
    links = [_blob(rng, ids, args.files, "full")]
    links += [_blob(rng, rng.choice(ids, args.keys, replace=False), 2, f"d{n}") for n in range(args.deltas)]
    cache = LinkCache()
    refs = tuple(BlobRef(f"link-{n}", 4, 1) for n in range(len(links)))
    for ref, link in zip(refs, links, strict=True):
        cache.put(ref, link, KEYS.names)
    searched = KeyIndex(1, KEYS, {PARTITION: Chain(refs)}, PyArrowFileIO(), cache)
    joined = KeyIndex(1, KEYS, {PARTITION: Chain((), tuple(links))}, PyArrowFileIO(), LinkCache())
    old, new = rng.choice(ids, args.keys * 2 // 3, replace=False), rng.integers(0, 2**40, args.keys // 3)
    keys = pa.table({"id": pa.array(np.unique(np.concatenate([old, new])))})
    in_order = merged_in_order(searched.searchable_links(PARTITION), KEYS)
    by_joins = newest_entries(links, KEYS, keep_deleted=False)
    assert in_order is not None and in_order.num_rows == by_joins.num_rows
    figures = {
        "lookup, searched": median_ms(lambda: searched.live(PARTITION, keys), args.repeats),
        "lookup, joined": median_ms(lambda: joined.live(PARTITION, keys), args.repeats),
        "full blob merged in order": median_ms(
            lambda: merged_in_order(searched.searchable_links(PARTITION), KEYS), args.repeats
        ),
        "full blob merged by joins": median_ms(
            lambda: newest_entries(links, KEYS, keep_deleted=False), args.repeats
        ),
        "full blob encoded, in order": median_ms(lambda: encode_blob(in_order, ["id"], True), args.repeats),
        "full blob encoded, sorted": median_ms(lambda: encode_blob(by_joins, ["id"]), args.repeats),
    }
    print(f"{args.entries:,} entries, {args.deltas} deltas and a lookup of {keys.num_rows:,} keys")
    print(f"full blob: {len(encode_blob(in_order, ['id'], True)[0]):,} bytes")
    for name, ms in figures.items():
        print(f"{name:30s} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
