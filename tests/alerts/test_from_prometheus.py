"""Acceptance 1 of issue 14: a Prometheus with a large public rule set and no local packs.

A real prometheus evaluates the kube-prometheus rules (fixtures/rules/kube-prometheus, the
PrometheusRule objects' groups written as plain rule files, as the operator does); `oncall
alerts` lists every alerting rule with the state Prometheus reports, and `--match` filters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from oncall.alerts.loader import load_rule_files
from tests.alerts.kube_prometheus import (
    FIXTURES,
    alerting_groups,
    every_rule_evaluated,
    plain_rule_files,
)
from tests.cli_runner import run_oncall
from tests.harness.servers import RunningServer, prometheus_server
from tests.harness.waiting import wait_until


def _states(groups: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """Prometheus' state per (group, name), rules of one group and name taken together."""
    states: dict[tuple[str, str], str] = {}
    order = ("inactive", "pending", "firing")
    for group in groups:
        for rule in group["rules"]:
            key = (group["name"], rule["name"])
            here = rule["state"]
            if key not in states or order.index(here) > order.index(states[key]):
                states[key] = here
    return states


@pytest.fixture(scope="module")
def kube_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Any:
    directory = tmp_path_factory.mktemp("kube-prometheus")
    files = plain_rule_files(directory)
    with prometheus_server(directory / "prom", rule_files=files) as server:

        def evaluated() -> bool:
            groups = alerting_groups(server.url)
            return (
                bool(groups)
                and every_rule_evaluated(groups)
                and _states(groups)[("general.rules", "Watchdog")] == "firing"
            )

        wait_until(evaluated, within=60, what="every kube-prometheus group evaluated")
        yield server


def _settings(tmp_path: Path, url: str, extra: str = "") -> Path:
    config = tmp_path / "oncall.yaml"
    config.write_text(f"prometheus: {{url: '{url}', timeout: 5s}}\nalerts:\n  packs: []\n{extra}")
    return config


def test_every_rule_prometheus_evaluates_is_listed_with_its_state(
    kube_prometheus: RunningServer, tmp_path: Path
) -> None:
    config = _settings(tmp_path, kube_prometheus.url)
    before = _states(alerting_groups(kube_prometheus.url))
    result = run_oncall("alerts", "-o", "json", "--config", str(config), cwd=tmp_path)
    after = _states(alerting_groups(kube_prometheus.url))
    assert result.code == 1, result.stderr  # Watchdog fires
    alerts = json.loads(result.stdout)["alerts"]
    listed = {(a["group"], a["name"]): a for a in alerts}
    assert len(listed) == len(alerts)  # one row per group and name
    loaded = load_rule_files([FIXTURES]).rules
    # Prometheus evaluates every rule of the files; some names repeat within their group.
    assert len(loaded) == 139 and len(before) == len({(r.group, r.name) for r in loaded}) == 125
    assert set(listed) == set(before)
    for key, alert in listed.items():
        # A state that changed during the call (a `for` running out) may be either.
        assert alert["state"] in {before[key], after[key]}, key
        assert alert["source"] == "prometheus" and alert["last_evaluation"] is not None
    states = {a["state"] for a in alerts}
    assert {"firing", "inactive"} <= states
    crash = listed[("kubernetes-apps", "KubePodCrashLooping")]
    assert crash["labels"] == {"severity": "warning"} and "kube_pod_container" in crash["expr"]
    assert crash["annotations"]["runbook_url"].startswith("https://runbooks.prometheus-operator")


def test_match_filters_by_label_matcher_and_by_text(
    kube_prometheus: RunningServer, tmp_path: Path
) -> None:
    config = _settings(tmp_path, kube_prometheus.url)
    args = ("alerts", "-o", "json", "--config", str(config))
    every = json.loads(run_oncall(*args, cwd=tmp_path).stdout)["alerts"]
    critical = json.loads(run_oncall(*args, "--match", 'severity="critical"', cwd=tmp_path).stdout)
    wanted = {a["name"] for a in every if a["labels"].get("severity") == "critical"}
    assert wanted and {a["name"] for a in critical["alerts"]} == wanted
    pods = run_oncall(*args, "--match", '{alertname=~"KubePod.*", severity!="critical"}',
                      cwd=tmp_path)  # fmt: skip
    names = {a["name"] for a in json.loads(pods.stdout)["alerts"]}
    assert names == {"KubePodCrashLooping", "KubePodNotReady"}
    words = run_oncall(*args, "--match", "watchdog", cwd=tmp_path)
    assert [a["name"] for a in json.loads(words.stdout)["alerts"]] == ["Watchdog"]
    assert words.code == 1  # the kept row fires
    nothing = run_oncall("alerts", "--config", str(config), "--match", 'team="none"',
                         cwd=tmp_path)  # fmt: skip
    assert nothing.code == 0
    assert f"no alert of {len(every)} matches" in nothing.stderr
    bad = run_oncall(*args, "--match", "severity=page", cwd=tmp_path)
    assert bad.code == 2 and "needs quotes" in bad.stderr


def test_from_prometheus_none_or_matchers_selects_and_local_rules_take_the_row(
    kube_prometheus: RunningServer, tmp_path: Path
) -> None:
    none = _settings(tmp_path, kube_prometheus.url, "  from_prometheus: none\n")
    result = run_oncall("alerts", "--config", str(none), cwd=tmp_path)
    assert result.code == 0 and "no alerting rules" in result.stderr
    local = tmp_path / "mine.yaml"
    local.write_text(
        "groups:\n- name: general.rules\n  rules:\n  - alert: Watchdog\n    expr: vector(1)\n"
        "    annotations: {runbook: runbooks/Watchdog.yaml}\n"
    )
    some = _settings(
        tmp_path,
        kube_prometheus.url,
        f"  files: ['{tmp_path}/m*.yaml']\n  from_prometheus: 'severity=\"critical\"'\n",
    )
    alerts = json.loads(run_oncall("alerts", "-o", "json", "--config", str(some),
                                   cwd=tmp_path).stdout)["alerts"]  # fmt: skip
    watchdog = [a for a in alerts if a["name"] == "Watchdog"]
    assert len(watchdog) == 1 and watchdog[0]["file"] == f"{local}:4"
    assert watchdog[0]["source"] == "prometheus" and watchdog[0]["state"] == "firing"
    assert watchdog[0]["runbook"] == "runbooks/Watchdog.yaml"
    assert {a["labels"].get("severity") for a in alerts[1:]} == {"critical"}
