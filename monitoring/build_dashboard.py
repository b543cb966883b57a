"""Builds the icesink Grafana dashboard with Grafana's foundation SDK.

Run ``python monitoring/build_dashboard.py`` after changing a panel; it rewrites
``monitoring/grafana/dashboards/icesink.json``. A test checks that the committed JSON
is what this script builds, that every panel has a data source, a unit and a title,
and that every expression returns data from a real Prometheus fed by a real stream.

Variables: ``datasource`` (any Prometheus), ``table`` and ``sink_id`` (multi-value,
with All, from the labels of ``icesink_rows_written_total``); every panel filters on
them. The "Tables" row ranks the selected tables (``topk`` over the ``table`` label).
The rows' panels are in :mod:`monitoring.dashboard`, one module per group of rows; this
script puts them on the board in order and numbers the panels.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model

_CHECKOUT = str(Path(__file__).resolve().parent.parent)
if _CHECKOUT not in sys.path:  # run as a script: its own folder is on the path, not the checkout
    sys.path.insert(0, _CHECKOUT)

from monitoring.dashboard.files import (  # noqa: E402
    with_commits,
    with_data_files,
    with_staging,
    with_write_tasks,
)
from monitoring.dashboard.latency import with_latency, with_schema  # noqa: E402
from monitoring.dashboard.maintenance import with_maintenance  # noqa: E402
from monitoring.dashboard.panels import DATASOURCE  # noqa: E402
from monitoring.dashboard.tables import with_top_tables  # noqa: E402
from monitoring.dashboard.throughput import with_overview, with_row_outcomes, with_throughput  # noqa: E402

DASHBOARD_PATH = Path(__file__).parent / "grafana" / "dashboards" / "icesink.json"
DASHBOARD_UID = "icesink-overview"


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


def build() -> model.Dashboard:
    """The dashboard model."""
    board = (
        dash.Dashboard("icesink: Iceberg streaming sink")
        .uid(DASHBOARD_UID)
        .description(
            "Rows, files, commits, latency and schema changes of icesink sinks (icesink/metrics.py)."
        )
        .tags(["icesink", "iceberg", "spark"])
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("browser")
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
    )
    for variable in variables():
        board = board.with_variable(variable)

    for row in (
        with_overview,
        with_throughput,
        with_row_outcomes,
        with_data_files,
        with_write_tasks,
        with_commits,
        with_staging,
        with_latency,
        with_schema,
        with_top_tables,
        with_maintenance,  # last, so that the ids of the panels above stay what they were
    ):
        board = row(board)
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
