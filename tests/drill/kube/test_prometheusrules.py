"""The simulator serves PrometheusRule objects (monitoring.coreos.com/v1, read-only), and
`alerts.prometheus_rules: cluster` reads them through the real kubernetes client."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from oncall.alerts.cluster_rules import rules_of_objects
from oncall.errors import ConfigError
from oncall.service.alerts import add_cluster_rules, open_alert_engine
from oncall.settings import Settings
from oncall_drill.kube_sim import KubeSim
from tests.drill.kube.conftest import DELAY_S, Cluster, start_cluster

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "rules" / "kube-prometheus"
GROUP, VERSION, PLURAL = "monitoring.coreos.com", "v1", "prometheusrules"


def _objects() -> list[dict[str, Any]]:
    found = [yaml.safe_load(path.read_text()) for path in sorted(FIXTURES.glob("*.yaml"))]
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "monitoring"}}, *found]


@pytest.fixture
def rules_cluster(tmp_path: Path) -> Iterator[Cluster]:
    sim = KubeSim(start_delay=DELAY_S, resync=0.2)
    sim.load(_objects())  # besides the default drill objects
    yield from start_cluster(tmp_path, sim)


def test_discovery_list_and_get_as_the_apiserver_serves_the_crd(rules_cluster: Cluster) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    groups: Any = client.ApisApi(rules_cluster.api).get_api_versions()
    monitoring = next(g for g in groups.groups if g.name == GROUP)
    assert monitoring.preferred_version.group_version == "monitoring.coreos.com/v1"
    resources = client.CustomObjectsApi(rules_cluster.api).get_api_resources(GROUP, VERSION)
    (entry,) = [r for r in resources.resources if r.name == PLURAL]
    assert (entry.kind, entry.namespaced, entry.short_names) == (
        "PrometheusRule",
        True,
        ["promrule"],
    )
    assert sorted(entry.verbs) == ["get", "list"]
    custom: Any = client.CustomObjectsApi(rules_cluster.ro_api)  # the read-only user reads
    listed = custom.list_namespaced_custom_object(GROUP, VERSION, "monitoring", PLURAL)
    assert listed["kind"] == "PrometheusRuleList" and len(listed["items"]) == 8
    one = custom.get_namespaced_custom_object(GROUP, VERSION, "monitoring", PLURAL, "grafana-rules")
    assert one["spec"]["groups"][0]["name"] == "GrafanaAlerts"
    assert one["metadata"]["uid"] and one["metadata"]["resourceVersion"]
    selected = custom.list_cluster_custom_object(
        GROUP, VERSION, PLURAL, label_selector="app.kubernetes.io/name=grafana"
    )
    assert [o["metadata"]["name"] for o in selected["items"]] == ["grafana-rules"]
    with pytest.raises(ApiException) as refused:  # read-only: no writes, for anyone
        client.CustomObjectsApi(rules_cluster.api).delete_namespaced_custom_object(
            GROUP, VERSION, "monitoring", PLURAL, "grafana-rules"
        )
    assert refused.value.status == 405


def _settings(cluster: Cluster, **alerts: Any) -> Settings:
    return Settings.model_validate(
        {
            "kubernetes": {"kubeconfig": str(cluster.kubeconfig), "timeout": "5s"},
            "alerts": {"packs": [], "prometheus_rules": "cluster", **alerts},
        }
    )


def test_prometheus_rules_cluster_loads_the_objects_rules(rules_cluster: Cluster) -> None:
    settings = _settings(rules_cluster, prometheus_rules_selector="app.kubernetes.io/name=grafana")
    engine = open_alert_engine(settings)
    asyncio.run(add_cluster_rules(engine, settings))
    assert [(r.group, r.name) for r in engine.rules] == [
        ("GrafanaAlerts", "GrafanaRequestsFailing")
    ]
    assert engine.rules[0].file == "prometheusrule/monitoring/grafana-rules"
    every = _settings(rules_cluster, prometheus_rules_namespace="monitoring")
    engine = open_alert_engine(every)
    asyncio.run(add_cluster_rules(engine, every))
    assert len(engine.rules) == 139


def test_a_broken_object_is_located_in_the_object_as_kubectl_prints_it() -> None:
    (obj,) = [o for o in _objects() if o["metadata"]["name"] == "grafana-rules"]
    broken = copy.deepcopy(obj)
    broken["spec"]["groups"][0]["rules"][0]["for"] = "5 minutes"
    with pytest.raises(ConfigError) as raised:
        found = rules_of_objects([broken])
        raise ConfigError(found.problems)
    (problem,) = raised.value.problems
    assert problem.file == "prometheusrule/monitoring/grafana-rules"
    assert problem.key == "spec.groups.0.rules.0.for" and problem.line and problem.col
    printed = yaml.safe_dump(broken, sort_keys=False).splitlines()
    assert printed[problem.line - 1].strip() == "for: 5 minutes"
