"""Can the cluster take N more pods of a template? The scheduler's resource filters, pure.

Before `scale-deployment` proposes or makes a scale-up (docs/architecture.md, "Remediations"),
it asks this: for each new pod, some node that

- is schedulable (not cordoned) and Ready,
- carries every label of the template's `nodeSelector`,
- has no `NoSchedule` / `NoExecute` taint the template does not tolerate,
- has, for each resource the template requests (`nvidia.com/gpu`, `cpu`, `memory`, …), its
  allocatable minus the requests of the pods bound to it that are not terminated
  (`Succeeded`/`Failed`; a pod being deleted still holds its resources, as for kube-scheduler).

Pods are placed one after the other (what one takes, the next cannot), so three new pods on a
node with two free GPUs do not fit. When one does not, the answer says why as the on-call reads
it: "no node has 1 free nvidia.com/gpu: 0 of 8 free on 2 nodes". Malformed quantities, on a node
or in the template, are named in the answer, never a traceback; negative ones are malformed.

Not modelled: affinity and anti-affinity, topology spread, pod priority and preemption, host
ports, volumes. The answer is the scheduler's resource view, not a promise of its decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from oncall.model.quantity import QuantityError, format_quantity, parse_quantity

GPU = "nvidia.com/gpu"
#: The order resources are named in a refusal: the scarce one first.
_ORDER = (GPU, "cpu", "memory")
#: Effects that keep a pod off a node (PreferNoSchedule only scores it lower).
_BLOCKING = ("NoSchedule", "NoExecute")
_DONE = ("Succeeded", "Failed")

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Fit:
    """The answer: `fits`, the nodes the new pods would land on, and why not (`reason`)."""

    fits: bool
    reason: str
    placed: tuple[str, ...] = ()
    requests: dict[str, Decimal] = field(default_factory=dict)
    #: node → resource → free amount, before the new pods (for the preview and audit).
    free: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node → why the pod cannot go there whatever the resources.
    excluded: dict[str, str] = field(default_factory=dict)


def pod_requests(pod_spec: Obj) -> dict[str, Decimal]:
    """What a pod asks the scheduler for: per resource, the sum over its containers (a
    resource given only as a limit is requested at the limit, as the apiserver defaults it),
    or an init container's, whichever is larger. QuantityError on a malformed or negative one."""
    total: dict[str, Decimal] = {}
    for container in _list(pod_spec.get("containers")):
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + amount
    for init in _list(pod_spec.get("initContainers")):
        for name, amount in _container_requests(init).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return {k: v for k, v in total.items() if v > 0}


def _container_requests(container: Any) -> dict[str, Decimal]:
    if not isinstance(container, Mapping):
        return {}
    resources = _map(container.get("resources"))
    merged = {**_map(resources.get("limits")), **_map(resources.get("requests"))}
    out: dict[str, Decimal] = {}
    for name, raw in merged.items():
        amount = _quantity(raw, f"container {container.get('name')!s} {name}")
        out[str(name)] = amount
    return out


def _quantity(raw: Any, where: str) -> Decimal:
    try:
        amount = parse_quantity(raw)
    except QuantityError as exc:
        raise QuantityError(f"{where}: {exc}") from exc
    if amount < 0:
        raise QuantityError(f"{where}: negative quantity {raw!r}")
    return amount


def node_fit(template_spec: Obj, nodes: Iterable[Obj], pods: Iterable[Obj], count: int = 1) -> Fit:
    """Whether `count` new pods of `template_spec` (a pod template's `spec`) find nodes."""
    try:
        wanted = pod_requests(template_spec)
    except QuantityError as exc:
        return Fit(False, f"the pod template's requests are malformed: {exc}")
    used, unreadable = _used_by_node(pods)
    excluded: dict[str, str] = {}
    free: dict[str, dict[str, Decimal]] = {}
    allocatable: dict[str, dict[str, Decimal]] = {}
    for node in nodes:
        name = str(_map(node.get("metadata")).get("name") or "?")
        why = _excluded(node, template_spec) or unreadable.get(name)
        if why is None:
            try:
                allocatable[name] = _allocatable(node, wanted)
            except QuantityError as exc:
                why = f"malformed allocatable: {exc}"
        if why is not None:
            excluded[name] = why
            continue
        taken = used.get(name, {})
        free[name] = {r: allocatable[name][r] - taken.get(r, Decimal(0)) for r in wanted}
    shown = {n: {r: format_quantity(r, v) for r, v in f.items()} for n, f in free.items()}
    fit = Fit(False, "", requests=wanted, free=shown, excluded=excluded)
    if not free:
        return _with(fit, _no_node(excluded))
    remaining = {n: dict(f) for n, f in free.items()}
    placed: list[str] = []
    for _ in range(max(count, 0)):
        node_name = next(
            (n for n, f in remaining.items() if all(f[r] >= a for r, a in wanted.items())), None
        )
        if node_name is None:
            reason = _short(wanted, remaining, allocatable, excluded)
            if placed:
                reason = f"only {len(placed)} of {count} new pods fit: {reason}"
            return _with(fit, reason, placed)
        placed.append(node_name)
        for r, a in wanted.items():
            remaining[node_name][r] -= a
    where = ", ".join(sorted(set(placed))) or "-"
    return _with(fit, f"{count} new pod(s) fit on {where}", placed, fits=True)


def _with(fit: Fit, reason: str, placed: list[str] | None = None, *, fits: bool = False) -> Fit:
    return Fit(fits, reason, tuple(placed or ()), fit.requests, fit.free, fit.excluded)


def _short(
    wanted: dict[str, Decimal],
    remaining: dict[str, dict[str, Decimal]],
    allocatable: dict[str, dict[str, Decimal]],
    excluded: dict[str, str],
) -> str:
    """ "no node has 1 free nvidia.com/gpu: 0 of 8 free on 2 nodes" for the scarce resource."""
    order = sorted(wanted, key=lambda r: (_ORDER.index(r) if r in _ORDER else len(_ORDER), r))
    others = f"; {_no_node(excluded)}" if excluded else ""
    for resource in order:
        amount = wanted[resource]
        if all(f[resource] < amount for f in remaining.values()):
            left = sum((max(f[resource], Decimal(0)) for f in remaining.values()), Decimal(0))
            total = sum((a[resource] for a in allocatable.values()), Decimal(0))
            return (
                f"no node has {format_quantity(resource, amount)} free {resource}: "
                f"{format_quantity(resource, left)} of {format_quantity(resource, total)} free "
                f"on {_nodes(len(remaining))}{others}"
            )
    asked = ", ".join(f"{format_quantity(r, wanted[r])} {r}" for r in order)
    return f"no node has {asked} free together on {_nodes(len(remaining))}{others}"


def _no_node(excluded: dict[str, str]) -> str:
    if not excluded:
        return "no nodes in the cluster"
    counts: dict[str, int] = {}
    for why in excluded.values():
        counts[why] = counts.get(why, 0) + 1
    listed = ", ".join(f"{n} {why}" for why, n in sorted(counts.items()))
    return f"no node takes the pod: {listed}"


def _nodes(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def _excluded(node: Obj, template_spec: Obj) -> str | None:
    """Why the pod cannot go on `node` whatever the resources, or None."""
    spec, status = _map(node.get("spec")), _map(node.get("status"))
    labels = _map(_map(node.get("metadata")).get("labels"))
    if spec.get("unschedulable"):
        return "node(s) cordoned (unschedulable)"
    conditions = _list(status.get("conditions"))
    if not any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    ):
        return "node(s) not Ready"
    selector = _map(template_spec.get("nodeSelector"))
    missing = [f"{k}={v}" for k, v in selector.items() if labels.get(k) != v]
    if missing:
        return f"node(s) without label {', '.join(sorted(missing))} (nodeSelector)"
    tolerations = [t for t in _list(template_spec.get("tolerations")) if isinstance(t, Mapping)]
    for taint in _list(spec.get("taints")):
        if not isinstance(taint, Mapping) or taint.get("effect") not in _BLOCKING:
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            key, value = taint.get("key", ""), taint.get("value", "")
            return f"node(s) had untolerated taint {{{key}: {value}}}"
    return None


def _tolerates(toleration: Obj, taint: Obj) -> bool:
    """The apiserver's ToleratesTaint: effect (empty: all), key (empty with Exists: all),
    operator Exists (any value) or Equal (default; the same value)."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key != (taint.get("key") or ""):
        return not key and operator == "Exists"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def _allocatable(node: Obj, wanted: Mapping[str, Decimal]) -> dict[str, Decimal]:
    raw = _map(_map(node.get("status")).get("allocatable"))
    return {r: _quantity(raw.get(r, 0), r) for r in wanted}


def _used_by_node(
    pods: Iterable[Obj],
) -> tuple[dict[str, dict[str, Decimal]], dict[str, str]]:
    """What the pods bound to each node request (terminated pods hold nothing), and the nodes
    holding a pod whose requests cannot be read: those are left out, never counted as free
    (the apiserver admits no such pod, so it is a broken or forged answer)."""
    used: dict[str, dict[str, Decimal]] = {}
    unreadable: dict[str, str] = {}
    for pod in pods:
        spec = _map(pod.get("spec"))
        node = spec.get("nodeName")
        if not node or _map(pod.get("status")).get("phase") in _DONE:
            continue
        try:
            asked = pod_requests(spec)
        except QuantityError:
            unreadable[str(node)] = "node(s) with a pod whose requests are malformed"
            continue
        into = used.setdefault(str(node), {})
        for r, a in asked.items():
            into[r] = into.get(r, Decimal(0)) + a
    return used, unreadable


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
