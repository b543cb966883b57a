"""The files of ``monitoring/`` are valid, tested, and agree with ``icesink/metrics.py``.

- ``promtool check`` accepts the rules and the scrape config, ``promtool test rules``
  passes, and every alert has a firing and a silent unit test;
- every metric name the dashboard, the rules or docs/monitoring.md use is defined by
  :class:`~icesink.metrics.SinkMetrics`, and every metric it defines is on the dashboard
  and in docs/monitoring.md;
- the dashboard JSON is what ``monitoring/build_dashboard.py`` builds, survives a round
  trip through Grafana's foundation SDK model unchanged, and each panel has a data
  source, a unit and a title.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard, RowPanel

from icesink import SinkMetrics
from tests.e2e.conftest import DASHBOARD, MONITORING, RULE_TESTS, RULES
from tests.e2e.monitoring_files import (
    alert_rules,
    dashboard_panels,
    dashboard_queries,
    dashboard_variable_queries,
    metric_names,
)

pytestmark = pytest.mark.e2e

PROMETHEUS_CONFIG = MONITORING / "prometheus" / "prometheus.yml"
GUIDE = MONITORING.parent / "docs" / "monitoring.md"


def _promtool(promtool: str, *args: str | Path) -> str:
    result = subprocess.run(
        [promtool, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, f"promtool {args}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _defined_metrics() -> dict[str, set[str]]:
    """Family name -> sample names, of a SinkMetrics whose label sets all exist."""
    metrics = SinkMetrics(target_file_size_bytes=1 << 20)
    metrics.start_sink("db.t", "s", "query")
    families: dict[str, set[str]] = {}
    for family in metrics.registry.collect():
        # a histogram's family name is documented, but PromQL reads its _bucket/_sum/_count
        name = f"{family.name}_total" if family.type == "counter" else family.name
        families[name] = ({sample.name for sample in family.samples} | {name}) - {f"{family.name}_created"}
    return families


def _build_dashboard_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_dashboard", MONITORING / "build_dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- Prometheus files -------------------------------------------------------------------


def test_promtool_accepts_rules_and_scrape_config(promtool: str) -> None:
    assert "SUCCESS: 14 rules found" in _promtool(promtool, "check", "rules", RULES)
    _promtool(promtool, "check", "config", PROMETHEUS_CONFIG)


def test_promtool_rule_unit_tests_pass(promtool: str) -> None:
    output = _promtool(promtool, "test", "rules", RULE_TESTS)
    assert "SUCCESS" in output


def test_every_alert_has_a_firing_and_a_silent_unit_test() -> None:
    fires: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule.name for rule in alert_rules(RULES)}
    assert names == fires, f"alerts without a firing test: {names - fires}"
    assert names == silent, f"alerts without a silent test: {names - silent}"


def test_alert_rules_name_severity_and_explain() -> None:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            assert rule["alert"].startswith("Icesink"), rule
            assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule
            assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule


# --- names --------------------------------------------------------------------------------


def test_metric_names_agree_between_sink_dashboard_rules_and_readme() -> None:
    defined = _defined_metrics()
    samples = set().union(*defined.values())
    dashboard_text = " ".join(expr for _, expr in dashboard_queries(DASHBOARD))
    dashboard_text += " ".join(dashboard_variable_queries(DASHBOARD))
    sources = {
        "dashboard": metric_names(dashboard_text),
        "alert rules": metric_names(RULES.read_text()),
        "rule tests": metric_names(RULE_TESTS.read_text()),
        "docs/monitoring.md": metric_names(GUIDE.read_text()),
    }
    for source, used in sources.items():
        unknown = used - samples - set(defined)
        assert not unknown, f"{source} uses metrics icesink/metrics.py does not define: {sorted(unknown)}"
    used_on_dashboard = sources["dashboard"]
    missing = [family for family, names in defined.items() if not names & used_on_dashboard]
    assert not missing, f"metrics not shown on the dashboard: {missing}"
    readme_names = metric_names(GUIDE.read_text())
    undocumented = sorted(set(defined) - readme_names)
    assert not undocumented, f"metrics missing from docs/monitoring.md: {undocumented}"
    assert len(defined) >= 25


def test_metric_labels_are_low_cardinality() -> None:
    allowed = {"table", "sink_id", "step", "outcome", "kind", "action", "reason", "le"}
    metrics = SinkMetrics()
    metrics.start_sink("db.t", "s")
    for family in metrics.registry.collect():
        for sample in family.samples:
            assert set(sample.labels) <= allowed, (sample.name, sample.labels)


# --- Grafana dashboard ---------------------------------------------------------------------


def test_dashboard_json_is_what_the_builder_builds() -> None:
    builder = _build_dashboard_module()
    stale = "monitoring/grafana/dashboards/icesink.json is stale: run monitoring/build_dashboard.py"
    assert builder.to_json(builder.build()) == DASHBOARD.read_text(), stale


def test_dashboard_round_trips_through_the_grafana_sdk_model() -> None:
    register_default_plugins()
    data = json.loads(DASHBOARD.read_text())
    model = Dashboard.from_json(data)
    assert json.loads(json.dumps(model, cls=JSONEncoder)) == data  # nothing unknown, nothing lost
    assert model.uid and model.title and model.panels
    for panel in model.panels:
        if isinstance(panel, RowPanel):
            continue
        assert cogruntime.panelcfg_config(panel.type_val) is not None, f"unknown panel type {panel.type_val}"
        assert type(panel.options).__module__.endswith(panel.type_val), "options not decoded by the SDK"
        for target in panel.targets or []:
            assert type(target).__module__.endswith(".prometheus"), f"{panel.title}: not a Prometheus query"


def test_every_panel_has_datasource_unit_title_and_queries() -> None:
    board = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = dashboard_panels(DASHBOARD)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        assert panel.get("title"), panel
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{panel['title']}: no unit"
        assert panel.get("description"), f"{panel['title']}: no description"
        targets: list[dict[str, Any]] = panel["targets"]
        assert targets, f"{panel['title']}: no query"
        ref_ids = [t["refId"] for t in targets]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        assert all(t["expr"].strip() for t in targets), panel["title"]


def test_grafana_provisioning_points_at_the_dashboard() -> None:
    provisioning = MONITORING / "grafana" / "provisioning"
    datasources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    assert datasources["apiVersion"] == 1
    assert [d["type"] for d in datasources["datasources"]] == ["prometheus"]
    dashboards = yaml.safe_load((provisioning / "dashboards" / "icesink.yml").read_text())
    assert dashboards["apiVersion"] == 1
    (provider,) = dashboards["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]
    assert Path(DASHBOARD).exists()
