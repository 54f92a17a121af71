"""Leases, RBAC, authentication, discovery, namespaces, nodes and configmaps through the real
kubernetes client (and raw HTTP where the client cannot reach)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.drill.kube.conftest import NS, Cluster, status_of

READ_ONLY_USER = "system:serviceaccount:ai:oncall-readonly"


def _now() -> datetime:
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond or 1)


def _lease(holder: str) -> client.V1Lease:
    now = _now()
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name="vllm-oncall-lock", namespace=NS),
        spec=client.V1LeaseSpec(
            holder_identity=holder,
            lease_duration_seconds=300,
            acquire_time=now,
            renew_time=now,
            lease_transitions=0,
        ),
    )


def test_lease_create_conflicts_and_replace(cluster: Cluster) -> None:
    coord = cluster.coordination()
    created = coord.create_namespaced_lease(NS, _lease("alice@host"))
    assert created.spec.holder_identity == "alice@host"
    with pytest.raises(ApiException) as err:
        coord.create_namespaced_lease(NS, _lease("bob@host"))
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "AlreadyExists"
    assert body["message"] == 'leases.coordination.k8s.io "vllm-oncall-lock" already exists'

    current = coord.read_namespaced_lease("vllm-oncall-lock", NS)
    stale = coord.read_namespaced_lease("vllm-oncall-lock", NS)
    current.spec.holder_identity = "bob@host"
    current.spec.renew_time = _now()
    replaced = coord.replace_namespaced_lease("vllm-oncall-lock", NS, current)
    assert replaced.spec.holder_identity == "bob@host"
    assert replaced.metadata.resource_version != stale.metadata.resource_version

    stale.spec.holder_identity = "carol@host"
    with pytest.raises(ApiException) as err:
        coord.replace_namespaced_lease("vllm-oncall-lock", NS, stale)
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "vllm-oncall-lock": the '
        "object has been modified; please apply your changes to the latest version and try again"
    )
    assert body["details"] == {
        "name": "vllm-oncall-lock",
        "group": "coordination.k8s.io",
        "kind": "leases",
    }
    assert coord.read_namespaced_lease("vllm-oncall-lock", NS).spec.holder_identity == "bob@host"
    status = coord.delete_namespaced_lease("vllm-oncall-lock", NS)  # typed "object" in 37
    assert status["status"] == "Success"
    assert status["details"]["uid"] == created.metadata.uid
    assert coord.list_namespaced_lease(NS).items == []


def test_lease_time_without_microseconds_is_400(cluster: Cluster) -> None:
    lease: Any = _lease("alice@host")
    lease.spec.renew_time = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # isoformat drops .000000
    with pytest.raises(ApiException) as err:
        cluster.coordination().create_namespaced_lease(NS, lease)
    assert err.value.status == 400
    assert "2006-01-02T15:04:05.000000Z07:00" in status_of(err.value)["message"]


def test_read_only_user_reads_but_gets_403_on_writes(cluster: Cluster) -> None:
    pod = cluster.ready_pods(2)[0]
    name = pod.metadata.name
    ro_core = cluster.core(read_only=True)
    assert len(ro_core.list_namespaced_pod(NS).items) == 2
    assert ro_core.read_namespaced_pod(name, NS).metadata.uid == pod.metadata.uid

    with pytest.raises(ApiException) as err:
        ro_core.delete_namespaced_pod(name, NS, dry_run="All")
    assert err.value.status == 403
    body = status_of(err.value)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        f'pods "{name}" is forbidden: User "{READ_ONLY_USER}" cannot delete resource "pods" '
        'in API group "" in the namespace "ai"'
    )
    assert body["details"] == {"name": name, "kind": "pods"}

    with pytest.raises(ApiException) as err:
        cluster.apps(read_only=True).patch_namespaced_deployment(
            "vllm", NS, {"spec": {"replicas": 0}}
        )
    assert err.value.status == 403
    assert status_of(err.value)["message"] == (
        f'deployments.apps "vllm" is forbidden: User "{READ_ONLY_USER}" cannot patch resource '
        '"deployments" in API group "apps" in the namespace "ai"'
    )
    with pytest.raises(ApiException) as err:
        cluster.coordination(read_only=True).create_namespaced_lease(NS, _lease("ro@host"))
    assert err.value.status == 403
    assert status_of(err.value)["message"] == (
        f'leases.coordination.k8s.io is forbidden: User "{READ_ONLY_USER}" cannot create '
        'resource "leases" in API group "coordination.k8s.io" in the namespace "ai"'
    )
    # Nothing changed.
    assert cluster.core().read_namespaced_pod(name, NS).metadata.deletion_timestamp is None
    assert cluster.apps().read_namespaced_deployment("vllm", NS).spec.replicas == 2


def test_namespaces_nodes_and_configmaps(cluster: Cluster) -> None:
    core = cluster.core()
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "kube-system", "ai"} <= names
    assert core.read_namespace("ai").status.phase == "Active"
    (node,) = core.list_node().items
    assert node.status.allocatable["nvidia.com/gpu"] == "4"
    conditions = {c.type: c.status for c in node.status.conditions}
    assert conditions == {
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
        "Ready": "True",
    }
    cm = core.read_namespaced_config_map("ai-gateway", NS)
    assert cm.data["degraded-mode"] == "false"
    merged = core.patch_namespaced_config_map(
        "ai-gateway",
        NS,
        {"data": {"degraded-mode": "true"}},
        _content_type="application/merge-patch+json",
    )
    assert merged.data == {"degraded-mode": "true", "upstream": "http://vllm:8000"}
    strategic = core.patch_namespaced_config_map("ai-gateway", NS, {"data": {"upstream": None}})
    assert strategic.data == {"degraded-mode": "true"}
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("nope", NS)
    assert status_of(err.value)["message"] == 'configmaps "nope" not found'


def test_raw_http_auth_discovery_and_unknown_paths(cluster: Cluster) -> None:
    url = cluster.server.url
    token = cluster.sim.users.operator.token
    auth = {"Authorization": f"Bearer {token}"}
    assert httpx.get(f"{url}/api/v1/pods", timeout=5).status_code == 401
    bad = httpx.get(f"{url}/api/v1/pods", headers={"Authorization": "Bearer nope"}, timeout=5)
    assert bad.status_code == 401
    assert bad.json()["reason"] == "Unauthorized"
    assert httpx.get(f"{url}/api", headers=auth, timeout=5).json()["versions"] == ["v1"]
    groups = httpx.get(f"{url}/apis", headers=auth, timeout=5).json()["groups"]
    assert {g["name"] for g in groups} == {
        "apps", "autoscaling", "coordination.k8s.io", "monitoring.coreos.com", "policy",
    }  # fmt: skip
    resources = httpx.get(f"{url}/apis/apps/v1", headers=auth, timeout=5).json()["resources"]
    assert {r["name"] for r in resources} == {"deployments", "replicasets"}
    for path in ("/api/v1/namespaces/ai/widgets", "/apis/batch/v1/jobs", "/nothing/here"):
        reply = httpx.get(f"{url}{path}", headers=auth, timeout=5)
        assert reply.status_code == 404, path
        assert reply.json()["message"] == "the server could not find the requested resource"
    unsupported = httpx.post(f"{url}/api/v1/namespaces/ai/pods", headers=auth, json={}, timeout=5)
    assert unsupported.status_code == 405
    assert httpx.get(f"{url}/version", timeout=5).json()["major"] == "1"
    assert client.VersionApi(cluster.api).get_code().minor == "33"
