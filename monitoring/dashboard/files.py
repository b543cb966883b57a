"""The "Data files" and "Commits" rows: the files the write tasks make, and how they are committed."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from monitoring.dashboard.panels import TS, T, graph, increase, quantiles, rate


def with_data_files(board: dash.Dashboard) -> dash.Dashboard:
    """The "Data files" row: file sizes against the target, files committed."""
    board = board.with_row(dash.Row("Data files"))
    board = board.with_panel(
        graph(
            "Data file size",
            "bytes",
            "Median and 95th percentile of the written data files, against the target size.",
            *quantiles("icesink_data_file_size_bytes", "table", T),
            (f"max by (table) (icesink_target_file_size_bytes{{{T}}})", "target {{table}}"),
        )
    )
    board = board.with_panel(
        graph(
            "Data file size / target",
            "percentunit",
            "Written files as a fraction of the target size (alert: IcesinkSmallFiles), and the "
            "average committed file.",
            *quantiles("icesink_data_file_size_ratio", "table", T),
            (
                f"sum by (table) ({rate('icesink_bytes_written_total', T)})"
                f" / sum by (table) ({rate('icesink_files_written_total', T)})"
                f" / max by (table) (icesink_target_file_size_bytes{{{T}}})",
                "average {{table}}",
            ),
        )
    )
    board = board.with_panel(
        graph(
            "Files committed per second",
            "suffix: files/s",
            "Data files committed.",
            (f"sum by (table) ({rate('icesink_files_written_total')})", "{{table}}"),
            width=8,
        )
    )
    return board


def with_write_tasks(board: dash.Dashboard) -> dash.Dashboard:
    """The end of the "Data files" row: what one write task held open, its memory and its time."""
    board = board.with_panel(
        graph(
            "Open writers (max per task)",
            "short",
            "Most partition writers one write task held open at once in the last micro-batch.",
            (f"max by (table) (icesink_open_writers_max{{{T}}})", "{{table}}"),
            width=8,
        )
    )
    board = board.with_panel(
        graph(
            "Writer memory (max per task)",
            "bytes",
            "Most bytes one write task's open writers buffered at once in the last micro-batch "
            "(bounded by write.fanout.memory-budget-bytes), and the highest resident memory of a "
            "Python worker during a write task.",
            (f"max by (table) (icesink_buffered_bytes_max{{{T}}})", "buffered {{table}}"),
            (f"max by (table) (icesink_task_peak_rss_bytes{{{T}}})", "worker RSS {{table}}"),
            width=8,
        )
    )
    board = board.with_panel(
        graph(
            "Write task time (max per task)",
            "s",
            "The longest a write task of the last micro-batch spent receiving its rows (input: "
            "bound by Spark's reading and conversion of them) and finishing its files after the "
            "last ones arrived (close: mostly Parquet encoding of what the writers held).",
            (f"max by (table, phase) (icesink_write_task_seconds_max{{{T}}})", "{{phase}} {{table}}"),
            width=8,
        )
    )
    return board


def with_commits(board: dash.Dashboard) -> dash.Dashboard:
    """The "Commits" row: commits, their attempts and conflicts, micro-batches by outcome."""
    board = board.with_row(dash.Row("Commits"))
    board = board.with_panel(
        graph(
            "Commits by outcome",
            "suffix: commits/s",
            "Commits per second, by outcome (alert: IcesinkCommitFailures).",
            (
                f"sum by (table, outcome) ({rate('icesink_commits_total')})",
                "{{outcome}} {{table}}",
            ),
            width=8,
        )
    )
    board = board.with_panel(
        graph(
            "Commit attempts and conflicts",
            "suffix: /s",
            "Commit attempts, and those lost to concurrent writers (alert: IcesinkCommitConflictsHigh).",
            (f"sum by (table) ({rate('icesink_commit_attempts_total')})", "attempts {{table}}"),
            (
                f"sum by (table) ({rate('icesink_commit_conflicts_total')})",
                "conflicts {{table}}",
            ),
            width=8,
        )
    )
    board = board.with_panel(
        graph(
            "Micro-batches by outcome",
            "short",
            "Micro-batches committed, empty, or skipped as already committed replays, per interval.",
            (
                f"sum by (table, outcome) ({increase('icesink_batches_total')})",
                "{{outcome}} {{table}}",
            ),
            width=8,
        )
    )
    return board


def with_staging(board: dash.Dashboard) -> dash.Dashboard:
    """The end of the "Commits" row: what is staged, replays skipped, orphan files."""
    board = board.with_panel(
        graph(
            "Staged, not yet committed",
            "bytes",
            "Bytes of written data files waiting for the next commit (alert: IcesinkStagedBytesGrowing).",
            (f"sum by (table, sink_id) (icesink_staged_bytes{{{TS}}})", "{{sink_id}}"),
            width=8,
        )
    )
    board = board.with_panel(
        graph(
            "Staged files",
            "short",
            "Data files waiting for the next commit.",
            (f"sum by (table, sink_id) (icesink_staged_files{{{TS}}})", "{{sink_id}}"),
            width=8,
        )
    )
    board = board.with_panel(
        graph(
            "Replays skipped and orphan files",
            "short",
            "Replayed batches found already committed (alert: IcesinkReplaysSkipped) and files of "
            "crashed attempts found at recovery (alert: IcesinkOrphanFilesDeleted), per interval.",
            (
                f"sum by (table) ({increase('icesink_replays_skipped_total')})",
                "replays {{table}}",
            ),
            (
                f"sum by (table, action) ({increase('icesink_orphan_files_total', T)})",
                "orphans {{action}} {{table}}",
            ),
            width=8,
        )
    )
    return board
