"""Reading the files of ``monitoring/``: dashboard queries, alert rules, metric names."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_METRIC_NAME = re.compile(r"\b(icesink_[a-zA-Z0-9_]+)")
# An alert expression is "<signal> <comparison> <threshold>" (the rules file's convention).
_ALERT_EXPR = re.compile(r"^(?P<signal>.+)\s(?P<op>>=|<=|==|!=|>|<)\s*(?P<threshold>-?[0-9][0-9.e+]*)$", re.S)


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    signal: str
    op: str
    threshold: str

    @property
    def as_bool(self) -> str:
        """The expression with ``bool``: one 0/1 series per signal series, firing or not."""
        return f"{self.signal} {self.op} bool {self.threshold}"


def dashboard_panels(path: Path) -> list[dict[str, Any]]:
    """The panels of a dashboard JSON, row panels' children included."""
    board = json.loads(path.read_text())
    panels = []
    for panel in board.get("panels", []):
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def dashboard_queries(path: Path) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every target of a dashboard."""
    return [
        (panel.get("title", ""), target["expr"])
        for panel in dashboard_panels(path)
        for target in panel.get("targets", [])
    ]


def dashboard_variable_queries(path: Path) -> list[str]:
    board = json.loads(path.read_text())
    return [v["query"] for v in board["templating"]["list"] if v.get("type") == "query"]


def alert_rules(path: Path) -> list[AlertRule]:
    """The alerting rules of a rules file, split into signal, comparison and threshold."""
    rules = []
    for group in yaml.safe_load(path.read_text())["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            expr = " ".join(rule["expr"].split())
            match = _ALERT_EXPR.match(expr)
            assert match, f"alert {rule['alert']}: {expr!r} is not '<signal> <comparison> <threshold>'"
            rules.append(AlertRule(rule["alert"], expr, match["signal"], match["op"], match["threshold"]))
    return rules


def metric_names(text: str) -> set[str]:
    """Names of icesink metrics (or their samples) mentioned in ``text``."""
    return set(_METRIC_NAME.findall(text))


def for_grafana_variables(expr: str, table_regex: str = ".*") -> str:
    """``expr`` with the dashboard's variables replaced as Grafana would."""
    return (
        expr.replace("$__rate_interval", "1m")
        .replace("$__range", "10m")
        .replace("$table", table_regex)
        .replace("$sink_id", ".*")
    )
