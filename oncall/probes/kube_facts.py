"""Kubernetes API JSON (pods, events, deployments, nodes) → the facts of the kube probes.

Pure functions over the server's camelCase dicts, so they can be tested without a cluster and
read the same whatever the client library did. Field meanings are documented on the probes
in `oncall.probes.kube`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from oncall.backends.kube import Obj
from oncall.probes.base import Facts

GPU = "nvidia.com/gpu"
EPOCH = datetime.min.replace(tzinfo=UTC)


def parse_time(text: object) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when absent or malformed."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def age_s(text: object, now: datetime) -> float | None:
    """Seconds from the timestamp to `now` (ms precision); None without a timestamp."""
    when = parse_time(text)
    return None if when is None else round((now - when).total_seconds(), 3)


def condition(obj: Obj, type_: str) -> bool:
    """True when the object's condition `type_` has status "True" (absent: False)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return bool(cond.get("status") == "True")
    return False


def _termination(status: Obj) -> Obj | None:
    """The container's latest termination: its current one, else its previous one."""
    current = (status.get("state") or {}).get("terminated")
    return current or (status.get("lastState") or {}).get("terminated")


def _container_facts(spec: Obj, status: Obj | None) -> Facts:
    state = (status or {}).get("state") or {}
    kind = next((k for k in ("running", "waiting", "terminated") if state.get(k)), None)
    last = _termination(status) if status else None
    return {
        "name": spec.get("name"),
        "ready": bool((status or {}).get("ready")),
        "restarts": int((status or {}).get("restartCount") or 0),
        "state": kind,
        "waiting_reason": (state.get("waiting") or {}).get("reason"),
        "last_termination_reason": last.get("reason") if last else None,
    }


def pod_facts(pod: Obj, now: datetime) -> Facts:
    """The facts of one pod (documented on `oncall.probes.kube.run_pods`)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
    containers = [
        _container_facts(c, statuses.get(c.get("name"))) for c in spec.get("containers") or []
    ]
    terminations = [t for t in (_termination(s) for s in statuses.values()) if t]
    latest = max(
        terminations,
        key=lambda t: parse_time(t.get("finishedAt")) or EPOCH,
        default=None,
    )
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "namespace": meta.get("namespace"),
        "phase": status.get("phase"),
        "reason": status.get("reason"),
        "ready": condition(pod, "Ready"),
        "terminating": meta.get("deletionTimestamp") is not None,
        "restarts": sum(c["restarts"] for c in containers),
        "last_termination_reason": latest.get("reason") if latest else None,
        "last_termination_exit_code": latest.get("exitCode") if latest else None,
        "last_terminated_at": latest.get("finishedAt") if latest else None,
        "node": spec.get("nodeName"),
        "age_s": age_s(meta.get("creationTimestamp"), now),
        "resource_version": meta.get("resourceVersion"),
        "containers": containers,
    }


def event_facts(event: Obj, now: datetime) -> Facts:
    """The facts of one event (documented on `oncall.probes.kube.run_events`)."""
    series = event.get("series") or {}
    last_seen = (
        event.get("lastTimestamp")
        or series.get("lastObservedTime")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
    )
    involved = event.get("involvedObject") or {}
    return {
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": event.get("message"),
        "count": int(event.get("count") or series.get("count") or 1),
        "last_seen": last_seen,
        "age_s": age_s(last_seen, now),
        "object": f"{involved.get('kind')}/{involved.get('name')}",
    }


def _gpus(resources: Any) -> int:
    value = (resources or {}).get(GPU) if isinstance(resources, dict) else None
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


def node_facts(node: Obj) -> Facts:
    """The facts of one node (documented on `oncall.probes.kube.run_nodes`)."""
    status = node.get("status") or {}
    return {
        "name": (node.get("metadata") or {}).get("name"),
        "ready": condition(node, "Ready"),
        "memory_pressure": condition(node, "MemoryPressure"),
        "disk_pressure": condition(node, "DiskPressure"),
        "pid_pressure": condition(node, "PIDPressure"),
        "network_unavailable": condition(node, "NetworkUnavailable"),
        "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
        "gpu_capacity": _gpus(status.get("capacity")),
        "gpu_allocatable": _gpus(status.get("allocatable")),
    }
