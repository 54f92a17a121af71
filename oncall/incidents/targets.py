"""What a failing checklist step implicates: the target its probe read, named in words.

A step's probe names its target in its parameters or facts (`kube.deployment` its Deployment,
`gpu.devices` its node, `redis.stats`, `redis.slowlog` and `redis.latency` the service Redis;
a `redis.key` reads a value the service keeps there and implicates nothing); this module turns
a step result (the JSON of `oncall.model.checklist_events.StepResult`, as verdicts store it)
into that name, so that the grouping compares targets, not probes. A `prometheus.*` query
implicates nothing: a metric is not a target. A `vllm.*` step reads the vLLM servers of the
checklist's Deployment (the one its `kube.deployment` or `gpu.vllm_memory` step read), or the
namespace's vLLM servers when the checklist reads none. See `docs/architecture.md` §3, the read
path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Step statuses that implicate a target: the check found it unhealthy. `unknown` and `error`
#: could not tell and implicate nothing (grouping on "could not read Prometheus" would join
#: every alert of a context into one incident).
FAILING = frozenset({"fail"})


@dataclass(frozen=True)
class Scope:
    """What names a target when a step leaves it implicit: the context's default namespace
    (`kubernetes.namespace`) and its Redis (`redis.url`'s host:port)."""

    namespace: str = "default"
    redis: str = "redis"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _deployment(step: Mapping[str, Any], scope: Scope) -> str | None:
    params = step.get("params") or {}
    facts = step.get("facts") or {}
    probe = step.get("probe")
    if probe == "kube.deployment":
        name = _text(facts.get("name")) or _text(params.get("name"))
    elif probe == "gpu.vllm_memory":
        name = _text(facts.get("deployment")) or _text(params.get("deployment"))
    else:
        return None
    if not name:
        return None
    return f"Deployment {_text(params.get('namespace')) or scope.namespace}/{name}"


def vllm_deployment(steps: Iterable[Mapping[str, Any]], scope: Scope) -> str | None:
    """The Deployment the checklist read (any status): the vLLM servers its `vllm.*` steps
    measured. The first in run order when it reads several."""
    for step in steps:
        if (found := _deployment(step, scope)) is not None:
            return found
    return None


def step_target(step: Mapping[str, Any], scope: Scope, vllm: str | None = None) -> str | None:
    """The target `step` read, in words ("Deployment ai/vllm", "node gpu-1"); None when its
    probe reads no target of its own."""
    probe = _text(step.get("probe"))
    params = step.get("params") or {}
    facts = step.get("facts") or {}
    family = probe.split(".", 1)[0]
    namespace = _text(params.get("namespace")) or scope.namespace
    if (deployment := _deployment(step, scope)) is not None:
        return deployment
    if family == "vllm":
        return vllm or f"vLLM servers in {scope.namespace}"
    if probe == "redis.key":
        # A key's value is the service's own state (the degradation switch a runbook reads
        # before proposing to flip it), not Redis' health: two alerts that both find the
        # switch off are not linked by it (they were, in the drill: the gateway's outage and
        # a slow vector search, minutes apart, as one incident).
        return None
    if family == "redis":
        return f"Redis {scope.redis}"
    if probe == "kube.pods":
        if name := _text(params.get("name")):
            return f"pod {namespace}/{name}"
        if node := _text(params.get("node")):
            return f"node {node}"
        selector = _text(params.get("selector"))
        return f"pods {namespace}/{selector}" if selector else f"pods in {namespace}"
    if probe == "kube.nodes":
        down = facts.get("not_ready")
        if isinstance(down, list) and len(down) == 1 and isinstance(down[0], str):
            return f"node {down[0]}"
        return "nodes"
    if probe == "kube.events":
        kind, name = _text(params.get("kind")), _text(params.get("name"))
        return f"{kind} {namespace}/{name}" if kind and name else None
    if family == "gpu":
        node = _text(params.get("node"))
        return f"GPUs of node {node}" if node else "GPUs"
    return None


def failing_targets(steps: Sequence[Mapping[str, Any]], scope: Scope) -> dict[str, tuple[str, ...]]:
    """target → the ids of the steps failing on it, for one checklist run."""
    vllm = vllm_deployment(steps, scope)
    found: dict[str, list[str]] = {}
    for step in steps:
        if step.get("status") not in FAILING:
            continue
        target = step_target(step, scope, vllm)
        if target is not None:
            found.setdefault(target, []).append(_text(step.get("id")))
    return {target: tuple(ids) for target, ids in found.items()}


def vllm_alias(deployments: Iterable[str]) -> dict[str, str]:
    """ "vLLM servers in NS" → "Deployment NS/NAME" when the checklists of this grouping read
    exactly one vLLM Deployment in NS: a checklist without a Deployment step measured the
    same servers. Several Deployments in NS: no alias (which one is not known)."""
    by_namespace: dict[str, set[str]] = {}
    for deployment in deployments:
        namespace = deployment.removeprefix("Deployment ").split("/", 1)[0]
        by_namespace.setdefault(namespace, set()).add(deployment)
    return {f"vLLM servers in {ns}": next(iter(found))
            for ns, found in by_namespace.items() if len(found) == 1}  # fmt: skip


def aliased(
    failing: Mapping[str, tuple[str, ...]], aliases: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """`failing` with its targets renamed by `aliases`, the steps of merged targets joined."""
    out: dict[str, tuple[str, ...]] = {}
    for target, steps in failing.items():
        name = aliases.get(target, target)
        out[name] = tuple(dict.fromkeys((*out.get(name, ()), *steps)))
    return out
