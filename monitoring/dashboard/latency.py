"""The "Latency" and "Schema" rows: how long the steps take, and the schema changes and their lock."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from monitoring.dashboard.panels import TS, T, graph, increase, quantiles, rate


def with_latency(board: dash.Dashboard) -> dash.Dashboard:
    """The "Latency" row: each step of a micro-batch, and whole micro-batches."""
    board = board.with_row(dash.Row("Latency"))
    board = board.with_panel(
        graph(
            "Step duration",
            "s",
            "Median and 95th percentile of each step of a micro-batch, on the driver.",
            *quantiles("icesink_step_duration_seconds", "table, step", T),
        )
    )
    board = board.with_panel(
        graph(
            "Micro-batch duration",
            "s",
            "Median and 95th percentile of whole micro-batches (Spark's batchDuration).",
            *quantiles("icesink_batch_duration_seconds", "table, sink_id", TS),
        )
    )
    return board


def with_schema(board: dash.Dashboard) -> dash.Dashboard:
    """The "Schema" row: schema changes and checks, the lock and its waits."""
    board = board.with_row(dash.Row("Schema"))
    board = board.with_panel(
        graph(
            "Schema changes",
            "short",
            "Schema changes applied to the table, by kind, per interval.",
            (
                f"sum by (table, kind) ({increase('icesink_schema_changes_total', T)})",
                "{{kind}} {{table}}",
            ),
            width=6,
        )
    )
    board = board.with_panel(
        graph(
            "Schema checks",
            "short",
            "Batch schemas compared with the table's, by outcome, per interval; only 'evolved' and "
            "'already_applied' took the lock.",
            (
                f"sum by (table, outcome) ({increase('icesink_schema_checks_total', T)})",
                "{{outcome}} {{table}}",
            ),
            width=6,
        )
    )
    board = board.with_panel(
        graph(
            "Schema lock and commit conflicts",
            "suffix: /s",
            "Times per second the table's schema lock was taken, and schema commits lost to a "
            "concurrent writer.",
            (f"sum by (table) ({rate('icesink_schema_lock_acquisitions_total', T)})", "lock {{table}}"),
            (f"sum by (table) ({rate('icesink_schema_commit_conflicts_total', T)})", "conflicts {{table}}"),
            width=6,
        )
    )
    board = board.with_panel(
        graph(
            "Schema lock wait",
            "s",
            "Median and 95th percentile of the wait for the table's schema lock.",
            *quantiles("icesink_schema_lock_wait_seconds", "table", T),
            width=6,
        )
    )
    return board
