"""The generic Kubernetes runbooks name the cause, read through oncall's Kubernetes client and
the real probes from the simulator, which must answer in the shapes recorded in
`fixtures/kubernetes/`: a pod Pending for want of a GPU (the scheduler's `FailedScheduling`
event on the pod, `kube-pod-not-ready`), and a crash loop whose cause is the previous log's last
error line (a missing environment variable, a bad flag: `kube-pod-crash-looping`)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from oncall.probes import kube_log_facts
from oncall.probes.kube_facts import event_facts, pod_facts
from oncall_drill.kube_sim import KubeSim, SimulatorThread, verbs
from oncall_drill.kube_sim.resources import DEPLOYMENTS, EVENTS, PODS
from tests.harness.waiting import wait_until
from tests.probes.kube_cluster import NS, ROOT, Cluster, checklist, died_after

KUBE = ROOT / "fixtures" / "kubernetes"
MISSING_ENV = (KUBE / "log_previous_missing_env.log").read_bytes()
BAD_FLAG = (KUBE / "log_previous_bad_flag.log").read_bytes()
#: kube-scheduler's FitError for one node (the simulator's) with no free nvidia.com/gpu.
ONE_NODE_SHORT = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are "
    "available: 1 No preemption victims found for incoming pod."
)


def recorded(name: str) -> Any:
    document = json.loads((KUBE / name).read_text())
    document.pop("_comment", None)
    return document


def _pending(sim: KubeSim, server: SimulatorThread) -> dict[str, Any]:
    """Scale the vLLM Deployment past the node's 4 GPUs; the pod left Pending."""

    def scale() -> None:
        deployment = verbs.get(sim, DEPLOYMENTS, NS, "vllm")
        deployment["spec"]["replicas"] = 5
        verbs.update(sim, DEPLOYMENTS, NS, "vllm", deployment, dry_run=False)

    server.call(scale)

    def pending() -> list[dict[str, Any]]:
        pods = server.call(lambda: sim.store.list(PODS, NS))
        return [p for p in pods if not p["spec"].get("nodeName") and p["status"].get("conditions")]

    (pod,) = wait_until(pending, within=10, what="a Pending pod with its PodScheduled condition")
    return pod


async def test_the_simulator_leaves_a_pod_pending_as_kube_scheduler_does(
    cluster: Cluster,
) -> None:
    sim, server, _, _ = cluster
    pod = _pending(sim, server)
    want = recorded("pod_pending_insufficient_gpu.json")
    (condition,) = pod["status"]["conditions"]
    (recorded_condition,) = want["status"]["conditions"]
    assert set(condition) == set(recorded_condition)
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled", "False", "Unschedulable"
    )  # fmt: skip
    assert condition["message"] == ONE_NODE_SHORT
    assert (pod["status"]["phase"], pod["status"].get("containerStatuses")) == ("Pending", None)
    name = pod["metadata"]["name"]
    events = server.call(lambda: sim.store.list(EVENTS, NS))
    (event,) = [e for e in events if e["involvedObject"]["name"] == name]
    (recorded_event,) = recorded("events_failed_scheduling.json")["items"]
    # The recorded event has a series (six retries); the simulator's is the first.
    assert set(event) | {"series", "apiVersion", "kind"} >= set(recorded_event)
    for key in ("reason", "type", "source", "firstTimestamp", "lastTimestamp", "action",
                "reportingComponent"):  # fmt: skip
        assert event[key] == recorded_event[key], key
    assert event["message"] == ONE_NODE_SHORT
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", event["eventTime"])
    assert set(event["involvedObject"]) == set(recorded_event["involvedObject"])
    assert event["involvedObject"]["kind"] == "Pod"
    # Nothing about it on the Deployment: the scheduler writes to the pod.
    assert not [e for e in events if e["involvedObject"]["kind"] == "Deployment"
                and e["reason"] == "FailedScheduling"]  # fmt: skip


def test_the_recorded_pending_pod_reads_as_unscheduled() -> None:
    pod = pod_facts(recorded("pod_pending_insufficient_gpu.json"), datetime.now(UTC))
    assert (pod["phase"], pod["node"], pod["ready"]) == ("Pending", None, False)
    (item,) = recorded("events_failed_scheduling.json")["items"]
    event = event_facts(item, datetime.now(UTC))
    assert (event["reason"], event["count"], event["object"]) == (
        "FailedScheduling", 6, "Pod/vllm-7d9c6b5f4-q7zlp"
    )  # fmt: skip
    assert event["last_seen"] == "2026-11-29T18:26:11.530127Z"


async def test_kube_pod_not_ready_names_the_gpu_shortage(
    cluster: Cluster,
) -> None:
    sim, server, settings, _ = cluster
    pod = _pending(sim, server)
    labels = {"namespace": NS, "pod": pod["metadata"]["name"]}
    steps = await checklist(settings, "kube-pod-not-ready.yaml", labels)
    assert steps["pod"]["status"] == "fail"
    assert steps["pod"]["summary"] == (
        "Pending, not scheduled on any node (the scheduling step says why), 0 restarts"
    )
    assert steps["scheduling"]["status"] == "fail"
    assert steps["scheduling"]["summary"] == (
        "Pending for want of a GPU (no node has the nvidia.com/gpu it requests free: add or "
        f"free a GPU node, or scale back): {ONE_NODE_SHORT}"
    )
    assert steps["events"]["status"] == "ok"
    running = sorted(p["metadata"]["name"] for p in server.call(lambda: sim.ready_pods(NS)))[0]
    healthy = await checklist(
        settings, "kube-pod-not-ready.yaml", {"namespace": NS, "pod": running}
    )
    assert {k: v["status"] for k, v in healthy.items()} == {
        "pod": "ok", "scheduling": "ok", "events": "ok"
    }  # fmt: skip
    replicas = await checklist(
        settings, "kube-deployment-replicas-mismatch.yaml", {"namespace": NS, "deployment": "vllm"}
    )
    assert replicas["pods_scheduling"]["status"] == "fail"
    assert replicas["pods_scheduling"]["summary"] == (
        f"Pod/{labels['pod']} is Pending: {ONE_NODE_SHORT}"
    )


@pytest.mark.parametrize(
    ("log", "exit_code", "cause"),
    [
        (MISSING_ENV, 3, "KeyError: 'REDIS_URL'"),
        (BAD_FLAG, 2, "vllm serve: error: unrecognized arguments: --gpu-memory-utilisation 0.92"),
    ],
)
async def test_kube_pod_crash_looping_names_the_last_error_line_of_the_previous_log(
    cluster: Cluster,
    log: bytes,
    exit_code: int,
    cause: str,
) -> None:
    name = died_after(cluster, 0, log, "Error", exit_code)
    settings = cluster[2]
    labels = {"namespace": NS, "pod": name, "container": "vllm"}
    steps = await checklist(settings, "kube-pod-crash-looping.yaml", labels)
    assert steps["previous_log"]["status"] == "fail"
    assert steps["previous_log"]["summary"] == (
        f"the previous container (Error, exit {exit_code}) ended with: {cause}"
    )
    # The same reading straight from the recorded text.
    assert kube_log_facts.last_error_line(kube_log_facts.log_lines(log.decode(), 200)) == cause
