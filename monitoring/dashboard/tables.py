"""The "Tables" row: the busiest and the most lagging of the selected tables."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from monitoring.dashboard.panels import TS, graph, rate

#: Tables shown by the "Top tables" panels.
TOP_TABLES = 10


def with_top_tables(board: dash.Dashboard) -> dash.Dashboard:
    """The "Tables" row: the busiest and the most lagging of the selected tables.

    Last on the board so that the ids of the panels above stay what they were.
    """
    board = board.with_row(dash.Row("Tables"))
    board = board.with_panel(
        graph(
            "Top tables by rows/s",
            "suffix: rows/s",
            f"The {TOP_TABLES} selected tables committing the most rows per second (a sink writing many "
            'tables: route.by); past metrics.max-tables tables, the rest count as table="_other".',
            (f"topk({TOP_TABLES}, sum by (table) ({rate('icesink_rows_written_total')}))", "{{table}}"),
        )
    )
    return board.with_panel(
        graph(
            "Top tables by Kafka lag",
            "short",
            f"The {TOP_TABLES} selected tables whose queries are furthest behind the latest Kafka "
            "offsets (summed over partitions; a query writing many tables reports its lag under "
            "its sink's table label).",
            (
                f"topk({TOP_TABLES}, max by (table) (icesink_source_offsets_behind_latest{{{TS}}}))",
                "{{table}}",
            ),
        )
    )
