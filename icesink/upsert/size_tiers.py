"""Which small data files of a partition the sink's compaction merges: files of one size class.

A stream adds small files to a partition batch after batch. Merging them with the files earlier
compactions made, whenever enough small ones came, rewrites a row each time its file doubles in
size, and a file a compaction made counts again towards the next one. Size-tiered compaction, as
log-structured stores do it, bounds that: the files below the target size fall into size classes
``fan_in`` times apart, anchored at the target (class 0 from ``target / fan_in`` up to the target,
class 1 ``fan_in`` times smaller, and so on), and a class is merged once it holds ``fan_in`` files.
``fan_in`` files of one class hold at least the smallest size of the class above, so every rewrite
of a row lifts it a class: a row is rewritten at most once per class on its way to the target,
about ``log(target / file size) / log(fan_in)`` times, however long the stream. The price is in
files: after a compaction a partition holds at most ``fan_in - 1`` files of each class.

:func:`tiers_to_merge` takes every class due at once, and a class the merged file would join when
that makes it due (the carry of a counter in base ``fan_in``): those rows are written once, not
merged into the class below and then again with it. A file within the rolling writer's tolerance
under the target is one the writer rolled: it has reached the target and is left alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from icesink.write.rolling import SPLIT_TOLERANCE


def reached_target(size_bytes: int, target_file_size_bytes: int) -> bool:
    """Whether a file of ``size_bytes`` is as large as the rolling writer makes them."""
    return size_bytes >= target_file_size_bytes * (1 - SPLIT_TOLERANCE)


def size_class(size_bytes: int, target_file_size_bytes: int, fan_in: int) -> int:
    """The size class of a file below the target (0: within ``fan_in`` times of it; see the module)."""
    found, floor = 0, target_file_size_bytes / fan_in
    while size_bytes < floor and floor >= 1:
        found, floor = found + 1, floor / fan_in
    return found


def tiers_to_merge(sizes: Sequence[int], target_file_size_bytes: int, fan_in: int) -> list[int]:
    """The positions in ``sizes`` of the files to merge: every class with ``fan_in`` files, counting
    the merged file in the class it would land in (none: nothing due; see the module)."""
    classes: dict[int, list[int]] = {}
    for i, size in enumerate(sizes):
        if not reached_target(size, target_file_size_bytes):
            classes.setdefault(size_class(size, target_file_size_bytes, fan_in), []).append(i)
    chosen: list[int] = []
    while True:
        merged = sum(sizes[i] for i in chosen)
        rolled = not chosen or reached_target(merged, target_file_size_bytes)
        lands = None if rolled else size_class(merged, target_file_size_bytes, fan_in)
        due = [c for c, files in classes.items() if len(files) + (c == lands) >= fan_in]
        if not due:
            return sorted(chosen)
        for c in due:
            chosen += classes.pop(c)
