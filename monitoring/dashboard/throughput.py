"""The "Overview" and "Throughput" rows: how far behind each sink is, and what flows through it."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from monitoring.dashboard.panels import TS, T, gauge, graph, increase, rate, single


def with_overview(board: dash.Dashboard) -> dash.Dashboard:
    """The "Overview" row: the last commit, the rows written and lost, the failures."""
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
    return board


def with_throughput(board: dash.Dashboard) -> dash.Dashboard:
    """The "Throughput" row: rows and bytes per second, and the Kafka source's lag."""
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
    return board


def with_row_outcomes(board: dash.Dashboard) -> dash.Dashboard:
    """The end of the "Throughput" row: rows dead-lettered or skipped, and upserted keys."""
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
        )
    )
    board = board.with_panel(
        graph(
            "Upsert key index",
            "short",
            "upsert.key-index: index entries read from the table's index files per second (a batch "
            "reads only what changed since the last; a steady high rate: raise "
            "upsert.key-index-cache-bytes), files other writers committed that the index read to catch "
            "up per second, and rebuilds from the data files per interval (missing, unreadable, or its "
            "history expired: each one reads every data file once).",
            (f"sum by (table) ({rate('icesink_key_index_entries_read_total')})", "entries read/s {{table}}"),
            (
                f"sum by (table) ({rate('icesink_key_index_catchup_files_total')})",
                "catch-up files/s {{table}}",
            ),
            (
                f"sum by (table) ({increase('icesink_key_index_rebuilds_total')})",
                "rebuilds {{table}}",
            ),
        )
    )
    return board
