"""Key index entries as Arrow tables: joined by key, matched by position, merged into a partition's state.

An entry is a row ``key columns, file_path, pos`` (:func:`entry_schema`); ``file_path``
is null for a key deleted. Links decoded from blobs carry ``file_path`` dictionary-encoded
(a partition has a few hundred data files and up to millions of keys); the helpers here
keep it so wherever a whole partition goes through them (:func:`partition_state`,
:func:`newest_entries`): casting it to strings would copy every path once per key, by far
the dearest part of writing a partition's full blob. Only the few rows a lookup finds are
turned into plain strings (:func:`as_entries`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_POSITION_BITS = 40  # a data file's rows: positions below 2**40
_PATHS = pa.dictionary(pa.int32(), pa.string())


def entry_schema(key_schema: pa.Schema) -> pa.Schema:
    return pa.schema([*key_schema, pa.field("file_path", pa.string()), pa.field("pos", pa.int64())])


def key_entries(keys: pa.Table, path: str, key_schema: pa.Schema) -> pa.Table:
    """The entries of a data file's rows: ``keys`` (its key columns in file order, named as
    ``key_schema``), its path and each row's position."""
    keys = keys.cast(key_schema)
    rows = keys.num_rows
    ordinals = pa.array(np.zeros(rows, np.int32))  # the path once, not once per row
    paths = pa.DictionaryArray.from_arrays(ordinals, pa.array([path], pa.string()))
    positions = pa.array(np.arange(rows, dtype=np.int64))
    return keys.append_column("file_path", paths).append_column("pos", positions)


def as_entries(rows: pa.Table, key_schema: pa.Schema) -> pa.Table:
    """``rows`` with a plain string ``file_path``, in the entry schema (for a few rows)."""
    return pa.table(
        [
            *(rows.column(n) for n in key_schema.names),
            rows.column("file_path").cast(pa.string()),
            rows.column("pos").cast(pa.int64()),
        ],
        schema=entry_schema(key_schema),
    )


def with_dictionary_paths(rows: pa.Table, key_schema: pa.Schema) -> pa.Table:
    """``rows`` in the entry schema but for a dictionary-encoded ``file_path`` (no copy when it is one)."""
    paths = rows.column("file_path")
    if paths.type != _PATHS:
        paths = paths.cast(pa.string()).combine_chunks().dictionary_encode()
    return pa.table(
        [*(rows.column(n) for n in key_schema.names), paths, rows.column("pos").cast(pa.int64())],
        names=[*key_schema.names, "file_path", "pos"],
    )


def concat(tables: list[pa.Table], key_schema: pa.Schema) -> pa.Table:
    schema = key_schema if tables and tables[0].num_columns == len(key_schema) else entry_schema(key_schema)
    return pa.concat_tables(tables) if tables else schema.empty_table()


def concat_dictionary(tables: Sequence[pa.Table], key_schema: pa.Schema) -> pa.Table:
    """Entry tables as one, ``file_path`` one dictionary of every path (the rows' own order)."""
    parts = [with_dictionary_paths(t, key_schema) for t in tables]
    if not parts:
        return with_dictionary_paths(entry_schema(key_schema).empty_table(), key_schema)
    return pa.concat_tables(parts).unify_dictionaries().combine_chunks()


def newest_entries(links: Sequence[pa.Table], key_schema: pa.Schema, keep_deleted: bool) -> pa.Table:
    """Every entry of the newest of ``links`` (oldest first) holding each key; deleted keys or not."""
    names, seen, found = key_schema.names, None, []
    for link in reversed(list(links)):
        rows = link if seen is None else anti_join(link, seen, names)
        found.append(rows)
        keys = rows.select(names)
        seen = keys if seen is None else pa.concat_tables([seen, keys])
    table = concat_dictionary(found, key_schema)
    return table if keep_deleted else table.filter(pc.is_valid(table.column("file_path")))


def partition_state(
    state: pa.Table,
    key_schema: pa.Schema,
    added: pa.Table | None,
    removed: set[str],
    deleted: pa.Table | None,
) -> pa.Table:
    """A partition's every live entry after a commit that removed files of it (a compaction).

    Its live entries before (``state``) but those in a removed file or at a deleted
    position, and the ``added`` ones: computed for the whole partition at once, by number,
    rather than key by key (a compaction touches every key of the partitions it rewrites).
    """
    state = state.filter(pc.invert(at_mask(state, removed, deleted)))
    return concat_dictionary([state, *([added] if added is not None else [])], key_schema)


def distinct(keys: pa.Table, names: list[str]) -> pa.Table:
    return keys.group_by(names, use_threads=False).aggregate([]).select(names)


def at(link: pa.Table, removed: set[str], deleted: pa.Table | None) -> pa.Table:
    """Rows of ``link`` in a removed file or at a deleted position."""
    if link.num_rows == 0 or (not removed and (deleted is None or deleted.num_rows == 0)):
        return link.slice(0, 0)
    return link.filter(at_mask(link, removed, deleted))


def at_mask(link: pa.Table, removed: set[str], deleted: pa.Table | None) -> pa.Array:
    """Which rows of ``link`` are in a removed file or at a deleted position.

    Compared as numbers (the file's ordinal in the link's dictionary, shifted, plus the
    position), never as strings: a full blob has a row per key of its partition.
    """
    paths = link.column("file_path").combine_chunks()
    if not pa.types.is_dictionary(paths.type):
        paths = paths.cast(pa.string()).dictionary_encode()  # an overlay: few rows
    files, ordinals = paths.dictionary, paths.indices
    mask = pc.take(pc.is_in(files, value_set=pa.array(sorted(removed), pa.string())), ordinals)
    if deleted is not None and deleted.num_rows:
        wanted = pc.index_in(deleted.column("file_path").combine_chunks().cast(pa.string()), value_set=files)
        codes = _codes(wanted, deleted.column("pos").combine_chunks()).drop_null()
        at_deleted = pc.is_in(_codes(ordinals, link.column("pos").combine_chunks()), value_set=codes)
        mask = pc.or_(pc.fill_null(mask, False), pc.fill_null(at_deleted, False))
    return pc.fill_null(mask, False)


def _codes(ordinals: pa.Array, positions: pa.Array) -> pa.Array:
    """A (file ordinal, position) pair as one number."""
    return pc.add(pc.shift_left(ordinals.cast(pa.int64()), _POSITION_BITS), positions.cast(pa.int64()))


def semi_join(rows: pa.Table, keys: pa.Table, names: list[str]) -> pa.Table:
    """Rows of ``rows`` whose ``names`` columns are a row of ``keys``."""
    if rows.num_rows == 0 or keys.num_rows == 0:
        return rows.slice(0, 0)
    return rows.filter(member(rows, keys, names))


def anti_join(rows: pa.Table, keys: pa.Table, names: list[str]) -> pa.Table:
    """Rows of ``rows`` whose ``names`` columns are no row of ``keys``."""
    if rows.num_rows == 0 or keys.num_rows == 0:
        return rows
    return rows.filter(pc.invert(member(rows, keys, names)))


def member(rows: pa.Table, keys: pa.Table, names: list[str]) -> pa.Array:
    """Which rows of ``rows`` have ``names`` columns equal to a row of ``keys``.

    Joined on the named columns and a row number only: the other columns (a dictionary
    ``file_path``) never enter the join.
    """
    if len(names) == 1:
        values = keys.column(names[0]).combine_chunks()
        return pc.fill_null(pc.is_in(rows.column(names[0]).combine_chunks(), value_set=values), False)
    numbered = rows.select(names).append_column("__row", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    wanted = distinct(keys.select(names), names)
    matched = numbered.join(wanted, keys=names, join_type="left semi", use_threads=False).column("__row")
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[matched.to_numpy()] = True
    return pa.array(mask)
