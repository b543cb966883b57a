"""Builds the icesink Grafana dashboard with Grafana's foundation SDK.

Run ``python monitoring/build_dashboard.py`` after changing a panel; it rewrites
``monitoring/grafana/dashboards/icesink.json``. A test checks that the committed JSON
is what this script builds, that every panel has a data source, a unit and a title,
and that every expression returns data from a real Prometheus fed by a real stream.

Variables: ``datasource`` (any Prometheus), ``table`` and ``sink_id`` (multi-value,
with All, from the labels of ``icesink_rows_written_total``); every panel filters on
them. The "Tables" row ranks the selected tables (``topk`` over the ``table`` label).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

DASHBOARD_PATH = Path(__file__).parent / "grafana" / "dashboards" / "icesink.json"
DASHBOARD_UID = "icesink-overview"
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")

# Label matchers of the variables.
T = 'table=~"$table"'
TS = 'table=~"$table", sink_id=~"$sink_id"'

Query = tuple[str, str]  # (PromQL, legend)


def gauge(metric: str, matcher: str = TS) -> str:
    """A metric for the selected tables and sinks."""
    return f"{metric}{{{matcher}}}"


def increase(metric: str, matcher: str = TS) -> str:
    """``increase()`` of a counter over Grafana's rate interval, for the selected tables and sinks."""
    return f"increase({metric}{{{matcher}}}[$__rate_interval])"


def rate(metric: str, matcher: str = TS) -> str:
    """``rate()`` of a counter over Grafana's rate interval, for the selected tables and sinks."""
    return f"rate({metric}{{{matcher}}}[$__rate_interval])"


def _targets(queries: tuple[Query, ...], instant: bool) -> list[prometheus.Dataquery]:
    targets = []
    for i, (expr, legend) in enumerate(queries):
        target = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + i))
        targets.append(target.instant() if instant else target.range())
    return targets


def graph(title: str, unit: str, description: str, *queries: Query, width: int = 12) -> timeseries.Panel:
    """A time series panel."""
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(8)
        .span(width)
        .fill_opacity(10)
        .legend(
            common_builders.VizLegendOptions()
            .display_mode(common.LegendDisplayMode.TABLE)
            .placement(common.LegendPlacement.BOTTOM)
            .show_legend(True)
            .calcs(["lastNotNull", "max"])
        )
    )
    for target in _targets(queries, instant=False):
        panel = panel.with_target(target)
    return panel


def single(title: str, unit: str, description: str, *queries: Query, width: int = 4) -> stat.Panel:
    """A stat panel showing the last value of each series."""
    panel = (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .height(4)
        .span(width)
        .graph_mode(common.BigValueGraphMode.AREA)
        .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    for target in _targets(queries, instant=True):
        panel = panel.with_target(target)
    return panel


def quantiles(metric: str, by: str, matcher: str) -> tuple[Query, ...]:
    """p50 and p95 of a histogram, by the given labels."""
    legend = "{{" + by.rsplit(", ", maxsplit=1)[-1] + "}}"
    return tuple(
        (
            f"histogram_quantile({q}, sum by ({by}, le) ({rate(metric + '_bucket', matcher)}))",
            f"p{round(q * 100)} {legend}",
        )
        for q in (0.5, 0.95)
    )


def variables() -> list[dash.DatasourceVariable | dash.QueryVariable]:
    """The data source, table and sink id variables."""
    return [
        dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        dash.QueryVariable("table")
        .label("Table")
        .datasource(DATASOURCE)
        .query("label_values(icesink_rows_written_total, table)")
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*"),
        dash.QueryVariable("sink_id")
        .label("Sink id")
        .datasource(DATASOURCE)
        .query('label_values(icesink_rows_written_total{table=~"$table"}, sink_id)')
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*"),
    ]


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


def build() -> model.Dashboard:
    """The dashboard model."""
    board = (
        dash.Dashboard("icesink: Iceberg streaming sink")
        .uid(DASHBOARD_UID)
        .description("Rows, files, commits, latency and schema changes of icesink sinks (sink/metrics.py).")
        .tags(["icesink", "iceberg", "spark"])
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
    )
    for variable in variables():
        board = board.with_variable(variable)

    board = board.with_row(dash.Row("Overview"))
    board = board.with_panel(
        single(
            "Since last commit",
            "s",
            "Seconds since the last successful commit of each sink (alert: IcesinkNoRecentCommit).",
            (
                f"time() - max by (table, sink_id) ({gauge('icesink_last_commit_timestamp_seconds')})",
                "{{sink_id}}",
            ),
        )
    )
    board = board.with_panel(
        single(
            "Last committed batch",
            "none",
            "Id of the last micro-batch committed by each sink.",
            (f"max by (table, sink_id) (icesink_last_committed_batch_id{{{TS}}})", "{{sink_id}}"),
        )
    )
    board = board.with_panel(
        single(
            "Rows written",
            "short",
            "Rows committed in the selected time range.",
            (f"sum(increase(icesink_rows_written_total{{{TS}}}[$__range]))", "rows"),
        )
    )
    board = board.with_panel(
        single(
            "Rows dead-lettered",
            "short",
            "Rows sent to the dead-letter table in the selected time range "
            "(alert: IcesinkDeadLetterRateHigh).",
            (f"sum(increase(icesink_dead_letter_rows_total{{{TS}}}[$__range]))", "rows"),
        )
    )
    board = board.with_panel(
        single(
            "Failed commits",
            "short",
            "Commits that failed in the selected time range (alert: IcesinkCommitFailures).",
            (f'sum(increase(icesink_commits_total{{{TS}, outcome="failed"}}[$__range]))', "failed"),
        )
    )
    board = board.with_panel(
        single(
            "Sink uptime",
            "s",
            "Seconds since the process started writing as each sink.",
            (
                f"time() - max by (table, sink_id) ({gauge('icesink_sink_start_timestamp_seconds')})",
                "{{sink_id}}",
            ),
        )
    )

    board = board.with_row(dash.Row("Throughput"))
    board = board.with_panel(
        graph(
            "Rows per second",
            "suffix: rows/s",
            "Rows read by the query (its progress) and rows committed or dead-lettered by the sink.",
            (f"sum by (table) ({rate('icesink_input_rows_total')})", "read {{table}}"),
            (f"sum by (table) ({rate('icesink_rows_written_total')})", "written {{table}}"),
            (
                f"sum by (table) ({rate('icesink_dead_letter_rows_total')})",
                "dead-lettered {{table}}",
            ),
        )
    )
    board = board.with_panel(
        graph(
            "Streaming progress",
            "suffix: rows/s",
            "Spark's progress: rate at which rows arrived and were processed over the last micro-batch.",
            (f"sum by (table, sink_id) (icesink_input_rows_per_second{{{TS}}})", "input {{sink_id}}"),
            (f"sum by (table, sink_id) (icesink_processed_rows_per_second{{{TS}}})", "processed {{sink_id}}"),
        )
    )
    board = board.with_panel(
        graph(
            "Bytes written per second",
            "Bps",
            "Data file bytes committed.",
            (f"sum by (table) ({rate('icesink_bytes_written_total')})", "{{table}}"),
        )
    )
    board = board.with_panel(
        graph(
            "Kafka offsets behind latest",
            "short",
            "Offsets between the end of the last micro-batch and the latest offsets, summed over partitions; "
            "a gap where the source lost its brokers (the lag is then unknown).",
            (f"max by (table, sink_id) (icesink_source_offsets_behind_latest{{{TS}}})", "{{sink_id}}"),
        )
    )
    board = board.with_panel(
        graph(
            "Kafka source connected",
            "short",
            "1 while the query's source answers (each progress or idle report), 0 once it failed because "
            "no broker answered within kafka.broker-timeout-s.",
            (f"min by (table, sink_id) (icesink_source_connected{{{TS}}})", "{{sink_id}}"),
        )
    )

    board = board.with_panel(
        graph(
            "Dead-lettered rows and skipped records by reason",
            "short",
            "Rows sent to the dead-letter table per interval, by why they could not be converted; "
            "Kafka records skipped by design (Debezium tombstones), by reason.",
            (
                f"sum by (table, reason) ({increase('icesink_dead_letter_reasons_total', T)})",
                "{{reason}} {{table}}",
            ),
            (
                f"sum by (table, reason) ({increase('icesink_source_records_skipped_total', T)})",
                "skipped: {{reason}} {{table}}",
            ),
        )
    )
    board = board.with_panel(
        graph(
            "Upserts per second",
            "suffix: /s",
            "write.mode=upsert: keys inserted or replaced, keys deleted, position delete files committed "
            "(many delete files slow every reader: compact the table).",
            (f"sum by (table) ({rate('icesink_upserted_keys_total')})", "upserted keys {{table}}"),
            (f"sum by (table) ({rate('icesink_deleted_keys_total')})", "deleted keys {{table}}"),
            (f"sum by (table) ({rate('icesink_delete_files_total')})", "delete files {{table}}"),
            width=24,
        )
    )

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
    board = with_top_tables(board)
    built = board.build()
    for number, panel in enumerate(built.panels or [], start=1):
        panel.id_val = number  # stable ids: Grafana links and alerts refer to panels by id
    return built


def to_json(board: model.Dashboard) -> str:
    """The dashboard as Grafana's JSON, stable for version control."""
    return json.dumps(board, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the dashboard JSON (to ``argv[0]`` or :data:`DASHBOARD_PATH`)."""
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else DASHBOARD_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_json(build()))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
