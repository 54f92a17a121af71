"""Pure transitions of a Pod's status as the kubelet reports them.

Each function takes a pod dict and changes its status in place: Pending -> Running (containers
started, not ready) -> Ready; a container killed (OOMKilled, exit 137) and restarted; a container
that failed to start (CrashLoopBackOff). Shapes follow core/v1 PodStatus.
"""

from __future__ import annotations

import secrets
from typing import Any

from oncall_drill.kube_sim.store import Obj, now_rfc3339


def _status(pod: Obj) -> dict[str, Any]:
    status = pod.setdefault("status", {})
    assert isinstance(status, dict)
    return status


def container_names(pod: Obj) -> list[str]:
    return [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]


def set_condition(pod: Obj, type_: str, value: bool, reason: str = "", message: str = "") -> None:
    """Add or update a pod condition; lastTransitionTime moves only when the value flips."""
    conditions: list[dict[str, Any]] = _status(pod).setdefault("conditions", [])
    wanted = "True" if value else "False"
    for cond in conditions:
        if cond.get("type") == type_:
            if cond.get("status") != wanted:
                cond["lastTransitionTime"] = now_rfc3339()
            cond["status"] = wanted
            _reason(cond, reason, message)
            return
    cond = {
        "type": type_,
        "status": wanted,
        "lastProbeTime": None,
        "lastTransitionTime": now_rfc3339(),
    }
    _reason(cond, reason, message)
    conditions.append(cond)


def _reason(cond: dict[str, Any], reason: str, message: str) -> None:
    for key, value in (("reason", reason), ("message", message)):
        if value:
            cond[key] = value
        else:
            cond.pop(key, None)


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def is_terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _image(pod: Obj, name: str) -> str:
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") == name:
            return str(c.get("image") or "")
    return ""


def _container_id() -> str:
    return f"containerd://{secrets.token_hex(32)}"


def _not_ready(pod: Obj, names: list[str]) -> None:
    message = f"containers with unready status: [{' '.join(names)}]"
    set_condition(pod, "Ready", False, "ContainersNotReady", message)
    set_condition(pod, "ContainersReady", False, "ContainersNotReady", message)


def mark_scheduled(pod: Obj, node_name: str) -> None:
    pod.setdefault("spec", {})["nodeName"] = node_name
    set_condition(pod, "PodScheduled", True)


def mark_unschedulable(pod: Obj, message: str) -> None:
    set_condition(pod, "PodScheduled", False, "Unschedulable", message)


def mark_running(pod: Obj, host_ip: str, pod_ip: str) -> None:
    """The containers have started but are not ready yet."""
    status = _status(pod)
    now = now_rfc3339()
    status.update(phase="Running", hostIP=host_ip, podIP=pod_ip, startTime=now)
    status["hostIPs"] = [{"ip": host_ip}]
    status["podIPs"] = [{"ip": pod_ip}]
    names = container_names(pod)
    set_condition(pod, "PodReadyToStartContainers", True)
    set_condition(pod, "Initialized", True)
    _not_ready(pod, names)
    status["containerStatuses"] = [
        {
            "name": name,
            "image": _image(pod, name),
            "imageID": f"{_image(pod, name)}@sha256:{'0' * 64}",
            "containerID": _container_id(),
            "ready": False,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": now}},
            "lastState": {},
        }
        for name in names
    ]


def mark_ready(pod: Obj) -> None:
    for cs in _status(pod).get("containerStatuses") or []:
        if "running" in (cs.get("state") or {}):
            cs["ready"] = True
    statuses = _status(pod).get("containerStatuses") or []
    if statuses and all(cs.get("ready") for cs in statuses):
        set_condition(pod, "ContainersReady", True)
        set_condition(pod, "Ready", True)


def mark_container_terminated(pod: Obj, container: str, reason: str, exit_code: int) -> bool:
    """The container died and was restarted at once: lastState records why. False if unknown."""
    for cs in _status(pod).get("containerStatuses") or []:
        if cs.get("name") != container:
            continue
        now = now_rfc3339()
        running = (cs.get("state") or {}).get("running") or {}
        cs["lastState"] = {
            "terminated": {
                "exitCode": exit_code,
                "reason": reason,
                "startedAt": running.get("startedAt"),
                "finishedAt": now,
                "containerID": cs.get("containerID"),
            }
        }
        cs["restartCount"] = int(cs.get("restartCount") or 0) + 1
        cs["containerID"] = _container_id()
        cs["state"] = {"running": {"startedAt": now}}
        cs["ready"] = False
        cs["started"] = True
        _not_ready(pod, [container])
        return True
    return False


def mark_crashed(pod: Obj, message: str) -> None:
    """The container could not start: it waits in CrashLoopBackOff."""
    for cs in _status(pod).get("containerStatuses") or []:
        cs["ready"] = False
        cs["started"] = False
        cs["state"] = {
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off restarting failed container {cs.get('name')}: {message}",
            }
        }
    _not_ready(pod, container_names(pod))


def qos_class(spec: dict[str, Any]) -> str:
    """Guaranteed when every container's requests equal its limits, else Burstable/BestEffort."""
    containers = spec.get("containers") or []
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("limits") or r.get("requests") for r in resources):
        return "BestEffort"
    guaranteed = all(
        r.get("limits")
        and {"cpu", "memory"} <= set(r["limits"])
        and all(r.get("requests", r["limits"]).get(k) == v for k, v in r["limits"].items())
        for r in resources
    )
    return "Guaranteed" if guaranteed else "Burstable"
