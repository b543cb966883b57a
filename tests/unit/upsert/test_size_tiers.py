"""The size classes of an appended partition's small files, and which of them a compaction merges."""

from __future__ import annotations

from icesink.upsert.size_tiers import reached_target, size_class, tiers_to_merge

MIB = 1 << 20
TARGET = 512 * MIB


def test_classes_are_fan_in_times_apart_from_the_target_down() -> None:
    assert [size_class(s, TARGET, 8) for s in (511 * MIB, 64 * MIB, 63 * MIB, 8 * MIB, 7 * MIB, 1)] == [
        0,
        0,
        1,
        1,
        2,
        9,
    ]
    assert size_class(0, TARGET, 8) == size_class(1, TARGET, 8)  # below a byte: the last class
    assert reached_target(TARGET, TARGET) and reached_target(int(TARGET * 0.99), TARGET)
    assert not reached_target(int(TARGET * 0.9), TARGET)


def test_a_class_is_merged_once_it_holds_fan_in_files() -> None:
    seven = [6 * MIB] * 7
    assert tiers_to_merge(seven, TARGET, 8) == []
    assert tiers_to_merge([*seven, 5 * MIB], TARGET, 8) == list(range(8))
    # A compacted file of the class above is left alone with its class's 7 others.
    above = [50 * MIB] * 7
    assert tiers_to_merge([*above, *seven], TARGET, 8) == []
    assert tiers_to_merge([*above, *seven, 6 * MIB], TARGET, 8) == list(
        range(15)
    )  # the merged file joins them


def test_the_merged_file_joins_its_class_only_when_that_makes_it_due() -> None:
    sizes = [50 * MIB] * 6 + [6 * MIB] * 8
    assert tiers_to_merge(sizes, TARGET, 8) == list(range(6, 14))  # 6 + the merged file: 7 of 8
    files_at_target = [TARGET, int(TARGET * 0.985)]
    assert tiers_to_merge(files_at_target + [600 * MIB // 8] * 8, TARGET, 8) == list(range(2, 10))
    assert tiers_to_merge(files_at_target * 8, TARGET, 8) == []  # rolled files are done
