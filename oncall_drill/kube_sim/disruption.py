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

The status (`currentHealthy`, `desiredHealthy`, `disruptionsAllowed`, `expectedPods`,
`disruptedPods`) is computed from the store on every read and every eviction, as the
controller's `countHealthyPods` and `buildDisruptedPodMap` do: a pod counts as healthy when it
is Ready, not terminating, and not in `disruptedPods`. The eviction handler records each pod
it lets go there (`checkAndDecrement`) before deleting it, so a second eviction arriving before
anyone sees the first pod terminate — two operators' concurrent rebuilds — finds the
budget spent; an entry lasts until the pod is terminating or gone, or `DeletionTimeout` (2 min)
has passed. A dry run records nothing. An unready pod evicted while the budget is met does not
use the budget (the handler's `updateDeletionOptions` path). One difference, on purpose: the
drill checks the eviction's UID precondition before it records the pod, where the apiserver
checks it at the delete, after — there a stale-UID eviction (a StatefulSet pod recreated under
its name) keeps the budget spent for up to DeletionTimeout, which would leave the drill's
shared Deployment unrebuildable for two minutes after a test of that refusal.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from oncall_drill.kube_sim import errors, podstatus
from oncall_drill.kube_sim.errors import ApiError
from oncall_drill.kube_sim.resources import DEPLOYMENTS, PDBS, PODS
from oncall_drill.kube_sim.selectors import labels_match, parse_label_selector
from oncall_drill.kube_sim.store import Obj, now_rfc3339

if TYPE_CHECKING:
    from oncall_drill.kube_sim.sim import KubeSim

EVICTION_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
#: pkg/controller/disruption/disruption.go `DeletionTimeout`: how long an approved eviction
#: keeps its pod out of `currentHealthy` while the pod has not been seen terminating.
DELETION_TIMEOUT = timedelta(minutes=2)
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
    disrupted = _disrupted_pods(pdb, pods)
    healthy = sum(
        1
        for p in pods
        if podstatus.is_ready(p)
        and not podstatus.is_terminating(p)
        and p["metadata"]["name"] not in disrupted
    )
    expected = _expected(sim, namespace, pods)
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _count(spec["maxUnavailable"], expected))
    else:
        desired = _count(spec.get("minAvailable", 1), expected)
    status: dict[str, Any] = {
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
    if disrupted:  # omitempty upstream
        status["disruptedPods"] = disrupted
    return status


def _disrupted_pods(pdb: Obj, pods: list[Obj]) -> dict[str, str]:
    """The entries of the stored `disruptedPods` the controller would keep: pods still there,
    not terminating, evicted less than DELETION_TIMEOUT ago."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    now = datetime.now(UTC)
    kept: dict[str, str] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        when = recorded.get(name)
        if when is None or podstatus.is_terminating(pod):
            continue
        if datetime.fromisoformat(when.replace("Z", "+00:00")) + DELETION_TIMEOUT > now:
            kept[name] = when
    return kept


def _record_disrupted(sim: KubeSim, pdb: Obj, pod_name: str) -> None:
    """`checkAndDecrement`'s UpdateStatus: the pod is about to go; count it out already."""
    stored = sim.store.get(PDBS, pdb["metadata"].get("namespace"), pdb["metadata"]["name"])
    if stored is None:
        return
    recorded = dict((stored.get("status") or {}).get("disruptedPods") or {})
    recorded[pod_name] = now_rfc3339()
    sim.store.replace(PDBS, {**stored, "status": {"disruptedPods": recorded}})


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
    from oncall_drill.kube_sim import verbs

    if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
        raise errors.bad_request("the body of an eviction must be an Eviction")
    if (body.get("metadata") or {}).get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    pod = verbs.get(sim, PODS, namespace, name)
    options = dict(body.get("deleteOptions") or {})
    wanted_uid = (options.get("preconditions") or {}).get("uid")
    if wanted_uid and wanted_uid != pod["metadata"]["uid"]:  # see the module docstring
        raise errors.conflict_uid_precondition(PODS, name, wanted_uid, pod["metadata"]["uid"])
    dry_run = dry_run or "All" in (options.pop("dryRun", None) or [])
    phase = (pod.get("status") or {}).get("phase")
    if not (phase in ("Succeeded", "Failed", "Pending") or podstatus.is_terminating(pod)):
        budgets = [b for b in sim.store.list(PDBS, namespace) if _selects(b, pod)]
        if len(budgets) > 1:
            raise ApiError(500, "InternalError", MULTIPLE_PDBS)
        if budgets:
            status = pdb_status(sim, budgets[0])
            # An unready pod may go while the budget is met, without using it up.
            spares_budget = (
                not podstatus.is_ready(pod)
                and status["currentHealthy"] >= status["desiredHealthy"]
                and status["desiredHealthy"] > 0
            )
            if not spares_budget:
                if status["disruptionsAllowed"] == 0:
                    raise _too_many_requests(budgets[0], status)
                if not dry_run:
                    _record_disrupted(sim, budgets[0], name)
    verbs.delete(sim, PODS, namespace, name, body=options, query={}, dry_run=dry_run)
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
