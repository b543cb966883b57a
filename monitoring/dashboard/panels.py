"""The dashboard's building blocks: PromQL for the selected tables and sinks, and the two kinds of panel."""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model

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
