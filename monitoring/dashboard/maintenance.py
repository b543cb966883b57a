"""The "Maintenance" row: what the sinks' own table maintenance does after their commits."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from monitoring.dashboard.panels import T, gauge, graph, increase, rate


def with_maintenance(board: dash.Dashboard) -> dash.Dashboard:
    """The "Maintenance" row: runs, their time, the files they rewrote or deleted, what is left.

    After the "Tables" row, so that the ids of the panels above stay what they were.
    """
    board = board.with_row(dash.Row("Maintenance"))
    board = board.with_panel(
        graph(
            "Maintenance runs by outcome",
            "short",
            "Runs of a table's maintenance after a batch: done (nothing left), deferred (the "
            "maintenance.budget-s was spent, work continues after the next batch), conflict (a "
            "compaction or expiry gave way to another commit, tried again later), failed (logged "
            "as ICESINK-MAINTENANCE; the stream goes on).",
            (f"sum by (outcome) ({increase('icesink_maintenance_runs_total', T)})", "{{outcome}}"),
        )
    )
    board = board.with_panel(
        graph(
            "Maintenance time p95",
            "s",
            "95th percentile of the time a table's maintenance took after a batch: the batch's "
            "foreachBatch call is that much longer (at most maintenance.budget-s, plus one unit).",
            (
                "histogram_quantile(0.95, sum by (le, table) "
                f"({rate('icesink_maintenance_duration_seconds_bucket', T)}))",
                "{{table}}",
            ),
        )
    )
    board = board.with_panel(
        graph(
            "Files rewritten and deleted by maintenance",
            "short",
            "Data files compactions replaced (rewritten) and wrote (written), delete files they "
            "dropped, delete files merges replaced (delete_merged) and merged delete files written "
            "(delete_written), files deleted because only expired snapshots reached them, orphan files "
            "deleted; partitions compacted and partitions whose delete files were merged.",
            (f"sum by (action) ({increase('icesink_maintenance_files_total', T)})", "{{action}}"),
            (f"sum by (kind) ({increase('icesink_maintenance_partitions_total', T)})", "{{kind}}"),
            (f"sum ({increase('icesink_snapshots_expired_total', T)})", "snapshots expired"),
            (f"sum ({increase('icesink_maintenance_conflicts_total', T)})", "conflicts"),
        )
    )
    return board.with_panel(
        graph(
            "Live delete files and partitions to compact",
            "short",
            "Delete files in each table's current snapshot (every reader applies each; merged into "
            "one past maintenance.compact.max-delete-files per partition), and partitions planned "
            "for compaction or a merge and not yet done.",
            (f"max by (table) ({gauge('icesink_live_delete_files', T)})", "{{table}} delete files"),
            (
                f"max by (table) ({gauge('icesink_compaction_pending_partitions', T)})",
                "{{table}} to compact",
            ),
        )
    )
