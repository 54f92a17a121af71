"""scale-deployment end to end against the drill (one node with 4 GPUs, 2 vLLM pods of one GPU
each), typed on a terminal and audited: up is verified when the new pod is Ready; with no free
GPU it is refused in the preview with the reason, as the scheduler would leave the pod Pending;
an HorizontalPodAutoscaler on the Deployment is followed as guards.scale_with_hpa says.

The test leaves the drill as it found it (2 Ready pods, no HPA): the tests after it share it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import NS, kube_call, records, remediate, transitions
from tests.harness.waiting import wait_until

DONE = ["proposed", "approved", "started", "succeeded", "verified"]
NO_GPU = "no node has 1 free nvidia.com/gpu: 0 of 4 free on 1 node"


def api(drill: Drill) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(drill.directory / "kubeconfig"))


def replicas(drill: Drill) -> int:
    deployment = kube_call(drill, lambda k: k.get_deployment(NS, "vllm"))
    return int(deployment["spec"]["replicas"])


def ready(drill: Drill) -> int:
    from oncall.backends.kube import pod_ready

    pods = kube_call(drill, lambda k: k.list_pods(NS, label_selector="app=vllm"))
    return sum(1 for p in pods if pod_ready(p))


def scale(drill: Drill, audit: Path, count: int, *sets: str) -> Any:
    return remediate(
        drill, audit, "scale-deployment", "vllm", str(count),
        answers=[("to confirm", "vllm")], sets=sets,
    )  # fmt: skip


@pytest.fixture
def restored(drill: Drill) -> Iterator[Drill]:
    """Back to 2 replicas and no HPA afterwards, whatever the test did."""
    from kubernetes import client

    yield drill
    with api(drill) as made:
        autoscaling = client.AutoscalingV2Api(made)
        if autoscaling.list_namespaced_horizontal_pod_autoscaler(NS).items:
            autoscaling.delete_namespaced_horizontal_pod_autoscaler("vllm", NS)
        ops = [{"op": "replace", "path": "/spec/replicas", "value": 2}]
        client.AppsV1Api(made).patch_namespaced_deployment("vllm", NS, ops)
    pods = lambda: kube_call(drill, lambda k: k.list_pods(NS, label_selector="app=vllm"))  # noqa: E731
    wait_until(lambda: len(pods()) == 2 and ready(drill) == 2, within=60, what="2 vLLM pods")


def test_up_with_a_free_gpu_then_none_left(restored: Drill, tmp_path: Path) -> None:
    drill, audit = restored, tmp_path / "audit.jsonl"
    up = scale(drill, audit, 3)
    assert up.code == 0, up.output
    assert "1 new pod(s) fit on gpu-node-1" in up.output  # the preview's node-fit line
    assert "verified: 3 replica(s) Ready; new: vllm-" in up.output
    assert transitions(audit) == DONE
    assert ready(drill) == 3
    full = scale(drill, audit, 4)
    assert full.code == 0, full.output
    assert ready(drill) == 4
    # No GPU left: refused in the preview, before anyone is asked, with the reason.
    refused = scale(drill, tmp_path / "refused.jsonl", 5)
    assert refused.code != 0, refused.output
    assert NO_GPU in refused.output
    assert transitions(tmp_path / "refused.jsonl") == ["proposed", "refused"]
    assert replicas(drill) == 4
    # What the scheduler says of the same pod when someone scales past oncall's check.
    kube_call(drill, lambda k: k.patch_deployment_json(
        NS, "vllm", [{"op": "replace", "path": "/spec/replicas", "value": 5}], dry_run=False
    ))  # fmt: skip
    scheduler = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."

    def failed_scheduling() -> bool:
        events = kube_call(drill, lambda k: k.list_events(NS, "Pod"))
        return any(
            e.get("reason") == "FailedScheduling" and scheduler in e.get("message", "")
            for e in events
        )

    wait_until(failed_scheduling, within=30, what="a FailedScheduling event")


def test_an_hpa_is_followed_as_the_policy_says(restored: Drill, tmp_path: Path) -> None:
    from kubernetes import client

    drill, audit = restored, tmp_path / "audit.jsonl"
    hpa: Any = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "vllm", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"},
            "minReplicas": 2,
            "maxReplicas": 4,
        },
    }
    with api(drill) as made:
        client.AutoscalingV2Api(made).create_namespaced_horizontal_pod_autoscaler(NS, hpa)
    # guards.scale_with_hpa: refuse (the default) — named, refused, nothing changed.
    refused = scale(drill, audit, 3)
    assert refused.code != 0, refused.output
    assert "HorizontalPodAutoscaler ai/vllm scales this Deployment" in refused.output
    assert "guards.scale_with_hpa is refuse" in refused.output
    assert transitions(audit) == ["proposed", "refused"]
    assert replicas(drill) == 2
    # raise-min: the HPA's minReplicas becomes 3 and the HPA scales the Deployment.
    raised = scale(drill, tmp_path / "raised.jsonl", 3, "guards.scale_with_hpa=raise-min")
    assert raised.code == 0, raised.output
    assert "its minReplicas becomes 3" in raised.output
    assert "verified: 3 replica(s) Ready" in raised.output
    proposed = records(tmp_path / "raised.jsonl")[0]
    assert proposed["target"]["kind"] == "HorizontalPodAutoscaler"
    with api(drill) as made:
        read = client.AutoscalingV2Api(made).read_namespaced_horizontal_pod_autoscaler("vllm", NS)
    assert read.spec.min_replicas == 3
    assert replicas(drill) == 3
