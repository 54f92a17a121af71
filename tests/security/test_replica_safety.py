"""Threat: two rebuilds at once take a service to 0 Ready replicas (issue 12, item 3).

Against the drill's Kubernetes API through the real client and oncall's KubeWriter: the vLLM
Deployment ships with a PodDisruptionBudget (maxUnavailable 1); an eviction that would break it
is refused with the apiserver's 429 and message, a dry run changes nothing, a UID precondition
that does not hold is a 409, and the PDB is served (list/get) with its computed status.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from oncall.backends.kube_write import KubeWriter
from oncall.errors import BackendError
from oncall.settings.model import KubernetesSettings
from oncall_drill.kube_sim.kubeconfig import PEER_CONTEXT
from tests.drill.kube.conftest import NS, Cluster

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _writer(cluster: Cluster, context: str | None = None) -> KubeWriter:
    settings = KubernetesSettings(kubeconfig=cluster.kubeconfig, context=context, namespace=NS)
    return asyncio.run(KubeWriter.open(settings))


def _uid(pod: Any) -> str:
    return str(pod.metadata.uid)


def test_the_second_eviction_of_a_two_replica_deployment_is_refused_by_its_budget(
    drill: Cluster,
) -> None:
    first, second = drill.ready_pods(2)
    kube = _writer(drill)
    try:
        # Dry run: accepted, nothing changes.
        asyncio.run(kube.evict_pod(NS, first.metadata.name, uid=_uid(first), dry_run=True))
        assert len(drill.ready_pods(2)) == 2
        asyncio.run(kube.evict_pod(NS, first.metadata.name, uid=_uid(first), dry_run=False))
        with pytest.raises(BackendError) as refused:
            asyncio.run(kube.evict_pod(NS, second.metadata.name, uid=_uid(second), dry_run=False))
    finally:
        kube.close()
    assert refused.value.reason == "disruption budget"
    assert VIOLATION in refused.value.detail
    assert "The disruption budget vllm needs 1 healthy pods and has 1 currently" in (
        refused.value.detail
    )
    still = drill.core().read_namespaced_pod(second.metadata.name, NS)
    assert still.metadata.deletion_timestamp is None


def test_an_eviction_with_a_stale_uid_is_a_conflict_and_changes_nothing(drill: Cluster) -> None:
    first, _second = drill.ready_pods(2)
    kube = _writer(drill)
    try:
        with pytest.raises(BackendError) as refused:
            asyncio.run(kube.evict_pod(NS, first.metadata.name, uid="not-its-uid", dry_run=False))
    finally:
        kube.close()
    assert refused.value.reason == "conflict"
    assert "does not match the UID in record" in refused.value.detail
    assert len(drill.ready_pods(2)) == 2


def test_the_budget_is_served_with_its_status(drill: Cluster) -> None:
    from kubernetes import client

    drill.ready_pods(2)
    policy = client.PolicyV1Api(drill.api)
    [pdb] = policy.list_namespaced_pod_disruption_budget(NS).items
    assert pdb.spec is not None and pdb.spec.max_unavailable == 1
    status = pdb.status
    assert status is not None
    assert (status.current_healthy, status.desired_healthy) == (2, 1)
    assert status.disruptions_allowed == 1
    one = policy.read_namespaced_pod_disruption_budget("vllm", NS).status
    assert one is not None and one.expected_pods == 2


def test_self_subject_review_names_each_kubeconfig_user(drill: Cluster) -> None:
    from oncall.backends.identity import kube_identity

    names = []
    for context in (None, PEER_CONTEXT, "oncall-drill-readonly"):
        kube = _writer(drill, context)
        try:
            names.append(asyncio.run(kube_identity(kube)).username)
        finally:
            kube.close()
    assert names == ["oncall-operator", "oncall-peer", "system:serviceaccount:ai:oncall-readonly"]


def test_an_approved_eviction_spends_the_budget_before_the_pod_is_seen_going(
    drill: Cluster,
) -> None:
    """The race of two concurrent rebuilds, as the apiserver closes it: the eviction handler
    records the pod it lets go in the budget's `status.disruptedPods` before it deletes it, so
    the controller counts it out at once. Here the delete after the approval fails (a stale
    resourceVersion precondition: 409), the pod stays Ready — and the other pod's eviction is
    still refused with the apiserver's 429 body, because the budget was spent on the first."""
    import json

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    first, second = drill.ready_pods(2)
    core, policy = drill.core(), client.PolicyV1Api(drill.api)

    def evict(pod: Any, **preconditions: str) -> None:
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(**preconditions))
        body = client.V1Eviction(
            metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=NS),
            delete_options=options,
        )
        core.create_namespaced_pod_eviction(pod.metadata.name, NS, body)

    with pytest.raises(ApiException) as stale:
        evict(first, resource_version="1")
    assert stale.value.status == 409
    status = policy.read_namespaced_pod_disruption_budget("vllm", NS).status
    assert status is not None
    assert set(status.disrupted_pods or {}) == {first.metadata.name}
    assert (status.current_healthy, status.disruptions_allowed) == (1, 0)
    assert len(drill.ready_pods(2)) == 2  # both still Ready: only the budget knows

    with pytest.raises(ApiException) as refused:
        evict(second, uid=_uid(second))
    assert refused.value.status == 429
    body = json.loads(refused.value.body or "{}")
    assert (body["kind"], body["status"], body["reason"], body["code"]) == (
        "Status", "Failure", "TooManyRequests", 429,
    )  # fmt: skip
    assert body["message"] == VIOLATION
    # metav1.StatusCause's Type is `reason` on the wire (`json:"reason,omitempty"`).
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget vllm needs 1 healthy pods and has 1 currently",
        }
    ]
    assert core.read_namespaced_pod(second.metadata.name, NS).metadata.deletion_timestamp is None
