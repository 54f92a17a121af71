"""Fault injection for drills: container deaths (OOM kills) and node pressure conditions.

These change the cluster the way the kubelet would report the fault: an OOM-killed container
gets `lastState.terminated` (reason OOMKilled, exit code 137), a restart (restartCount + 1), a
node event `OOMKilling` from the kernel monitor and a pod event `BackOff`; its process is stopped
and started again through the pod hook. Node conditions move with their kubelet reasons and taints.
"""

from __future__ import annotations

import random
from typing import Protocol

from oncall_drill.kube_sim import errors, podstatus
from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.kubelet import Kubelet
from oncall_drill.kube_sim.podhook import container as find_container
from oncall_drill.kube_sim.resources import NODES, PODS
from oncall_drill.kube_sim.store import Obj, Store, now_rfc3339


class Cluster(Protocol):
    """What a fault changes: the objects, the events and the kubelet of one cluster.

    `KubeSim` is one, and offers these faults as methods; this module does not import it.
    """

    @property
    def store(self) -> Store: ...
    @property
    def events(self) -> EventRecorder: ...
    @property
    def kubelet(self) -> Kubelet: ...


# condition type -> (taint key, reason/message when True, reason/message when False)
_PRESSURE: dict[str, tuple[str, tuple[str, str], tuple[str, str]]] = {
    "MemoryPressure": (
        "node.kubernetes.io/memory-pressure",
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    "DiskPressure": (
        "node.kubernetes.io/disk-pressure",
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    "PIDPressure": (
        "node.kubernetes.io/pid-pressure",
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
}
_NODE_EVENT_REASON = {
    ("MemoryPressure", True): "NodeHasInsufficientMemory",
    ("MemoryPressure", False): "NodeHasSufficientMemory",
    ("DiskPressure", True): "NodeHasDiskPressure",
    ("DiskPressure", False): "NodeHasNoDiskPressure",
    ("PIDPressure", True): "NodeHasInsufficientPID",
    ("PIDPressure", False): "NodeHasSufficientPID",
    ("Ready", True): "NodeReady",
    ("Ready", False): "NodeNotReady",
}


def container_exited(
    sim: Cluster,
    namespace: str,
    pod_name: str,
    container: str | None = None,
    *,
    reason: str = "Error",
    exit_code: int = 1,
) -> Obj:
    """The container died and the kubelet restarted it; returns the updated pod."""
    pod = sim.store.get(PODS, namespace, pod_name)
    if pod is None:
        raise errors.not_found(PODS, pod_name)
    spec_container = find_container(pod, container)
    if spec_container is None:
        raise errors.bad_request(f'container "{container}" not found in pod "{pod_name}"')
    name = str(spec_container["name"])
    if podstatus.is_terminating(pod) or not podstatus.mark_container_terminated(
        pod, name, reason, exit_code
    ):
        raise errors.bad_request(f'container "{name}" in pod "{pod_name}" is not running')
    stored = sim.store.replace(PODS, pod)
    sim.events.record(
        stored,
        "BackOff",
        f"Back-off restarting failed container {name} in pod "
        f"{pod_name}_{namespace}({stored['metadata']['uid']})",
        type_="Warning",
        host=stored["spec"].get("nodeName"),
        field_path=f"spec.containers{{{name}}}",
    )
    sim.kubelet.restart_container(stored)
    return stored


def oom_kill(sim: Cluster, namespace: str, pod_name: str, container: str | None = None) -> Obj:
    """The kernel's OOM killer kills the container (exit 137, reason OOMKilled)."""
    pod = container_exited(sim, namespace, pod_name, container, reason="OOMKilled", exit_code=137)
    node = sim.store.get(NODES, None, pod["spec"].get("nodeName") or "")
    if node is not None:
        pid = random.randint(1000, 60000)  # noqa: S311 - a plausible pid, not a secret
        sim.events.record(
            node,
            "OOMKilling",
            f"Memory cgroup out of memory: Killed process {pid} (python3) "
            f"total-vm:{random.randint(40, 90) * 1048576}kB, anon-rss:{64 * 1048576}kB, "  # noqa: S311
            "file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:131072kB oom_score_adj:999",
            type_="Warning",
            component="kernel-monitor",
            host=node["metadata"]["name"],
        )
    return pod


def set_node_condition(
    sim: Cluster,
    node_name: str,
    type_: str,
    status: bool,
    *,
    reason: str = "",
    message: str = "",
) -> Obj:
    """Set a node condition (MemoryPressure, DiskPressure, PIDPressure, Ready, ...)."""
    node = sim.store.get(NODES, None, node_name)
    if node is None:
        raise errors.not_found(NODES, node_name)
    wanted = "True" if status else "False"
    if type_ in _PRESSURE and not reason:
        reason, message = _PRESSURE[type_][1] if status else _PRESSURE[type_][2]
    elif type_ == "Ready" and not reason:
        reason, message = (
            ("KubeletReady", "kubelet is posting ready status")
            if status
            else ("NodeStatusUnknown", "Kubelet stopped posting node status.")
        )
    now = now_rfc3339()
    conditions = node.setdefault("status", {}).setdefault("conditions", [])
    cond = next((c for c in conditions if c.get("type") == type_), None)
    if cond is None:
        cond = {"type": type_, "lastTransitionTime": now}
        conditions.append(cond)
    elif cond.get("status") != wanted:
        cond["lastTransitionTime"] = now
    cond.update(status=wanted, reason=reason, message=message, lastHeartbeatTime=now)
    taint_key = _PRESSURE[type_][0] if type_ in _PRESSURE else None
    if type_ == "Ready":
        taint_key = "node.kubernetes.io/not-ready"
        status = not status
    if taint_key:
        spec = node.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if t.get("key") != taint_key]
        if status:
            taints.append({"key": taint_key, "effect": "NoSchedule", "timeAdded": now})
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
    stored = sim.store.replace(NODES, node)
    event_reason = _NODE_EVENT_REASON.get((type_, wanted == "True"))
    if event_reason:
        sim.events.record(
            stored,
            event_reason,
            f"Node {node_name} status is now: {event_reason}",
            component="kubelet",
            host=node_name,
        )
    return stored
