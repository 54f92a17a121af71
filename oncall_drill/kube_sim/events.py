"""Recording core/v1 Events the way the kubelet and controllers do (with count deduplication),
and the way kube-scheduler does: it writes through events.k8s.io/v1, so its events read back
through core/v1 with `eventTime` (microseconds), `action`, `reportingComponent`/`Instance`, an
empty `source`, no `firstTimestamp`/`lastTimestamp`/`count`, and a repeat as `series`
(`fixtures/kubernetes/events_failed_scheduling.json`)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from oncall_drill.kube_sim.resources import EVENTS
from oncall_drill.kube_sim.store import Obj, Store, now_rfc3339


class EventRecorder:
    """Writes Events into the store; a repeat of the same event bumps `count` instead."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._seen: dict[tuple[str, str, str, str], tuple[str, str]] = {}

    def record(
        self,
        involved: Obj,
        reason: str,
        message: str,
        *,
        type_: str = "Normal",
        component: str = "kubelet",
        host: str | None = None,
        field_path: str | None = None,
    ) -> Obj:
        """Record an event about `involved` (any stored object); returns the Event."""
        imeta = involved.get("metadata") or {}
        namespace = imeta.get("namespace") or "default"
        uid = str(imeta.get("uid", ""))
        key = (uid, reason, message, field_path or "")
        now = now_rfc3339()
        if key in self._seen:
            ns, name = self._seen[key]
            existing = self._store.get(EVENTS, ns, name)
            if existing is not None:
                existing["count"] = int(existing.get("count") or 1) + 1
                existing["lastTimestamp"] = now
                return self._store.replace(EVENTS, existing)
        obj_ref: dict[str, Any] = {
            "kind": involved.get("kind"),
            "name": imeta.get("name"),
            "uid": uid,
            "apiVersion": involved.get("apiVersion"),
            "resourceVersion": imeta.get("resourceVersion"),
        }
        if imeta.get("namespace"):
            obj_ref["namespace"] = imeta["namespace"]
        if field_path:
            obj_ref["fieldPath"] = field_path
        source: dict[str, Any] = {"component": component}
        if host:
            source["host"] = host
        # Event names are <object>.<hex of the time>, unique enough with a random tail.
        suffix = f"{time.time_ns():x}"[-12:] + secrets.token_hex(2)
        event: Obj = {
            "metadata": {"name": f"{imeta.get('name')}.{suffix}", "namespace": namespace},
            "involvedObject": obj_ref,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": type_,
            "eventTime": None,
            "reportingComponent": component,
            "reportingInstance": host or "",
        }
        created = self._store.create(EVENTS, event, namespace)
        self._seen[key] = (namespace, created["metadata"]["name"])
        return created

    def record_scheduling(
        self, pod: Obj, reason: str, message: str, *, type_: str = "Normal", host: str = ""
    ) -> Obj:
        """An event of kube-scheduler about pod (`Scheduled`, `FailedScheduling`), in the
        events.k8s.io/v1 shape; a repeat of the same reason and message becomes its `series`."""
        meta = pod.get("metadata") or {}
        namespace, uid = str(meta.get("namespace") or "default"), str(meta.get("uid", ""))
        key = (uid, reason, message, "scheduler")
        now = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
            + f".{time.time_ns() // 1000 % 10**6:06d}Z"
        )
        if key in self._seen:
            existing = self._store.get(EVENTS, *self._seen[key])
            if existing is not None:
                count = int((existing.get("series") or {}).get("count") or 1) + 1
                existing["series"] = {"count": count, "lastObservedTime": now}
                return self._store.replace(EVENTS, existing)
        suffix = f"{time.time_ns():x}"[-12:] + secrets.token_hex(2)
        event: Obj = {
            "metadata": {"name": f"{meta.get('name')}.{suffix}", "namespace": namespace},
            "involvedObject": {
                "kind": "Pod", "namespace": namespace, "name": meta.get("name"), "uid": uid,
                "apiVersion": "v1", "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason, "message": message, "source": {}, "type": type_,
            "firstTimestamp": None, "lastTimestamp": None, "eventTime": now,
            "action": "Binding" if reason == "Scheduled" else "Scheduling",
            "reportingComponent": "default-scheduler",
            "reportingInstance": f"default-scheduler-{host or 'control-plane'}",
        }  # fmt: skip
        created = self._store.create(EVENTS, event, namespace)
        self._seen[key] = (namespace, created["metadata"]["name"])
        return created
