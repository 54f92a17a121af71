"""Deployments through the real kubernetes client: the three patch dialects, dry runs,
optimistic locking, validation, and rollouts that converge like the real controller's."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.drill.kube.conftest import NS, Cluster, status_of
from tests.harness.waiting import wait_until

ARGS = ["--model", "qwen", "--max-num-seqs", "256"]


def rolled_out(cluster: Cluster) -> Any:
    """The deployment once `kubectl rollout status` would say "successfully rolled out"."""
    apps = cluster.apps()

    def probe() -> Any:
        d = apps.read_namespaced_deployment_status("vllm", NS)
        s = d.status
        done = (
            d.metadata.generation <= (s.observed_generation or 0)
            and (s.updated_replicas or 0) == d.spec.replicas
            and (s.replicas or 0) == d.spec.replicas
            and (s.available_replicas or 0) == d.spec.replicas
        )
        return d if done else None

    return wait_until(probe, within=10, what="the rollout to finish")


def test_initial_status_has_conditions(cluster: Cluster) -> None:
    dep = rolled_out(cluster)
    assert dep.metadata.generation == 1
    assert dep.status.observed_generation == 1
    assert dep.status.ready_replicas == 2
    conditions = {c.type: c for c in dep.status.conditions}
    assert conditions["Available"].status == "True"
    assert conditions["Available"].reason == "MinimumReplicasAvailable"
    assert conditions["Progressing"].reason == "NewReplicaSetAvailable"
    assert dep.metadata.annotations["deployment.kubernetes.io/revision"] == "1"


def test_json_patch_with_failing_test_is_422_and_changes_nothing(cluster: Cluster) -> None:
    apps = cluster.apps()
    before = rolled_out(cluster)
    ops = [
        {"op": "test", "path": "/spec/template/spec/containers/0/args/3", "value": "999"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/args/3", "value": "128"},
    ]
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("vllm", NS, ops)
    assert err.value.status == 422
    body = status_of(err.value)
    assert body["reason"] == "Invalid"
    assert body["message"] == "the server rejected our request due to an error in our request"
    after = apps.read_namespaced_deployment("vllm", NS)
    assert after.metadata.resource_version == before.metadata.resource_version
    assert after.spec.template.spec.containers[0].args == ARGS


def test_json_patch_rollout_converges(cluster: Cluster) -> None:
    apps = cluster.apps()
    old_pods = {p.metadata.name for p in cluster.ready_pods(2)}
    before = rolled_out(cluster)
    ops = [
        {"op": "test", "path": "/spec/template/spec/containers/0/args/3", "value": "256"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/args/3", "value": "128"},
    ]
    patched = apps.patch_namespaced_deployment("vllm", NS, ops)
    assert patched.metadata.generation == 2
    assert int(patched.metadata.resource_version) > int(before.metadata.resource_version)
    dep = rolled_out(cluster)
    assert dep.status.observed_generation == dep.metadata.generation == 2
    assert dep.status.updated_replicas == dep.spec.replicas == 2
    assert dep.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    pods = cluster.ready_pods(2)
    assert not old_pods & {p.metadata.name for p in pods}
    assert all(p.spec.containers[0].args[3] == "128" for p in pods)
    hashes = {p.metadata.labels["pod-template-hash"] for p in pods}
    assert len(hashes) == 1
    sets = {rs.metadata.name: rs for rs in apps.list_namespaced_replica_set(NS).items}
    assert len(sets) == 2
    assert sets[f"vllm-{hashes.pop()}"].spec.replicas == 2
    assert sorted(rs.spec.replicas for rs in sets.values()) == [0, 2]
    events = cluster.core().list_namespaced_event(NS, field_selector="reason=SuccessfulDelete")
    assert len(events.items) == 2


def test_strategic_merge_patch_merges_containers_by_name(cluster: Cluster) -> None:
    apps = cluster.apps()
    before = rolled_out(cluster)
    new_args = ["--model", "qwen", "--max-num-seqs=64"]
    body = {
        "metadata": {"resourceVersion": before.metadata.resource_version},
        "spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": new_args}]}}},
    }
    preview = apps.patch_namespaced_deployment("vllm", NS, body, dry_run="All")
    assert preview.spec.template.spec.containers[0].args == new_args
    assert preview.metadata.generation == 2
    unchanged = apps.read_namespaced_deployment("vllm", NS)
    assert unchanged.metadata.resource_version == before.metadata.resource_version
    assert unchanged.metadata.generation == 1
    assert unchanged.spec.template.spec.containers[0].args == ARGS

    patched = apps.patch_namespaced_deployment("vllm", NS, body, field_manager="oncall-tui")
    (container,) = patched.spec.template.spec.containers
    assert container.args == new_args  # replaced wholesale, not merged
    assert container.image == "vllm/vllm-openai:v0.33.0"  # the rest of the container stays
    assert container.ports[0].container_port == 8000
    dep = rolled_out(cluster)
    assert dep.status.observed_generation == 2
    assert all(p.spec.containers[0].args == new_args for p in cluster.ready_pods(2))


def test_patch_with_stale_resource_version_is_409(cluster: Cluster) -> None:
    apps = cluster.apps()
    rolled_out(cluster)
    body = {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 1}}
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("vllm", NS, body)
    assert err.value.status == 409
    assert status_of(err.value)["message"] == (
        'Operation cannot be fulfilled on deployments.apps "vllm": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_merge_patch_of_labels_bumps_resource_version_not_generation(cluster: Cluster) -> None:
    apps = cluster.apps()
    before = rolled_out(cluster)
    patched = apps.patch_namespaced_deployment(
        "vllm",
        NS,
        {"metadata": {"labels": {"team": "inference"}}},
        _content_type="application/merge-patch+json",
    )
    assert patched.metadata.labels == {"app": "vllm", "team": "inference"}
    assert patched.metadata.generation == 1
    assert int(patched.metadata.resource_version) > int(before.metadata.resource_version)


def test_invalid_patch_is_422_invalid(cluster: Cluster) -> None:
    apps = cluster.apps()
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment("vllm", NS, {"spec": {"replicas": -1}})
    assert err.value.status == 422
    body = status_of(err.value)
    assert body["message"] == (
        'Deployment.apps "vllm" is invalid: spec.replicas: Invalid value: -1: '
        "must be greater than or equal to 0"
    )
    assert body["details"]["causes"][0]["field"] == "spec.replicas"


def test_scale_up_by_patch(cluster: Cluster) -> None:
    apps = cluster.apps()
    rolled_out(cluster)
    apps.patch_namespaced_deployment("vllm", NS, {"spec": {"replicas": 3}})
    dep = rolled_out(cluster)
    assert dep.status.ready_replicas == 3
    assert len(cluster.ready_pods(3)) == 3


def test_watch_streams_the_deployment(cluster: Cluster) -> None:
    from kubernetes import watch

    apps = cluster.apps()
    w = watch.Watch()
    seen = []
    for event in w.stream(
        apps.list_namespaced_deployment, NS, field_selector="metadata.name=vllm", timeout_seconds=1
    ):
        seen.append((event["type"], event["object"].metadata.name))
        w.stop()
    assert seen == [("ADDED", "vllm")]
