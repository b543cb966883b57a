"""The key index view and file format with a key of two columns: changes applied, looked up, read back."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyiceberg.io.pyarrow import PyArrowFileIO

from icesink.upsert.key_index import decode_blob, encode_blob, read_blob, read_footer, write_index_file
from icesink.upsert.key_index_view import IndexStep, KeyIndex, LinkCache

KEYS = pa.schema([pa.field("tenant", pa.string()), pa.field("id", pa.int64())])
PARTITION = (0, (3,))


def _entries(*rows: tuple[str, int, str, int]) -> pa.Table:
    tenants, ids, files, positions = (list(c) for c in zip(*rows, strict=True))
    return pa.table({"tenant": tenants, "id": ids, "file_path": files, "pos": positions})


def _keys(*rows: tuple[str, int]) -> pa.Table:
    return pa.Table.from_pylist([{"tenant": t, "id": i} for t, i in rows], KEYS)


def _live(view: KeyIndex) -> set[tuple[str, int, str, int]]:
    rows = view.live(PARTITION, _keys(("a", 1), ("b", 1), ("a", 2), ("c", 9))).to_pylist()
    return {(r["tenant"], r["id"], r["file_path"], r["pos"]) for r in rows}


def test_changes_applied_to_a_two_column_key_are_looked_up_written_and_read_back(tmp_path: Path) -> None:
    io = PyArrowFileIO()
    empty = KeyIndex(None, KEYS, {}, io, LinkCache())
    first = empty.apply(
        IndexStep(added={PARTITION: _entries(("a", 1, "f1", 0), ("b", 1, "f1", 1), ("a", 2, "f1", 2))}), 1
    )
    replaced = first.apply(  # (a, 1) replaced: its old position deleted, a new row in f2
        IndexStep(
            added={PARTITION: _entries(("a", 1, "f2", 0))},
            deleted={PARTITION: pa.table({"file_path": ["f1"], "pos": [0]})},
        ),
        2,
    )
    assert _live(replaced) == {("a", 1, "f2", 0), ("b", 1, "f1", 1), ("a", 2, "f1", 2)}
    rewritten = replaced.apply(  # f1 removed, only (b, 1) written again: (a, 2) is gone
        IndexStep(added={PARTITION: _entries(("b", 1, "f3", 0))}, removed={PARTITION: {"f1"}}), 3
    )
    assert _live(rewritten) == {("a", 1, "f2", 0), ("b", 1, "f3", 0)}

    path = f"file://{tmp_path}/index.stats"
    blobs, chains, _ = rewritten.blobs(registered=[])
    size, _ = write_index_file(io, path, blobs, KEYS.names, chains)
    footer = read_footer(io, path, size)
    assert footer.key_columns == ("tenant", "id")
    (ref,) = footer.chains[PARTITION]  # no link registered: one full blob
    stored = read_blob(io, ref, KEYS.names).to_pylist()
    assert {(r["tenant"], r["id"], r["file_path"], r["pos"]) for r in stored} == _live(rewritten)
    reread = KeyIndex(3, KEYS, {}, io, LinkCache()).written(3, dict(footer.chains))
    assert _live(reread) == _live(rewritten)


def test_a_blob_of_dictionary_paths_keeps_only_the_files_it_names_and_reads_back_sorted() -> None:
    files = pa.array(["gone", "f2", "f1", "also-gone"], pa.string())
    paths = pa.DictionaryArray.from_arrays(pa.array([2, 1, None, 2], pa.int32()), files)  # None: deleted
    entries = pa.table(
        {"tenant": ["b", "a", "c", "a"], "id": [1, 2, 3, 1], "file_path": paths, "pos": [5, 6, 7, 8]}
    )
    payload, kept = encode_blob(entries, KEYS.names)
    stored = decode_blob(payload, KEYS.names)
    assert stored.to_pylist() == kept.to_pylist()
    assert stored.to_pylist() == [
        {"tenant": "a", "id": 1, "file_path": "f1", "pos": 8},
        {"tenant": "a", "id": 2, "file_path": "f2", "pos": 6},
        {"tenant": "b", "id": 1, "file_path": "f1", "pos": 5},
        {"tenant": "c", "id": 3, "file_path": None, "pos": 7},
    ]
    assert sorted(stored.column("file_path").combine_chunks().dictionary.to_pylist()) == ["f1", "f2"]
