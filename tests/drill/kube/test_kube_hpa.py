"""HorizontalPodAutoscalers (autoscaling/v2) through the real kubernetes client: the simulator
serves them as the apiserver does (every answer checked against the client's models), keeps
the target Deployment within their bounds, and validates them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.drill.kube.conftest import NS, Cluster, status_of
from tests.harness.waiting import wait_until


def autoscaling(cluster: Cluster) -> Any:
    from kubernetes import client

    return client.AutoscalingV2Api(cluster.api)


def hpa(min_replicas: int, max_replicas: int, name: str = "vllm") -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "vllm:num_requests_waiting"},
                        "target": {"type": "AverageValue", "averageValue": "10"},
                    },
                }
            ],
        },
    }


def replicas(cluster: Cluster) -> int:
    return int(cluster.apps().read_namespaced_deployment("vllm", NS).spec.replicas)


def test_an_hpa_is_created_listed_and_read(cluster: Cluster) -> None:
    api = autoscaling(cluster)
    created = api.create_namespaced_horizontal_pod_autoscaler(NS, hpa(2, 4))
    assert created.spec.scale_target_ref.name == "vllm"
    listed = api.list_namespaced_horizontal_pod_autoscaler(NS).items
    assert [h.metadata.name for h in listed] == ["vllm"]
    read = wait_until(
        lambda: (
            (h := api.read_namespaced_horizontal_pod_autoscaler("vllm", NS)).status
            and h.status.desired_replicas == 2
            and h
        ),
        within=10,
        what="the HPA's status",
    )
    assert read.status.current_replicas == 2


def test_raising_min_replicas_scales_the_deployment_up(cluster: Cluster) -> None:
    api = autoscaling(cluster)
    cluster.ready_pods(2)
    api.create_namespaced_horizontal_pod_autoscaler(NS, hpa(2, 4))
    ops = [
        {"op": "test", "path": "/spec/minReplicas", "value": 2},
        {"op": "replace", "path": "/spec/minReplicas", "value": 3},
    ]
    api.patch_namespaced_horizontal_pod_autoscaler("vllm", NS, ops)
    wait_until(lambda: replicas(cluster) == 3, within=10, what="3 replicas")
    cluster.ready_pods(3)
    events = cluster.core().list_namespaced_event(
        NS, field_selector="involvedObject.kind=HorizontalPodAutoscaler"
    )
    assert [e.message for e in events.items] == [
        "New size: 3; reason: Current number of replicas below Spec.MinReplicas"
    ]
    assert events.items[0].reason == "SuccessfulRescale"


def test_a_scale_beyond_max_is_undone(cluster: Cluster) -> None:
    autoscaling(cluster).create_namespaced_horizontal_pod_autoscaler(NS, hpa(1, 2))
    cluster.ready_pods(2)
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 4}]
    cluster.apps().patch_namespaced_deployment("vllm", NS, ops)
    wait_until(lambda: replicas(cluster) == 2, within=10, what="the HPA to scale back to 2")


def test_a_failed_min_replicas_test_is_422(cluster: Cluster) -> None:
    api = autoscaling(cluster)
    api.create_namespaced_horizontal_pod_autoscaler(NS, hpa(2, 4))
    ops = [
        {"op": "test", "path": "/spec/minReplicas", "value": 3},
        {"op": "replace", "path": "/spec/minReplicas", "value": 4},
    ]
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_horizontal_pod_autoscaler("vllm", NS, ops)
    assert err.value.status == 422
    assert api.read_namespaced_horizontal_pod_autoscaler("vllm", NS).spec.min_replicas == 2


@pytest.mark.parametrize(
    ("low", "high", "field", "message"),
    [
        (0, 4, "spec.minReplicas", "must be greater than or equal to 1"),
        (3, 2, "spec.maxReplicas", "must be greater than or equal to `minReplicas`"),
    ],
)
def test_invalid_bounds_are_refused(
    cluster: Cluster, low: int, high: int, field: str, message: str
) -> None:
    body = hpa(1, 4)
    body["spec"].update(minReplicas=low, maxReplicas=high)
    with pytest.raises(ApiException) as err:
        autoscaling(cluster).create_namespaced_horizontal_pod_autoscaler(NS, body)
    assert err.value.status == 422
    status = status_of(err.value)
    assert status["details"]["causes"][0]["field"] == field
    assert message in status["message"]
