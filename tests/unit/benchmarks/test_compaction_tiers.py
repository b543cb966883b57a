"""benchmarks/compaction_tiers.py: a short stream's figures, read back from the table it made."""

from __future__ import annotations

from benchmarks.compaction_tiers import run


def test_a_short_stream_is_compacted_and_its_figures_add_up() -> None:
    figures = run(batches=10, files=4, rows=50, target_file_size_bytes=512 << 20)
    # 40 files of 3 KB: 8 make a class due, every other batch; a merged file of 11 KB stays in
    # their class (2-16 KB) and is merged with the next 8, so no class holds 8 files afterwards.
    assert figures["compactions"] == 5, figures
    assert figures["data_files_last"] < 8, figures
    assert figures["data_files_most"] <= 4 + 7, figures
    assert 0 < figures["rewritten_bytes"] <= figures["appended_bytes"], figures
