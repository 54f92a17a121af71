"""The simulated scheduler's filters: which node may take a pod, and why not, worded as
kube-scheduler's filter plugins word it (the FitError message is built in fit_error.py).

Filters, in the scheduler's order: NodeUnschedulable (a cordoned node), TaintToleration (a
`NoSchedule`/`NoExecute` taint the pod does not tolerate; a NotReady node carries
`node.kubernetes.io/not-ready`, as the node lifecycle controller taints it), NodeAffinity (the
pod's `nodeSelector`) and NodeResourcesFit: for every resource the pod requests (`cpu`,
`memory`, `nvidia.com/gpu`, …), the node's `status.allocatable` minus the requests of the pods
bound to it that have not terminated (`Succeeded`/`Failed`), so a terminating pod still holds
its GPU until it is gone. A resource given only as a limit is requested at the limit (the
apiserver's defaulting). The first failing filter is the node's reason.

Quantities are read as the apiserver writes them (`500m`, `64Gi`, `1e3`); an unreadable one
counts as 0, as a seed file's typo should not stop the drill.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from oncall_drill.kube_sim.fit_error import CORDONED, untolerated_taint

GPU = "nvidia.com/gpu"
NODE_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DONE = ("Succeeded", "Failed")


def quantity(value: Any) -> Decimal:
    """A resource quantity's value; 0 for anything the apiserver would not have stored."""
    found = _QUANTITY.fullmatch(str(value).strip()) if isinstance(value, int | str) else None
    if found is None or isinstance(value, bool):
        return Decimal(0)
    number, suffix = Decimal(found[1]), found[2] or ""
    if suffix in _BINARY:
        return number * Decimal(1024) ** _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:])) if suffix else number


def insufficient(resource: str) -> str:
    """NodeResourcesFit's reason: `Insufficient nvidia.com/gpu`."""
    return f"Insufficient {resource}"


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Per resource: the containers' sum, or an init container's, whichever is larger."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        for name, amount in _container(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for init in spec.get("initContainers") or []:
        for name, amount in _container(init).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return {k: v for k, v in total.items() if v > 0}


def _container(container: Any) -> dict[str, Decimal]:
    resources = (container.get("resources") or {}) if isinstance(container, dict) else {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {str(k): quantity(v) for k, v in merged.items()}


#: Above this many remembered pods, the cache of requests starts again (a fleet holds 5,000).
CACHE_MAX = 50_000


def requested_by_node(
    pods: Iterable[Mapping[str, Any]], cache: dict[str, dict[str, Decimal]] | None = None
) -> dict[str, dict[str, Decimal]]:
    """What the pods bound to each node request, terminated pods left out. `cache` keeps each
    pod's requests by UID (a pod's resources do not change): a fleet's scheduling pass does
    not parse 5,000 pods' quantities for every Pending pod."""
    used: dict[str, dict[str, Decimal]] = {}
    if cache is not None and len(cache) > CACHE_MAX:
        cache.clear()
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in _DONE:
            continue
        into = used.setdefault(str(node), {})
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        asked = cache.get(uid) if cache is not None and uid else None
        if asked is None:
            asked = pod_requests(pod)
            if cache is not None and uid:
                cache[uid] = asked
        for name, amount in asked.items():
            into[name] = into.get(name, Decimal(0)) + amount
    return used


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key, operator = toleration.get("key") or "", toleration.get("operator") or "Equal"
    if key != (taint.get("key") or ""):
        return not key and operator == "Exists"
    return operator == "Exists" or (toleration.get("value") or "") == (taint.get("value") or "")


def unfit_reason(
    node: Mapping[str, Any], pod: Mapping[str, Any], used: Mapping[str, Decimal]
) -> str | None:
    """Why `node` cannot take `pod` (the first failing filter), or None when it can."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    pod_spec = pod.get("spec") or {}
    if spec.get("unschedulable"):
        return CORDONED
    taints = list(spec.get("taints") or [])
    conditions = status.get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        taints.append(NOT_READY)
    tolerations = pod_spec.get("tolerations") or []
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
            _tolerates(t, taint) for t in tolerations
        ):
            return untolerated_taint(taint)
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return NODE_SELECTOR
    allocatable = status.get("allocatable") or {}
    for name, amount in sorted(pod_requests(pod).items()):
        if quantity(allocatable.get(name, 0)) - used.get(name, Decimal(0)) < amount:
            return insufficient(name)
    return None
