"""Pods through the real kubernetes client: reads, selectors, deletes with preconditions, dry
runs, replacement by the controller, OOM kills and node pressure."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.drill.kube.conftest import NS, Cluster, status_of
from tests.harness.waiting import wait_until

READ_ONLY_USER = "system:serviceaccount:ai:oncall-readonly"


def test_list_and_get_pods(cluster: Cluster) -> None:
    pods = cluster.ready_pods(2)
    core = cluster.core()
    pod = core.read_namespaced_pod(pods[0].metadata.name, NS)
    assert pod.metadata.uid == pods[0].metadata.uid
    assert pod.spec.node_name == "gpu-node-1"
    assert pod.status.phase == "Running"
    assert pod.metadata.labels["app"] == "vllm"
    owner = pod.metadata.owner_references[0]
    assert owner.kind == "ReplicaSet"
    assert owner.name == f"vllm-{pod.metadata.labels['pod-template-hash']}"
    (status,) = pod.status.container_statuses
    assert status.name == "vllm" and status.ready and status.restart_count == 0
    assert status.state.running is not None
    assert pod.spec.containers[0].args == ["--model", "qwen", "--max-num-seqs", "256"]
    rs = cluster.apps().read_namespaced_replica_set(owner.name, NS)
    assert rs.status.ready_replicas == 2


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=vllm", 2),
        ("app==vllm", 2),
        ("app!=vllm", 0),
        ("app in (vllm,other)", 2),
        ("app notin (vllm)", 0),
        ("app", 2),
        ("!app", 0),
        ("app=vllm,tier!=frontend", 2),
        ("app in (x,y),tier!=frontend", 0),
    ],
)
def test_label_selectors(cluster: Cluster, selector: str, expected: int) -> None:
    cluster.ready_pods(2)
    pods = cluster.core().list_namespaced_pod(NS, label_selector=selector).items
    assert len(pods) == expected


def test_field_selectors(cluster: Cluster) -> None:
    name = cluster.ready_pods(2)[0].metadata.name
    core = cluster.core()

    def count(selector: str) -> int:
        return len(core.list_namespaced_pod(NS, field_selector=selector).items)

    assert count(f"metadata.name={name}") == 1
    assert count("status.phase=Running") == 2
    assert count("status.phase=Pending") == 0
    assert count("spec.nodeName=gpu-node-1") == 2
    assert count("spec.nodeName!=gpu-node-1") == 0
    assert count(f"metadata.name={name},status.phase=Running") == 1
    assert len(core.list_pod_for_all_namespaces(field_selector=f"metadata.name={name}").items) == 1


def test_bad_selectors_are_400(cluster: Cluster) -> None:
    core = cluster.core()
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(NS, field_selector="spec.image=x")
    assert err.value.status == 400
    assert status_of(err.value)["message"] == "field label not supported: spec.image"
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod(NS, label_selector="app in vllm")
    assert err.value.status == 400


def test_list_pages_with_limit_and_continue(cluster: Cluster) -> None:
    cluster.ready_pods(2)
    core = cluster.core()
    first = core.list_namespaced_pod(NS, limit=1)
    assert len(first.items) == 1 and first.metadata._continue
    assert first.metadata.remaining_item_count == 1
    second = core.list_namespaced_pod(NS, limit=1, _continue=first.metadata._continue)
    assert len(second.items) == 1 and not second.metadata._continue
    assert first.items[0].metadata.name != second.items[0].metadata.name


def test_missing_pod_is_404_not_found(cluster: Cluster) -> None:
    with pytest.raises(ApiException) as err:
        cluster.core().read_namespaced_pod("nope", NS)
    assert err.value.status == 404
    body = status_of(err.value)
    assert body["reason"] == "NotFound"
    assert body["message"] == 'pods "nope" not found'
    assert body["details"] == {"name": "nope", "kind": "pods"}


def test_uid_precondition_mismatch_is_409_and_deletes_nothing(cluster: Cluster) -> None:
    pod = cluster.ready_pods(2)[0]
    core = cluster.core()
    wrong = "11111111-2222-3333-4444-555555555555"
    opts = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=wrong))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod(pod.metadata.name, NS, body=opts)
    assert err.value.status == 409
    body = status_of(err.value)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        f'Operation cannot be fulfilled on Pod "{pod.metadata.name}": the UID in the precondition '
        f"({wrong}) does not match the UID in record ({pod.metadata.uid}). "
        "The object might have been deleted and then recreated"
    )
    assert body["details"] == {"name": pod.metadata.name, "kind": "Pod"}
    after = core.read_namespaced_pod(pod.metadata.name, NS)
    assert after.metadata.uid == pod.metadata.uid
    assert after.metadata.deletion_timestamp is None


def test_resource_version_precondition_mismatch_is_409(cluster: Cluster) -> None:
    pod = cluster.ready_pods(2)[0]
    opts = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version="1"))
    with pytest.raises(ApiException) as err:
        cluster.core().delete_namespaced_pod(pod.metadata.name, NS, body=opts)
    assert err.value.status == 409
    message = status_of(err.value)["message"]
    assert message == (
        f'Operation cannot be fulfilled on pods "{pod.metadata.name}": StorageError: invalid '
        f"object, Code: 4, Key: /registry/pods/{NS}/{pod.metadata.name}, ResourceVersion: 0, "
        "AdditionalErrorMsg: Precondition failed: ResourceVersion in precondition: 1, "
        f"ResourceVersion in object meta: {pod.metadata.resource_version}"
    )


def test_dry_run_delete_changes_nothing(cluster: Cluster) -> None:
    pod = cluster.ready_pods(2)[0]
    core = cluster.core()
    opts = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=pod.metadata.uid))
    preview = core.delete_namespaced_pod(pod.metadata.name, NS, body=opts, dry_run="All")
    assert preview.metadata.deletion_timestamp is not None
    after = core.read_namespaced_pod(pod.metadata.name, NS)
    assert after.metadata.deletion_timestamp is None
    assert after.metadata.resource_version == pod.metadata.resource_version
    assert {p.metadata.uid for p in core.list_namespaced_pod(NS).items} == {
        p.metadata.uid for p in cluster.ready_pods(2)
    }
    # A dry run still checks preconditions.
    bad = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="x"))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod(pod.metadata.name, NS, body=bad, dry_run="All")
    assert err.value.status == 409


def test_deleted_pod_is_replaced_with_a_new_uid_and_becomes_ready(cluster: Cluster) -> None:
    before = cluster.ready_pods(2)
    victim = before[0]
    core = cluster.core()
    opts = client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=victim.metadata.uid), grace_period_seconds=5
    )
    deleted = core.delete_namespaced_pod(victim.metadata.name, NS, body=opts)
    assert deleted.metadata.uid == victim.metadata.uid
    assert deleted.metadata.deletion_timestamp is not None
    assert deleted.metadata.deletion_grace_period_seconds == 5
    after = cluster.ready_pods(2)
    uids = {p.metadata.uid for p in after}
    assert victim.metadata.uid not in uids
    assert before[1].metadata.uid in uids
    (new,) = [p for p in after if p.metadata.uid != before[1].metadata.uid]
    assert new.metadata.name != victim.metadata.name
    assert new.metadata.name.startswith(f"vllm-{victim.metadata.labels['pod-template-hash']}-")
    events = core.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={victim.metadata.name}"
    )
    assert "Killing" in {e.reason for e in events.items}


def test_delete_with_grace_zero_removes_at_once(cluster: Cluster) -> None:
    victim = cluster.ready_pods(2)[0]
    core = cluster.core()
    core.delete_namespaced_pod(victim.metadata.name, NS, grace_period_seconds=0)
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod(victim.metadata.name, NS)
    assert err.value.status == 404
    cluster.ready_pods(2)


def _drill(cluster: Cluster, path: str, body: dict[str, object]) -> httpx.Response:
    return httpx.post(f"{cluster.server.url}/drill/{path}", json=body, timeout=5)


def test_oom_kill_shows_in_last_state_and_events(cluster: Cluster) -> None:
    pod = cluster.ready_pods(2)[0]
    name = pod.metadata.name
    reply = _drill(cluster, "oom-kill", {"namespace": NS, "pod": name, "container": "vllm"})
    assert reply.status_code == 200, reply.text
    core = cluster.core()
    killed = core.read_namespaced_pod(name, NS)
    (status,) = killed.status.container_statuses
    assert status.restart_count == 1
    terminated = status.last_state.terminated
    assert terminated.reason == "OOMKilled"
    assert terminated.exit_code == 137
    assert terminated.finished_at is not None
    assert any(c.type == "Ready" and c.status == "False" for c in killed.status.conditions)
    # The container restarts and the pod becomes Ready again, same pod, same uid.
    ready = cluster.ready_pods(2)
    assert pod.metadata.uid in {p.metadata.uid for p in ready}
    pod_events = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
    assert "BackOff" in {e.reason for e in pod_events.items}
    node_events = core.list_event_for_all_namespaces(
        field_selector="involvedObject.kind=Node,involvedObject.name=gpu-node-1,reason=OOMKilling"
    )
    assert len(node_events.items) == 1
    assert node_events.items[0].type == "Warning"


def test_drill_endpoint_rejects_unknown_pod(cluster: Cluster) -> None:
    reply = _drill(cluster, "oom-kill", {"namespace": NS, "pod": "nope"})
    assert reply.status_code == 404
    assert reply.json()["message"] == 'pods "nope" not found'


def test_memory_pressure_blocks_scheduling_until_cleared(cluster: Cluster) -> None:
    victim = cluster.ready_pods(2)[0]
    reply = _drill(
        cluster,
        "node-condition",
        {"node": "gpu-node-1", "type": "MemoryPressure", "status": "True"},
    )
    assert reply.status_code == 200, reply.text
    core = cluster.core()
    node = core.read_node("gpu-node-1")
    conditions = {c.type: c for c in node.status.conditions}
    assert conditions["MemoryPressure"].status == "True"
    assert conditions["MemoryPressure"].reason == "KubeletHasInsufficientMemory"
    assert [t.key for t in node.spec.taints] == ["node.kubernetes.io/memory-pressure"]
    core.delete_namespaced_pod(victim.metadata.name, NS, grace_period_seconds=0)

    def pending_replacement() -> list[Any]:
        pods = core.list_namespaced_pod(NS, field_selector="status.phase=Pending").items
        return [
            p
            for p in pods
            if any(
                c.type == "PodScheduled" and c.reason == "Unschedulable"
                for c in p.status.conditions or []
            )
        ]

    (pending,) = wait_until(pending_replacement, within=10, what="an unschedulable replacement")
    events = core.list_namespaced_event(
        NS, field_selector=f"involvedObject.name={pending.metadata.name}"
    )
    assert "FailedScheduling" in {e.reason for e in events.items}
    _drill(
        cluster, "node-condition", {"node": "gpu-node-1", "type": "MemoryPressure", "status": False}
    )
    assert core.read_node("gpu-node-1").spec.taints is None
    assert pending.metadata.uid in {p.metadata.uid for p in cluster.ready_pods(2)}


def test_create_event_and_select_by_involved_object(cluster: Cluster) -> None:
    core = cluster.core()
    dep = cluster.apps().read_namespaced_deployment("vllm", NS)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="vllm.oncall-"),
        involved_object=client.V1ObjectReference(
            kind="Deployment",
            namespace=NS,
            name="vllm",
            uid=dep.metadata.uid,
            api_version="apps/v1",
        ),
        reason="OncallRemediation",
        message="max-num-seqs 256 -> 128 by alice",
        type="Normal",
        source=client.V1EventSource(component="oncall"),
    )
    created = core.create_namespaced_event(NS, event)
    assert created.metadata.name.startswith("vllm.oncall-")
    assert created.metadata.uid
    found = core.list_namespaced_event(
        NS, field_selector="involvedObject.name=vllm,reason=OncallRemediation"
    ).items
    assert [e.message for e in found] == ["max-num-seqs 256 -> 128 by alice"]
