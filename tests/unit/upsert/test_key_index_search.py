"""Key index links searched by key: the binary search and the ordered merge give what the joins give."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesink.upsert.key_index import BlobRef, decode_blob, encode_blob
from icesink.upsert.key_index_entries import anti_join, newest_entries, semi_join
from icesink.upsert.key_index_search import Link, find, merged_in_order
from icesink.upsert.key_index_view import Chain, KeyIndex, LinkCache

IDS = pa.schema([pa.field("id", pa.int64())])
PARTITION = (0, (5,))

Entry = tuple[int, str | None, int | None]


def _table(rows: list[Entry], schema: pa.Schema = IDS) -> pa.Table:
    name = schema.names[0]
    return pa.table(
        {
            name: pa.array([r[0] for r in rows], schema.field(name).type),
            "file_path": pa.array([r[1] for r in rows], pa.string()),
            "pos": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def _blob(rows: list[Entry]) -> pa.Table:
    """Entries as a blob reads them back: sorted, ``file_path`` dictionary-encoded."""
    return decode_blob(encode_blob(_table(rows), ["id"])[0], ["id"])


def _rows(table: pa.Table) -> list[Entry]:
    rows = ((r["id"], r["file_path"], r["pos"]) for r in table.to_pylist())
    return sorted(rows, key=lambda r: (r[0], r[1] or "", -1 if r[2] is None else r[2]))


def test_find_gives_every_row_of_the_keys_held_and_no_other() -> None:
    sorted_keys = np.array([1, 3, 3, 3, 7, 9, 9, 12], dtype=np.int64)  # 3 and 9 stored more than once
    wanted = np.array([9, 2, 3, 12, 9, 0, 13], dtype=np.int64)  # 9 asked twice; 2, 0, 13 absent
    held, rows = find(sorted_keys, wanted)
    assert held.tolist() == [True, False, True, True, True, False, False]
    assert rows.tolist() == [1, 2, 3, 5, 6, 7]
    held, rows = find(sorted_keys, np.array([4, 100], dtype=np.int64))
    assert held.tolist() == [False, False] and rows.tolist() == []


def test_a_searched_link_splits_keys_as_the_joins_do() -> None:
    rng = random.Random(7)
    rows: list[Entry] = []
    for key in rng.sample(range(5_000), 2_000):
        rows.append((key, None, None) if rng.random() < 0.1 else (key, f"f{key % 13}", rng.randrange(10**6)))
    rows += [(key, "twice", 1) for key in rng.sample([r[0] for r in rows if r[1] is not None], 50)]
    blob = _blob(rows)
    link = Link.of_blob(blob, ["id"])
    assert link.sorted_keys is not None
    keys = pa.table({"id": pa.array(rng.sample(range(6_000), 700), pa.int64())})
    hits, remaining = link.split(keys, ["id"])
    assert _rows(hits) == _rows(semi_join(blob, keys, ["id"]))  # tombstones and keys stored twice too
    assert sorted(remaining.column("id").to_pylist()) == sorted(
        anti_join(keys, blob.select(["id"]), ["id"]).column("id").to_pylist()
    )
    assert len(_rows(hits)) > 150 and remaining.num_rows > 300  # both sides exercised


def test_a_blob_out_of_order_is_sorted_once_and_other_keys_are_left_to_the_joins() -> None:
    unsorted = _table([(5, "a", 0), (1, "a", 1), (3, "b", 0)])
    link = Link.of_blob(unsorted, ["id"])
    assert link.sorted_keys is not None and link.sorted_keys.tolist() == [1, 3, 5]
    assert link.entries.column("pos").to_pylist() == [1, 0, 0]
    hits, remaining = link.split(pa.table({"id": pa.array([3, 4], pa.int64())}), ["id"])
    assert _rows(hits) == [(3, "b", 0)] and remaining.column("id").to_pylist() == [4]

    strings = pa.schema([pa.field("name", pa.string())])
    by_name = pa.table({"name": ["b", "a"], "file_path": ["f", "f"], "pos": [0, 1]})
    assert Link.of_blob(by_name, strings.names).sorted_keys is None
    composite = by_name.append_column("id", pa.array([1, 2], pa.int64()))
    link = Link.of_blob(composite, ["name", "id"])
    assert link.sorted_keys is None
    wanted = pa.table({"name": ["a", "a"], "id": pa.array([2, 1], pa.int64())})
    hits, remaining = link.split(wanted, ["name", "id"])
    assert hits.column("pos").to_pylist() == [1]
    assert remaining.to_pylist() == [{"name": "a", "id": 1}]


def _chain(rng: random.Random) -> list[pa.Table]:
    """A full blob and newer links: updates, deletes, keys inserted again, keys stored twice."""
    full: list[Entry] = [(key, f"f{key % 7}", key) for key in rng.sample(range(20_000), 4_000)]
    full += [(full[i][0], "dup", i) for i in range(0, 4_000, 97)]  # a key stored twice in the full blob
    links = [_blob(full)]
    for n in range(5):
        delta: list[Entry] = []
        for key in rng.sample(range(21_000), 300):
            if rng.random() < 0.2:
                delta.append((key, None, None))  # deleted
            else:
                delta.append((key, f"d{n}", key + n))
                if rng.random() < 0.05:
                    delta.append((key, f"d{n}-again", key))  # stored twice in a newer link
        links.append(_blob(delta) if n < 4 else _table(delta))  # the newest: an overlay, unsorted
    return links


def test_a_full_blob_merged_in_order_holds_the_newest_live_entries_sorted() -> None:
    links = _chain(random.Random(3))
    searchable = [Link.of_blob(links[0], ["id"]), *(Link(link) for link in links[1:])]
    merged = merged_in_order(searchable, IDS)
    assert merged is not None
    expected = newest_entries(links, IDS, keep_deleted=False)
    assert _rows(merged) == _rows(expected)
    ids = merged.column("id").to_numpy()
    assert bool(np.all(ids[1:] >= ids[:-1]))
    assert merged.column("file_path").null_count == 0
    payload, decoded = encode_blob(merged, ["id"], in_order=True)
    assert _rows(decode_blob(payload, ["id"])) == _rows(expected)
    assert decoded.column("id").to_pylist() == decode_blob(payload, ["id"]).column("id").to_pylist()
    assert merged_in_order([Link(links[0]), *searchable[1:]], IDS) is None  # an overlay first: joins


def test_the_index_looks_up_and_writes_a_searched_chain_as_the_joined_one() -> None:
    io, rng = PyArrowFileIO(), random.Random(11)
    links = _chain(rng)
    cache = LinkCache()
    refs = tuple(BlobRef(f"file:///nowhere/{n}.stats", 4, 1) for n in range(len(links) - 1))
    for ref, link in zip(refs, links, strict=False):
        cache.put(ref, link, ["id"])
    searched = KeyIndex(1, IDS, {PARTITION: Chain(refs, (links[-1],))}, io, cache)
    joined = KeyIndex(1, IDS, {PARTITION: Chain((), tuple(links))}, io, LinkCache())
    keys = pa.table({"id": pa.array(rng.sample(range(22_000), 3_000), pa.int64())})
    found = searched.live(PARTITION, keys)
    assert _rows(found) == _rows(joined.live(PARTITION, keys))
    assert found.num_rows > 500 and found.column("file_path").null_count == 0
    assert found.column("file_path").type == pa.string()

    blobs, chains, tables = searched.blobs(registered=[r.path for r in refs], max_links=len(refs))
    assert chains[PARTITION] == [0]  # past its links: written in full
    expected = newest_entries(links, IDS, keep_deleted=False)
    assert _rows(decode_blob(blobs[0], ["id"])) == _rows(expected) == _rows(tables[0])
    assert pc.all(pc.is_valid(expected.column("file_path"))).as_py()
    assert {r[0] for r in _rows(expected)} >= {r[0] for r in _rows(found)}


def test_a_blob_in_the_earlier_parquet_settings_is_read_and_searched() -> None:
    """A blob as the index's first writer encoded it (every column zstd, positions plain)."""
    ids = pa.array([2, 4, 4, 9], pa.int64())
    table = pa.table({"id": ids, "file": pa.array([0, 1, None, 0], pa.int32()), "pos": [5, 6, 7, 8]})
    table = table.replace_schema_metadata({b"icesink.files": json.dumps(["f0", "f1"]).encode()})
    sink = io.BytesIO()
    encoding = {"id": "DELTA_BINARY_PACKED"}
    pq.write_table(table, sink, compression="zstd", use_dictionary=["file"], column_encoding=encoding)
    link = Link.of_blob(decode_blob(sink.getvalue(), ["id"]), ["id"])
    assert link.sorted_keys is not None
    hits, remaining = link.split(pa.table({"id": pa.array([4, 3, 9], pa.int64())}), ["id"])
    assert _rows(hits) == [(4, None, 7), (4, "f1", 6), (9, "f0", 8)]
    assert remaining.column("id").to_pylist() == [3]
