"""Issue 28, acceptance 3: rules of one group that share a name are each evaluated.

kube-prometheus has warning/critical pairs in one group under one name
(KubeletClientCertificateExpiration: `< 604800` warning, `< 86400` critical). A real
Prometheus is loaded with the vendored files (fixtures/rules/kube-prometheus, each
PrometheusRule's groups as a plain rule file) and crafted series: node n1's client certificate
expires in 2.3 days (the warning fires, the critical does not), node n2's server certificate in
14 hours (both fire). oncall's local evaluation of the same files and the board's rows from
Prometheus' own states agree with Prometheus on every rule: the same active label sets per
group and name (each instance with its own rule's `severity`), and every one of the 139
alerting rules evaluated (none dropped for sharing a name).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oncall.alerts.engine import AlertEngine
from oncall.alerts.loader import load_rule_files
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import RuleStatus
from oncall.model.matchers import Selection
from tests.alerts.kube_prometheus import alerting_groups, every_rule_evaluated, plain_rule_files
from tests.harness.servers import RunningServer, prometheus_server
from tests.harness.waiting import wait_until

CLIENT, SERVER = "KubeletClientCertificateExpiration", "KubeletServerCertificateExpiration"
Active = dict[tuple[str, str], set[frozenset[tuple[str, str]]]]


def _samples(end: int) -> str:
    lines = [
        "# TYPE kubelet_certificate_manager_client_ttl_seconds gauge",
        "# TYPE kubelet_certificate_manager_server_ttl_seconds gauge",
    ]
    for ts in range(end - 300, end + 1, 15):
        lines.append(
            f'kubelet_certificate_manager_client_ttl_seconds{{job="kubelet",node="n1"}} 200000 {ts}'
        )
        lines.append(
            f'kubelet_certificate_manager_server_ttl_seconds{{job="kubelet",node="n2"}} 50000 {ts}'
        )
    lines.sort(key=lambda line: (not line.startswith("#"), line.split("{")[0]))
    return "\n".join([*lines, "# EOF", ""])


def _prometheus_active(groups: list[dict[str, Any]]) -> Active:
    active: Active = {}
    for group in groups:
        for rule in group["rules"]:
            found = active.setdefault((group["name"], rule["name"]), set())
            for alert in rule.get("alerts") or []:
                labels = {k: v for k, v in alert["labels"].items() if k != "alertname"}
                found.add(frozenset(labels.items()))
    return active


def _ours(statuses: list[RuleStatus]) -> Active:
    active: Active = {}
    for status in statuses:
        found = active.setdefault((status.rule.group, status.rule.name), set())
        found.update(
            frozenset(i.labels.items())
            for i in status.instances
            if i.state in ("pending", "firing")
        )
    return active


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, list[Path]]]:
    directory = tmp_path_factory.mktemp("same-name")
    files = plain_rule_files(directory)
    samples = _samples(int(time.time()) - 5)
    with prometheus_server(directory / "prom", rule_files=files, openmetrics=samples) as server:

        def evaluated() -> bool:
            groups = alerting_groups(server.url)
            done = every_rule_evaluated(groups)
            active = _prometheus_active(groups) if done else {}
            return done and len(active.get(("kubernetes-system-kubelet", SERVER), ())) == 2

        wait_until(evaluated, within=60, what="every kube-prometheus group evaluated")
        yield server, files


async def test_local_evaluation_and_the_board_agree_with_prometheus_on_every_rule(
    loaded: tuple[RunningServer, list[Path]],
) -> None:
    server, files = loaded
    rules = load_rule_files(files)
    assert rules.problems == [] and len(rules.rules) == 139
    async with PrometheusClient(server.url, timeout=10) as prom:
        local = AlertEngine(prom, rules.rules, source="local")
        local_statuses = await local.refresh()
        board = AlertEngine(prom, rules.rules, source="prometheus")
        board_statuses = await board.refresh()
        # No local rules: every row is one Prometheus alone has (`alerts.from_prometheus`).
        remote = AlertEngine(prom, [], from_prometheus=Selection())
        remote_statuses = await remote.refresh()
    prometheus = _prometheus_active(alerting_groups(server.url))
    assert len(local.local.states) == 139  # every rule evaluated, pairs included
    assert _ours(local_statuses) == prometheus
    assert _ours(board_statuses) == prometheus
    assert _ours(remote_statuses) == prometheus
    # One row per group and name; a pair's row is its most urgent rule, not the last one.
    assert len(local_statuses) == len(prometheus) == len(board_statuses) == len(remote_statuses)
    for statuses in (local_statuses, board_statuses, remote_statuses):
        rows = {(s.rule.group, s.rule.name): s for s in statuses}
        client = rows[("kubernetes-system-kubelet", CLIENT)]
        assert client.state == "firing" and client.rule.severity == "warning"
        assert [i.labels["severity"] for i in client.instances] == ["warning"]
        server_row = rows[("kubernetes-system-kubelet", SERVER)]
        assert server_row.state == "firing"
        assert sorted(i.labels["severity"] for i in server_row.instances) == [
            "critical",
            "warning",
        ]
