"""The simulated Deployment and ReplicaSet controllers.

Each pod template gets a ReplicaSet named `<deployment>-<pod-template-hash>`; a template change
creates a new one and rolls pods over with the RollingUpdate budget (maxSurge / maxUnavailable,
rounded like the real controller) or Recreate. Status is written only when it changes:
observedGeneration, replicas, updatedReplicas, readyReplicas, availableReplicas,
unavailableReplicas, and the Available / Progressing conditions (with ProgressDeadlineExceeded).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from typing import Any

from oncall_drill.kube_sim import podstatus
from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.kubelet import Kubelet
from oncall_drill.kube_sim.resources import DEPLOYMENTS, PODS, REPLICASETS
from oncall_drill.kube_sim.store import Obj, Store, now_rfc3339, random_suffix

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
_HASH_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def template_hash(template: Any) -> str:
    """A stable pod-template-hash for a template (10 characters of the apiserver's alphabet)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    chars = []
    for _ in range(10):
        number, rem = divmod(number, len(_HASH_ALPHABET))
        chars.append(_HASH_ALPHABET[rem])
    return "".join(chars)


def _scaled(value: Any, replicas: int, *, round_up: bool) -> int:
    if value is None:
        value = "25%"
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * replicas / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


def rollout_budget(dep: Obj, replicas: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts."""
    strategy = (dep.get("spec") or {}).get("strategy") or {}
    if strategy.get("type") == "Recreate":
        return 0, replicas
    rolling = strategy.get("rollingUpdate") or {}
    surge = _scaled(rolling.get("maxSurge"), replicas, round_up=True)
    unavailable = _scaled(rolling.get("maxUnavailable"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _owned_by(obj: Obj, uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("controller") for r in refs)


def owner_ref(owner: Obj) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _set_condition(
    conditions: list[dict[str, Any]], type_: str, value: bool, reason: str, message: str
) -> None:
    status = "True" if value else "False"
    now = now_rfc3339()
    for cond in conditions:
        if cond["type"] == type_:
            if (cond["status"], cond.get("reason"), cond.get("message")) != (
                status,
                reason,
                message,
            ):
                if cond["status"] != status:
                    cond["lastTransitionTime"] = now
                cond.update(status=status, reason=reason, message=message, lastUpdateTime=now)
            return
    conditions.append(
        {
            "type": type_,
            "status": status,
            "lastUpdateTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }
    )


def _complete(dep: Obj) -> bool:
    """The status says the rollout finished (Progressing: NewReplicaSetAvailable)."""
    status = dep.get("status") or {}
    return status.get("observedGeneration") == dep["metadata"].get("generation", 1) and any(
        c.get("type") == "Progressing" and c.get("reason") == "NewReplicaSetAvailable"
        for c in status.get("conditions") or []
    )


class DeploymentController:
    """Reconciles Deployments into ReplicaSets and pods, and writes their status."""

    def __init__(self, store: Store, events: EventRecorder, kubelet: Kubelet) -> None:
        self._store = store
        self._events = events
        self._kubelet = kubelet
        self._progress: dict[str, tuple[tuple[int, ...], float]] = {}
        self._seen: dict[str, tuple[str, int, int]] = {}

    def reconcile(self) -> None:
        owned: dict[str, dict[str, list[Obj]]] = {}  # namespace -> owner uid -> pods
        for dep in self._store.list(DEPLOYMENTS):
            meta = dep["metadata"]
            ns = meta["namespace"]
            seen = (
                meta["resourceVersion"],
                self._store.changed(PODS, ns),
                self._store.changed(REPLICASETS, ns),
            )
            # A complete rollout whose namespace nobody touched has nothing to do (a fleet has
            # 20 of them over 5,000 pods); one in progress is looked at on every pass, for its
            # progress deadline.
            if self._seen.get(meta["uid"]) == seen and _complete(dep):
                continue
            self._seen[meta["uid"]] = seen
            if ns not in owned:
                owned[ns] = self._owned_pods(ns)
            self._reconcile(dep, owned[ns])

    def _owned_pods(self, namespace: str) -> dict[str, list[Obj]]:
        """The namespace's live stored pods (not copied) by controller owner uid, in one pass."""
        owned: dict[str, list[Obj]] = {}
        for pod in self._store.scan(PODS, namespace):
            if podstatus.is_terminating(pod):
                continue
            for ref in pod["metadata"].get("ownerReferences") or ():
                if ref.get("controller"):
                    owned.setdefault(str(ref.get("uid")), []).append(pod)
        return owned

    def _replica_sets(self, dep: Obj) -> list[Obj]:
        ns, uid = dep["metadata"]["namespace"], dep["metadata"]["uid"]
        return [rs for rs in self._store.list(REPLICASETS, ns) if _owned_by(rs, uid)]

    def _new_replica_set(self, dep: Obj, sets: list[Obj], pod_hash: str) -> Obj:
        revisions = [
            int((rs["metadata"].get("annotations") or {}).get(REVISION, "0")) for rs in sets
        ]
        latest = max(revisions, default=0)
        for existing in sets:
            if existing["metadata"]["labels"].get(HASH_LABEL) == pod_hash:
                if int(existing["metadata"]["annotations"].get(REVISION, "0")) != latest:
                    existing["metadata"]["annotations"][REVISION] = str(latest + 1)  # a rollback
                    return self._store.replace(REPLICASETS, existing)
                return existing
        template = copy.deepcopy(dep["spec"]["template"])
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = pod_hash
        selector = copy.deepcopy(dep["spec"]["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = pod_hash
        rs = {
            "metadata": {
                "name": f"{dep['metadata']['name']}-{pod_hash}",
                "labels": dict(template["metadata"]["labels"]),
                "annotations": {REVISION: str(latest + 1)},
                "ownerReferences": [owner_ref(dep)],
            },
            "spec": {"replicas": 0, "selector": selector, "template": template},
            "status": {"replicas": 0},
        }
        created = self._store.create(REPLICASETS, rs, dep["metadata"]["namespace"])
        sets.append(created)
        return created

    def _create_pod(self, rs: Obj) -> None:
        template = rs["spec"]["template"]
        spec = copy.deepcopy(template.get("spec") or {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
        rs_name = rs["metadata"]["name"]
        pod: Obj = {
            "metadata": {
                "name": f"{rs_name}-{random_suffix()}",
                "generateName": f"{rs_name}-",
                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                "ownerReferences": [owner_ref(rs)],
            },
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": podstatus.qos_class(spec)},
        }
        annotations = (template.get("metadata") or {}).get("annotations")
        if annotations:
            pod["metadata"]["annotations"] = dict(annotations)
        created = self._store.create(PODS, pod, rs["metadata"]["namespace"])
        self._events.record(
            rs,
            "SuccessfulCreate",
            f"Created pod: {created['metadata']['name']}",
            component="replicaset-controller",
        )

    def _delete_pod(self, rs: Obj | None, pod: Obj) -> None:
        grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        self._kubelet.begin_delete(copy.deepcopy(pod), grace)
        if rs is not None:
            self._events.record(
                rs,
                "SuccessfulDelete",
                f"Deleted pod: {pod['metadata']['name']}",
                component="replicaset-controller",
            )

    def _reconcile(self, dep: Obj, owned: dict[str, list[Obj]]) -> None:
        spec = dep.get("spec") or {}
        desired = int(spec.get("replicas", 1))
        pod_hash = template_hash(spec.get("template") or {})
        sets = self._replica_sets(dep)
        new_rs = self._new_replica_set(dep, sets, pod_hash)
        by_uid = {rs["metadata"]["uid"]: rs for rs in sets}
        # The stored pods themselves, read-only here (a delete copies the one it deletes).
        pods = {uid: list(owned.get(uid, ())) for uid in by_uid}
        new_uid = new_rs["metadata"]["uid"]
        new_pods = pods[new_uid]
        old_pods = [p for uid, ps in pods.items() if uid != new_uid for p in ps]
        surge, unavailable = rollout_budget(dep, desired)

        # Scale the new ReplicaSet up within the surge budget, or down when it has too many.
        for pod in sorted(new_pods, key=podstatus.is_ready)[: max(len(new_pods) - desired, 0)]:
            self._delete_pod(new_rs, pod)
            new_pods.remove(pod)
        while len(new_pods) < desired and len(new_pods) + len(old_pods) < desired + surge:
            self._create_pod(new_rs)
            new_pods.append({})  # placeholder: counted, not ready
        # Scale old ReplicaSets down while enough pods stay available.
        ready = sum(podstatus.is_ready(p) for p in new_pods + old_pods)
        min_available = desired - unavailable
        for pod in sorted(old_pods, key=podstatus.is_ready):
            if podstatus.is_ready(pod):
                if ready - 1 < min_available:
                    continue
                ready -= 1
            owner = next((by_uid[u] for u in by_uid if _owned_by(pod, u)), None)
            self._delete_pod(owner, pod)
            old_pods.remove(pod)
        self._write_replica_sets(sets, pods, new_uid, len(new_pods))
        self._write_status(
            dep,
            new_rs,
            new_pods=new_pods,
            old_pods=old_pods,
            desired=desired,
            unavailable=unavailable,
        )

    def _write_replica_sets(
        self, sets: list[Obj], pods: dict[str, list[Obj]], new_uid: str, new_count: int
    ) -> None:
        for rs in sets:
            uid = rs["metadata"]["uid"]
            live = [p for p in pods[uid] if p and not podstatus.is_terminating(p)]
            replicas = new_count if uid == new_uid else 0
            ready = sum(podstatus.is_ready(p) for p in live)
            status = {
                "replicas": len(live),
                "fullyLabeledReplicas": len(live),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": rs["metadata"].get("generation", 1),
            }
            status = {k: v for k, v in status.items() if v or k == "replicas"}
            if rs["spec"].get("replicas") != replicas:
                rs["spec"]["replicas"] = replicas
                rs["metadata"]["generation"] = int(rs["metadata"].get("generation", 1)) + 1
                status["observedGeneration"] = rs["metadata"]["generation"]
                rs["status"] = status
                self._store.replace(REPLICASETS, rs)
            elif rs.get("status") != status:
                rs["status"] = status
                self._store.replace(REPLICASETS, rs)

    def _write_status(
        self,
        dep: Obj,
        new_rs: Obj,
        *,
        new_pods: list[Obj],
        old_pods: list[Obj],
        desired: int,
        unavailable: int,
    ) -> None:
        total = len(new_pods) + len(old_pods)
        available = sum(podstatus.is_ready(p) for p in new_pods + old_pods)
        updated = len(new_pods)
        old_status = dep.get("status") or {}
        conditions = copy.deepcopy(old_status.get("conditions") or [])
        rs_name = new_rs["metadata"]["name"]
        _set_condition(
            conditions,
            "Available",
            available >= desired - unavailable,
            "MinimumReplicasAvailable"
            if available >= desired - unavailable
            else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if available >= desired - unavailable
            else "Deployment does not have minimum availability.",
        )
        complete = updated == desired and total == desired and available == desired
        snapshot = (updated, available, total, desired)
        uid = dep["metadata"]["uid"]
        last = self._progress.get(uid)
        if last is None or last[0] != snapshot:
            self._progress[uid] = (snapshot, time.monotonic())
        since = time.monotonic() - self._progress[uid][1]
        deadline = float((dep.get("spec") or {}).get("progressDeadlineSeconds", 600))
        if complete:
            _set_condition(
                conditions,
                "Progressing",
                True,
                "NewReplicaSetAvailable",
                f'ReplicaSet "{rs_name}" has successfully progressed.',
            )
        elif since > deadline:
            _set_condition(
                conditions,
                "Progressing",
                False,
                "ProgressDeadlineExceeded",
                f'ReplicaSet "{rs_name}" has timed out progressing.',
            )
        else:
            _set_condition(
                conditions,
                "Progressing",
                True,
                "ReplicaSetUpdated",
                f'ReplicaSet "{rs_name}" is progressing.',
            )
        conditions.sort(key=lambda c: 0 if c["type"] == "Available" else 1)
        status: dict[str, Any] = {
            "observedGeneration": dep["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": available,
            "availableReplicas": available,
            "unavailableReplicas": max(desired - available, 0),
        }
        # The apiserver omits zero counts (omitempty).
        status = {k: v for k, v in status.items() if v}
        status["conditions"] = conditions
        revision = new_rs["metadata"]["annotations"][REVISION]
        annotations = dep["metadata"].setdefault("annotations", {})
        if old_status != status or annotations.get(REVISION) != revision:
            annotations[REVISION] = revision
            dep["status"] = status
            self._store.replace(DEPLOYMENTS, dep)
