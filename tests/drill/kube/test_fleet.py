"""The fleet topology (`drill up --fleet`) in-process: its counts, and the list API at its scale
through the real kubernetes client and httpx (selectors, limit/continue, expiry, errors), checked
against `fixtures/kubernetes/list_paging.json`. Also the fleet's GPU exporters and rule file.

One fleet simulator for the module (seeding 5,000 pods takes a few seconds), no drill stack.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes.client.exceptions import ApiException

from oncall.alerts.loader import load_rule_files
from oncall_drill.gpu_sim import fleet as gpu_fleet
from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.kube_sim import KubeSim, fleet
from oncall_drill.kube_sim.resources import PODS
from oncall_drill.rules import deploy_fleet_rules
from tests.drill.kube.conftest import DELAY_S, Cluster, start_cluster, status_of

FIXTURE = Path(__file__).parents[3] / "fixtures" / "kubernetes" / "list_paging.json"
EXPECTED: dict[str, Any] = json.loads(FIXTURE.read_text())


@pytest.fixture(scope="module")
def fleet_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    sim = KubeSim(fleet.base_objects(), start_delay=DELAY_S, resync=0.2)
    fleet.populate(sim.store)
    yield from start_cluster(tmp_path_factory.mktemp("fleet"), sim)


def _all_pods(cluster: Cluster, limit: int, **query: str) -> tuple[list[dict[str, Any]], int]:
    """Every page of a paged list over httpx (the client's models for 5,000 pods would take the
    test half a minute); bounded: at most 5,000 / limit + 2 pages."""
    items: list[dict[str, Any]] = []
    token = ""
    for pages in range(1, 5_000 // limit + 3):
        extra = {"continue": token} if token else {}
        page = _get(cluster, "/api/v1/pods", limit=str(limit), **query, **extra).json()
        items += page["items"]
        token = page["metadata"].get("continue", "")
        if not token:
            return items, pages
    raise AssertionError("the list did not end")


def test_fleet_counts_through_the_client(fleet_cluster: Cluster) -> None:
    fleet_cluster.ready_pods(2)  # the vLLM pods the controller created
    pods, pages = _all_pods(fleet_cluster, 1_000)
    assert (len(pods), pages) == (5_000, 5)
    assert len({p["metadata"]["uid"] for p in pods}) == 5_000
    nodes = fleet_cluster.core().list_node().items
    assert len(nodes) == 50
    assert sum(int(n.status.allocatable["nvidia.com/gpu"]) for n in nodes) == 400
    deployments = fleet_cluster.apps().list_deployment_for_all_namespaces().items
    assert len(deployments) == 20
    not_vllm = [d for d in deployments if d.metadata.name != "vllm"]
    # Every seeded Deployment is complete: its ReplicaSet owns all its pods, all Ready but the
    # deliberately not-ready gateway pods.
    for dep in not_vllm:
        assert dep.status.replicas == dep.spec.replicas, dep.metadata.name
    owners = {p["metadata"]["ownerReferences"][0]["name"].rsplit("-", 1)[0] for p in pods}
    assert owners == {d.metadata.name for d in deployments}


def test_selectors_at_fleet_scale(fleet_cluster: Cluster) -> None:
    fleet_cluster.ready_pods(2)
    core = fleet_cluster.core()
    vllm = core.list_namespaced_pod("ai", label_selector="app=vllm").items
    assert {p.metadata.labels["app"] for p in vllm} == {"vllm"} and len(vllm) == 2
    rag = core.list_pod_for_all_namespaces(
        label_selector="app.kubernetes.io/part-of in (rag),app.kubernetes.io/name!=embeddings"
    ).items
    expected = sum(w.replicas for w in fleet.WORKLOADS if w.part_of == "rag") - 150
    assert len(rag) == expected
    on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-7").items
    stored = [
        p for p in fleet_cluster.sim.store.scan(PODS) if p["spec"]["nodeName"] == "gpu-node-7"
    ]
    assert len(on_node) == len(stored) > 0
    off = core.list_namespaced_pod("batch", field_selector="status.phase!=Running").items
    assert off == []


def test_selected_pages_have_no_remaining_count(fleet_cluster: Cluster) -> None:
    core = fleet_cluster.core()
    first = core.list_namespaced_pod("jobs", limit=20, label_selector="app=queue-worker")
    assert len(first.items) == 20 and first.metadata._continue
    assert first.metadata.remaining_item_count is None  # the store cannot count matches
    plain = core.list_namespaced_pod("jobs", limit=20)
    assert plain.metadata.remaining_item_count == 1_100 - 20
    token = json.loads(base64.urlsafe_b64decode(plain.metadata._continue + "=="))
    assert set(token) == set(EXPECTED["continue_token_json"])
    assert token["v"] == "meta.k8s.io/v1" and token["start"].endswith("\x00")
    assert token["start"] == plain.items[-1].metadata.name + "\x00"
    pods, pages = _all_pods(fleet_cluster, 400, labelSelector="app=queue-worker")
    assert (len(pods), pages) == (650, 2)


def _get(cluster: Cluster, path: str, **params: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {cluster.sim.users.operator.token}"}
    return httpx.get(f"{cluster.server.url}{path}", params=params, headers=auth, timeout=10)


def test_compacted_token_is_410_expired_with_an_inconsistent_token(fleet_cluster: Cluster) -> None:
    first = _get(fleet_cluster, "/api/v1/namespaces/edge/pods", limit="50").json()
    token = first["metadata"]["continue"]
    fleet_cluster.call(fleet_cluster.sim.store.compact)
    reply = _get(fleet_cluster, "/api/v1/namespaces/edge/pods", limit="50", **{"continue": token})
    body = reply.json()
    assert reply.status_code == 410
    inconsistent = body["metadata"].pop("continue")
    want = dict(EXPECTED["expired_continue"], metadata={})
    assert body == want
    # The inconsistent token resumes after the same pod, at the current revision (rv -1).
    decoded = json.loads(base64.urlsafe_b64decode(inconsistent + "=="))
    assert decoded["rv"] == -1 and decoded["start"] == first["items"][-1]["metadata"]["name"] + "\0"
    rest = _get(fleet_cluster, "/api/v1/namespaces/edge/pods", **{"continue": inconsistent})
    assert rest.status_code == 200
    names = [p["metadata"]["name"] for p in first["items"] + rest.json()["items"]]
    assert len(names) == len(set(names)) == 1_050


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"continue": "eyJ!!"}, "invalid_continue"),
        ({"continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ", "resourceVersion": "5"},
         "continue_with_resource_version"),
        ({"labelSelector": "app in vllm"}, "bad_label_selector"),
        ({"fieldSelector": "spec.image=x"}, "bad_field_label"),
    ],
)  # fmt: skip
def test_bad_list_requests_are_400_as_upstream(
    fleet_cluster: Cluster, query: dict[str, str], expected: str
) -> None:
    reply = _get(fleet_cluster, "/api/v1/namespaces/ai/pods", **query)
    assert (reply.status_code, reply.json()) == (400, EXPECTED[expected])


def test_the_client_sees_the_410(fleet_cluster: Cluster) -> None:
    core = fleet_cluster.core()
    token = core.list_namespaced_pod("batch", limit=10).metadata._continue
    fleet_cluster.call(fleet_cluster.sim.store.compact)
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("batch", limit=10, _continue=token)
    assert err.value.status == 410 and status_of(err.value)["reason"] == "Expired"


async def test_node_exporters_map_the_fleets_gpu_pods(fleet_cluster: Cluster) -> None:
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    sim = fleet_cluster.sim
    nodes = fleet.node_names()[1:]
    app = web.Application()
    gpu_fleet.mount(app, gpu_fleet.node_exporters(sim, nodes, fleet.GPUS_PER_NODE, Layout()))
    holders = {
        p["metadata"]["name"]
        for p in sim.store.scan(PODS)
        if p["spec"]["nodeName"] == "gpu-node-2"
        and "nvidia.com/gpu" in p["spec"]["containers"][0]["resources"]["limits"]
    }
    async with TestClient(TestServer(app)) as client:
        text = await (await client.get("/nodes/gpu-node-2/metrics")).text()
    rows = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_FB_USED{")]
    assert len(rows) == fleet.GPUS_PER_NODE
    assert all('Hostname="gpu-node-2"' in row for row in rows)
    assert {r.split('pod="')[1].split('"')[0] for r in rows if 'pod="' in r} == holders
    job = gpu_fleet.scrape_config(Layout(), "127.0.0.1:9400", nodes)
    paths = {c["labels"]["__metrics_path__"] for c in job["static_configs"]}
    instances = {c["labels"]["instance"] for c in job["static_configs"]}
    assert len(paths) == len(instances) == 49


def test_fleet_rules_load_cleanly(tmp_path: Path) -> None:
    workloads = [(w.namespace, w.name, w.replicas) for w in fleet.WORKLOADS]
    path = deploy_fleet_rules(tmp_path, 0.05, [*workloads, ("ai", "vllm", 2)])
    loaded = load_rule_files([path])
    assert not loaded.problems
    assert len(loaded.rules) == len({r.name for r in loaded.rules}) == 200
