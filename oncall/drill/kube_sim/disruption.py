"""PodDisruptionBudgets and the pods/eviction subresource, with the apiserver's semantics.

Shape and messages from kubernetes/kubernetes `pkg/registry/core/pod/storage/eviction.go` and
`pkg/controller/disruption/disruption.go` (v1.33):

- a pod that is terminal, Pending or already terminating is deleted without consulting a budget;
- more than one budget selecting the pod is a 500 ("This pod has more than one
  PodDisruptionBudget, which the eviction subresource does not support.");
- a budget with `disruptionsAllowed == 0` answers 429 TooManyRequests, "Cannot evict pod as it
  would violate the pod's disruption budget.", with a `DisruptionBudget` cause naming how many
  healthy pods it needs and has;
- otherwise the pod is deleted with the eviction's `deleteOptions` (so the UID precondition
  answers 409), the dry run changing nothing.

The status (`currentHealthy`, `desiredHealthy`, `disruptionsAllowed`, `expectedPods`) is
computed from the store on every read and every eviction: a pod counts as healthy when it is
Ready and not terminating, so an eviction in flight already uses up the budget it took (the
real controller's `disruptedPods` map, without its two-minute window).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from oncall.drill.kube_sim import errors, podstatus
from oncall.drill.kube_sim.errors import ApiError
from oncall.drill.kube_sim.resources import DEPLOYMENTS, PDBS, PODS
from oncall.drill.kube_sim.selectors import labels_match, parse_label_selector
from oncall.drill.kube_sim.store import Obj

if TYPE_CHECKING:
    from oncall.drill.kube_sim.sim import KubeSim

EVICTION_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)


def _selector_text(selector: dict[str, Any] | None) -> str | None:
    """matchLabels as label-selector text; None when the selector selects nothing we model."""
    if not selector:
        return None  # an empty selector on a policy/v1 PDB selects every pod; we do not seed one
    labels = selector.get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None


def _selects(pdb: Obj, pod: Obj) -> bool:
    text = _selector_text((pdb.get("spec") or {}).get("selector"))
    if text is None:
        return False
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels_match(parse_label_selector(text), labels)


def _expected(sim: KubeSim, namespace: str, pods: list[Obj]) -> int:
    """The scale of the pods' controllers (the Deployments selecting them), else the pod count."""
    total = 0
    for dep in sim.store.list(DEPLOYMENTS, namespace):
        selector = _selector_text((dep.get("spec") or {}).get("selector"))
        if selector and any(
            labels_match(parse_label_selector(selector), p["metadata"].get("labels") or {})
            for p in pods
        ):
            total += int((dep.get("spec") or {}).get("replicas", 1))
    return total or len(pods)


def _count(value: Any, expected: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(expected * int(value[:-1]) / 100)
    return int(value)


def pdb_status(sim: KubeSim, pdb: Obj) -> dict[str, Any]:
    """The disruption controller's view of `pdb`, from the store as it is now."""
    namespace = pdb["metadata"].get("namespace") or "default"
    pods = [p for p in sim.store.list(PODS, namespace) if _selects(pdb, p)]
    healthy = sum(1 for p in pods if podstatus.is_ready(p) and not podstatus.is_terminating(p))
    expected = _expected(sim, namespace, pods)
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _count(spec["maxUnavailable"], expected))
    else:
        desired = _count(spec.get("minAvailable", 1), expected)
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": max(0, healthy - desired),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if healthy > desired else "False",
                "reason": "SufficientPods" if healthy > desired else "InsufficientPods",
                "message": "",
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "lastTransitionTime": pdb["metadata"].get("creationTimestamp"),
            }
        ],
    }


def with_status(sim: KubeSim, pdb: Obj) -> Obj:
    """A copy of `pdb` carrying its current status (what get and list answer)."""
    return {**pdb, "status": pdb_status(sim, pdb)}


def _too_many_requests(pdb: Obj, status: dict[str, Any]) -> ApiError:
    cause = {
        "reason": "DisruptionBudget",
        "message": (
            f"The disruption budget {pdb['metadata']['name']} needs "
            f"{status['desiredHealthy']} healthy pods and has {status['currentHealthy']} currently"
        ),
    }
    return ApiError(429, "TooManyRequests", EVICTION_VIOLATION, {"causes": [cause]})


def evict(sim: KubeSim, namespace: str, name: str, body: Any, *, dry_run: bool) -> Obj:
    """POST pods/NAME/eviction: delete the pod if its budget allows; the apiserver's answers."""
    from oncall.drill.kube_sim import verbs

    if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
        raise errors.bad_request("the body of an eviction must be an Eviction")
    if (body.get("metadata") or {}).get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    pod = verbs.get(sim, PODS, namespace, name)
    options = dict(body.get("deleteOptions") or {})
    dry_run = dry_run or "All" in (options.pop("dryRun", None) or [])
    phase = (pod.get("status") or {}).get("phase")
    if not (phase in ("Succeeded", "Failed", "Pending") or podstatus.is_terminating(pod)):
        budgets = [b for b in sim.store.list(PDBS, namespace) if _selects(b, pod)]
        if len(budgets) > 1:
            raise ApiError(500, "InternalError", MULTIPLE_PDBS)
        if budgets:
            status = pdb_status(sim, budgets[0])
            ready = podstatus.is_ready(pod)
            # An unhealthy pod may go while the budget is met (IfHealthyBudget, the default).
            if status["disruptionsAllowed"] == 0 and (
                ready or status["currentHealthy"] < status["desiredHealthy"]
            ):
                raise _too_many_requests(budgets[0], status)
    verbs.delete(sim, PODS, namespace, name, body=options, query={}, dry_run=dry_run)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
