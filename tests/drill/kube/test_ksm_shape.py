"""The drill's kube-state-metrics series have kube-state-metrics' shape: the labels of
`fixtures/kube-state-metrics/pod_metrics.txt` (uid on every pod series), all five phases,
the three readiness conditions, and a last-terminated reason that stays until the next one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from oncall_drill.cluster.ksm import ClusterStateCollector, in_namespace
from oncall_drill.kube_sim import KubeSim
from tests.drill.kube.conftest import DELAY_S, NS, Cluster, StrictCheck, start_cluster
from tests.harness.waiting import wait_until

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "kube-state-metrics"


def samples(text: str) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


@pytest.fixture
def cluster(tmp_path: Path, strict: StrictCheck) -> Iterator[Cluster]:
    yield from start_cluster(tmp_path, KubeSim(start_delay=DELAY_S, resync=0.2))


def scrape(cluster: Cluster) -> dict[str, list[Sample]]:
    registry = CollectorRegistry()
    registry.register(ClusterStateCollector(cluster.sim, in_namespace(NS)))
    return samples(cluster.call(lambda: generate_latest(registry)).decode())


def test_pod_series_have_the_labels_of_kube_state_metrics(cluster: Cluster) -> None:
    pods = {p.metadata.name: p.metadata.uid for p in cluster.ready_pods(2)}
    name = sorted(pods)[0]
    cluster.call(lambda: cluster.sim.container_exited(NS, name, "vllm", exit_code=1))
    wait_until(
        lambda: scrape(cluster).get("kube_pod_container_status_last_terminated_reason"),
        within=10,
        what="the restart recorded",
    )
    got = scrape(cluster)
    recorded = samples((FIXTURE / "pod_metrics.txt").read_text())
    for family, expected in recorded.items():
        assert family in got, family
        assert {frozenset(s.labels) for s in got[family]} == {frozenset(s.labels) for s in expected}
    for pod_name, uid in pods.items():
        phases = {s.labels["phase"]: s.value for s in got["kube_pod_status_phase"]
                  if s.labels["pod"] == pod_name}  # fmt: skip
        assert phases == {"Pending": 0, "Running": 1, "Succeeded": 0, "Failed": 0, "Unknown": 0}
        ready = [s for s in got["kube_pod_status_ready"] if s.labels["pod"] == pod_name]
        assert sorted(s.labels["condition"] for s in ready) == ["false", "true", "unknown"]
        assert sum(s.value for s in ready) == 1
        assert {s.labels["uid"] for s in ready} == {uid}


def test_last_terminated_reason_stays_until_the_next_termination(cluster: Cluster) -> None:
    name = sorted(p.metadata.name for p in cluster.ready_pods(2))[0]

    def reasons() -> list[tuple[str, float]]:
        found = scrape(cluster).get("kube_pod_container_status_last_terminated_reason", [])
        return [(s.labels["reason"], s.value) for s in found if s.labels["pod"] == name]

    assert reasons() == []
    cluster.call(lambda: cluster.sim.container_exited(NS, name, "vllm", exit_code=1))
    cluster.ready_pods(2)  # restarted and Ready again: the reason is still there
    assert reasons() == [("Error", 1.0)]
    restarts = [s for s in scrape(cluster)["kube_pod_container_status_restarts_total"]
                if s.labels["pod"] == name]  # fmt: skip
    assert [s.value for s in restarts] == [1.0]
    cluster.call(lambda: cluster.sim.oom_kill(NS, name, "vllm"))
    assert reasons() == [("OOMKilled", 1.0)]
