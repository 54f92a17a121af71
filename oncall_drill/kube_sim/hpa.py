"""The simulated HorizontalPodAutoscaler (autoscaling/v2): validation and its controller.

The drill has no metrics API, so the controller does what kube-controller-manager's HPA
controller does when it has no metric to act on: it keeps the target Deployment's
`spec.replicas` within `[minReplicas, maxReplicas]` ("Current number of replicas below
Spec.MinReplicas" / "above Spec.MaxReplicas", pkg/controller/podautoscaler/horizontal.go),
records a `SuccessfulRescale` event on the HPA ("New size: 3; reason: …"), and writes
`status.currentReplicas` / `desiredReplicas`. A Deployment scaled to 0 turns the HPA off, as
upstream. So a direct `kubectl scale` outside the bounds is undone within a resync, and
raising `minReplicas` scales the Deployment up: the two behaviours the scale-deployment
remediation must not fight.

Validation is the apiserver's (pkg/apis/autoscaling/validation): minReplicas ≥ 1,
maxReplicas ≥ minReplicas, a scaleTargetRef with kind and name.
"""

from __future__ import annotations

from typing import Any

from oncall_drill.kube_sim.errors import invalid
from oncall_drill.kube_sim.events import EventRecorder
from oncall_drill.kube_sim.resources import DEPLOYMENTS, HPAS, ResourceType
from oncall_drill.kube_sim.store import Obj, Store, now_rfc3339

BELOW_MIN = "Current number of replicas below Spec.MinReplicas"
ABOVE_MAX = "Current number of replicas above Spec.MaxReplicas"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def validate_hpa(rt: ResourceType, name: str, obj: Obj) -> None:
    """The apiserver's 422 for an HPA it would not store."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    problems: list[tuple[str, str]] = []
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if _int(low) is None or low < 1:
        problems.append(
            ("spec.minReplicas", f"Invalid value: {low!r}: must be greater than or equal to 1")
        )
    if _int(high) is None:
        problems.append(("spec.maxReplicas", "Required value"))
    elif _int(low) is not None and high < low:
        problems.append(
            (
                "spec.maxReplicas",
                f"Invalid value: {high}: must be greater than or equal to `minReplicas`",
            )
        )
    ref = spec.get("scaleTargetRef")
    if not isinstance(ref, dict) or not ref.get("kind") or not ref.get("name"):
        problems.append(("spec.scaleTargetRef", "Required value"))
    if problems:
        raise invalid(rt, name, problems)


class HpaController:
    """Keeps each HPA's target Deployment within its bounds (see the module docstring)."""

    def __init__(self, store: Store, events: EventRecorder) -> None:
        self._store = store
        self._events = events
        self._seen = (-1, -1)

    def reconcile(self) -> None:
        seen = (self._store.changed(HPAS), self._store.changed(DEPLOYMENTS))
        if seen == self._seen:
            return
        self._seen = seen
        for hpa in self._store.list(HPAS):
            self._reconcile(hpa)

    def _reconcile(self, hpa: Obj) -> None:
        meta, spec = hpa["metadata"], hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        if ref.get("kind") != "Deployment":
            return
        dep = self._store.get(DEPLOYMENTS, meta.get("namespace"), str(ref.get("name")))
        if dep is None:
            return
        current = _int((dep.get("spec") or {}).get("replicas", 1))
        low, high = _int(spec.get("minReplicas", 1)), _int(spec.get("maxReplicas"))
        if current is None or current == 0 or low is None or high is None:
            return  # scaled to zero: autoscaling is off, as upstream
        desired, reason = current, ""
        if current < low:
            desired, reason = low, BELOW_MIN
        elif current > high:
            desired, reason = high, ABOVE_MAX
        status = hpa.get("status") or {}
        if desired != current:
            dep["spec"]["replicas"] = desired
            dep["metadata"]["generation"] = int(dep["metadata"].get("generation", 1)) + 1
            self._store.replace(DEPLOYMENTS, dep)
            status = {**status, "lastScaleTime": now_rfc3339()}
            self._events.record(
                hpa,
                "SuccessfulRescale",
                f"New size: {desired}; reason: {reason}",
                component="horizontal-pod-autoscaler",
            )
        new_status = {**status, "currentReplicas": current, "desiredReplicas": desired}
        if new_status != hpa.get("status"):
            hpa["status"] = new_status
            self._store.replace(HPAS, hpa)
