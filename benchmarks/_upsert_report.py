"""The summary and Markdown tables of :mod:`benchmarks.upsert`, from its results as written to JSON."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks._probes import percentile

WARM_UP_BATCHES = 1  # batches not counted in the medians


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Medians over the batches (from the JSON written, so that ``--render`` recomputes them)."""
    mine = [b for b in result["icesink"] if b["batch"] > WARM_UP_BATCHES] or result["icesink"]
    theirs = [b for b in result["pyiceberg"] if b["batch"] > WARM_UP_BATCHES] or result["pyiceberg"]
    both = {b["batch"]: b for b in theirs}
    ratios = [b["changes_per_s"] / both[b["batch"]]["changes_per_s"] for b in mine if b["batch"] in both]

    def median(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in rows) if rows else 0.0

    keys = [b["changes"] for b in mine]
    with_files = [b for b in mine if "files_per_key" in b]
    return {
        "icesink_changes_per_s": median(mine, "changes_per_s"),
        "icesink_same_batches_changes_per_s": median(
            [b for b in mine if b["batch"] in both], "changes_per_s"
        ),
        "pyiceberg_changes_per_s": median(theirs, "changes_per_s"),
        "ratio": statistics.median(ratios) if ratios else None,
        "files_read": median(mine, "files_read"),
        "files_in_table": median(mine, "files_in_table"),
        "files_read_share": median([{"s": b["files_read"] / max(1, b["files_in_table"])} for b in mine], "s"),
        "buckets_read": median(mine, "buckets_read"),
        "keys_per_task": median(mine, "keys_per_task_mean"),
        "files_per_key": median(with_files, "files_per_key") if with_files else None,
        "rows_read_per_key": statistics.median(b["rows_read"] / k for b, k in zip(mine, keys, strict=True)),
        "row_groups_skipped": median(mine, "row_groups_skipped"),
        "delete_files_written": median(mine, "delete_files_written"),
        "data_files_written": median(mine, "data_files_written"),
        "lookup_s": median(mine, "lookup_s"),
        "plan_and_commit_p50_p99": [percentile([b["plan_and_commit_s"] for b in mine], q) for q in (50, 99)],
        "seconds_split": {
            k: median(mine, k) for k in ("change_frames_s", "write_s", "lookup_s", "plan_and_commit_s")
        },
    }


def markdown(result: dict[str, Any]) -> str:
    """The tables of ``benchmarks/README.md``'s section on upserts."""
    c, s, reads, load = result["config"], summarize(result), result["reads"], result["machine"]
    counted = len(result["icesink"]) - WARM_UP_BATCHES or 1
    ratio = f"{s['ratio']:.1f}x" if s["ratio"] is not None else "-"
    split = ", ".join(
        f"{k.removesuffix('_s').replace('_', ' ')} {v:.2f} s" for k, v in s["seconds_split"].items()
    )
    per_key = f"{s['files_per_key']:.1f}" if s["files_per_key"] is not None else "-"
    commit = " / ".join(f"{x * 1000:,.0f}" for x in s["plan_and_commit_p50_p99"])
    theirs = (
        f"pyiceberg on batches 2 to {c['pyiceberg_batches'] + 1}" if result["pyiceberg"] else "no pyiceberg"
    )
    same = s["icesink_same_batches_changes_per_s"]
    reference_rows = [
        f"| icesink, the pyiceberg batches | {same:,.0f} | {ratio} | | | | | | | | |",
        f"| pyiceberg `upsert` + `delete` | {s['pyiceberg_changes_per_s']:,.0f} | 1.0x | | | | | | | | |",
    ]
    if not result["pyiceberg"]:
        reference_rows = []
    lines = [
        f"{c['rows']:,} rows, bucket({c['buckets']}, id), {c['batches']} batches of {c['batch_size']:,} "
        f"changes (seed {c['seed']}; batch 1 a warm-up, not counted), {theirs}, "
        f"{c['master']}; load average {load['load_average_start'][0]} at the "
        f"start, {load['load_average_end'][0]} at the end",
        "",
        "| | changes/s (median) | x pyiceberg (same batches) | data files read per batch / in table "
        "| buckets read | files a key is looked up in | keys per lookup task | key rows read per change "
        "| row groups skipped "
        "| delete files written | plan + commit p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| icesink, {counted} batches | {s['icesink_changes_per_s']:,.0f} | "
        f"| {s['files_read']:.0f} / {s['files_in_table']:.0f} ({s['files_read_share']:.0%}) "
        f"| {s['buckets_read']:.0f} | {per_key} | {s['keys_per_task']:,.0f} "
        f"| {s['rows_read_per_key']:.1f} "
        f"| {s['row_groups_skipped']:.0f} | {s['delete_files_written']:.0f} | {commit} ms |",
        *reference_rows,
        "",
        f"icesink per batch (medians): {split}.",
        "",
        "| full scan of the icesink table | data files | delete files | pyiceberg to Arrow "
        "| DuckDB iceberg_scan |",
        "|---|---|---|---|---|",
    ]
    for label, key in (("before compaction", "before_compaction"), ("after compaction", "after_compaction")):
        r = reads[key]
        lines.append(
            f"| {label} ({r['rows']:,} rows) | {r['data_files']} | {r['delete_files']} "
            f"| {r['pyiceberg_s']:.2f} s | {r['duckdb_s']:.2f} s |"
        )
    k = reads["compaction"]
    lines += [
        "",
        f"Compaction of the {c['buckets']} buckets: {k['seconds']:.1f} s, {k['rewritten_data_files']} data "
        f"files and {k['removed_delete_files']} delete files into {k['added_data_files']} data files.",
    ]
    return "\n".join(lines)
