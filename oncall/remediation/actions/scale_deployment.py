"""scale-deployment: set a Deployment's replicas, up (when a node takes each new pod) or down
by one; verified when the new pods are Ready (down: when the replica count is met).

Plan: the Deployment's replicas and the JSON patch `test /spec/replicas CURRENT`, `replace
/spec/replicas NEW` (the `test` is the precondition: another writer's scale since the preview
makes the server refuse the whole patch). Down is one replica at a time: the person sees each
replica leave. Before a scale-up is proposed, and again just before it is made, the node-fit
check (oncall/model/node_fit.py) places each new pod on a node: allocatable minus what the
pods there request, taints and tolerations, nodeSelector; none → refused in the preview with
the reason ("no node has 1 free nvidia.com/gpu: 0 of 8 free on 2 nodes"), instead of a pod
Pending with `FailedScheduling` while the incident goes on.

A HorizontalPodAutoscaler (autoscaling/v2) whose scaleTargetRef is the Deployment owns its
replica count: a direct scale is undone at its next sync. The preview names it, and
`guards.scale_with_hpa` says what happens: `refuse` (the default), or `raise-min`, where a
scale-up raises the HPA's `minReplicas` to the new count (JSON patch with a `test` of the old
minimum) and the HPA scales the Deployment. A scale-down under an HPA is always refused: its
bounds are changed where the HPA is defined.

Command-line equivalents: `kubectl get hpa -n NS`, `kubectl describe nodes` (Allocated
resources), `kubectl patch deployment NAME --type=json -p OPS --dry-run=server` (or `kubectl
patch hpa NAME …`), the patch, then `kubectl get pods -l SEL -w` until the new pods are Ready.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from oncall.backends.kube import Obj, pod_ready
from oncall.backends.kube_write import KubeWriter
from oncall.errors import BackendError
from oncall.model.action_params import ScaleDeploymentParams
from oncall.model.node_fit import node_fit
from oncall.model.write_path import GuardVerdict, Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.capacity import PodsTaken
from oncall.remediation.clients import Clients

#: A vLLM pod takes minutes to be Ready (weights, profiling, CUDA graphs: production-facts.md).
VERIFY_TIMEOUT_S = 600.0
POLL_INTERVAL_S = 1.0
REPLICAS = "/spec/replicas"
MIN_REPLICAS = "/spec/minReplicas"
FIT, HPA = "node-fit", "hpa"


class ScaleDeployment(Action[ScaleDeploymentParams]):
    name = "scale-deployment"
    params = ScaleDeploymentParams

    def pods_taken(self, plan: Plan) -> PodsTaken | None:
        """A scale down takes one serving pod away for good: the busiest is the worst case
        for the others (the capacity preflight, docs/architecture.md). A scale up takes none."""
        undo = plan.undo or {}
        down = plan.target.kind == "Deployment" and undo.get("replicas", 0) > plan.params.get(
            "replicas", 0
        )
        return PodsTaken(busiest=1) if down else None

    async def plan(self, params: ScaleDeploymentParams, clients: Clients) -> Plan:
        namespace = self.allowed_namespace(params.namespace, clients)
        kube = await clients.kube_writer()
        deployment = await kube.get_deployment(namespace, params.deployment)
        current = _replicas(deployment)
        wanted = params.replicas
        if wanted == current:
            raise PlanError(f"Deployment {namespace}/{params.deployment} has {current} already")
        if wanted < current - 1:
            raise PlanError(
                f"scale-deployment lowers replicas one at a time: {current} → {current - 1}, "
                f"not {wanted}"
            )
        up = wanted > current
        meta = deployment.get("metadata") or {}
        dep_target = Target(
            "Deployment", params.deployment, namespace, meta.get("uid"), meta.get("resourceVersion")
        )
        checks: list[GuardVerdict] = []
        notes: list[str] = []
        if up:
            checks.append(await _fit_verdict(kube, deployment, wanted - current))
        hpa = _hpa_for(await kube.list_hpas(namespace), params.deployment)
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": REPLICAS, "value": current},
            {"op": "replace", "path": REPLICAS, "value": wanted},
        ]
        request = _patch_request("apps/v1", "deployments", namespace, params.deployment, ops)
        target, workload = dep_target, None
        if hpa is not None:
            verdict, hpa_ops = _hpa_verdict(hpa, current, wanted, clients)
            checks.append(verdict)
            notes.append(verdict.detail["describe"])
            if hpa_ops is not None:
                hpa_meta = hpa.get("metadata") or {}
                ops = hpa_ops
                request = _patch_request(
                    "autoscaling/v2", "horizontalpodautoscalers", namespace,
                    str(hpa_meta.get("name")), ops,
                )  # fmt: skip
                target = Target(
                    "HorizontalPodAutoscaler", str(hpa_meta.get("name")), namespace,
                    hpa_meta.get("uid"), hpa_meta.get("resourceVersion"),
                )  # fmt: skip
                workload = dep_target
        return Plan(
            action=self.name,
            params=params.model_dump(exclude_none=True),
            target=target,
            before=f"{current} replica(s) of Deployment {params.deployment}",
            after=f"{wanted} replica(s)"
            + (", by the HPA's minReplicas" if target.kind != "Deployment" else "")
            + ("; the new pod(s) Ready" if up else "; one pod removed"),
            request=request,
            dangerous=True,
            confirm_word=params.deployment,
            # Back by one is itself a scale-deployment; further is not (down is one at a time).
            undo={**params.model_dump(exclude_none=True), "replicas": current}
            if abs(wanted - current) == 1 and target.kind == "Deployment"
            else None,
            notes=tuple(notes),
            preconditions=tuple(
                Precondition(op["path"], op["value"]) for op in ops if op["op"] == "test"
            ),
            checks=tuple(checks),
            workload=workload,
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        result = await _patch(plan, clients, dry_run=True)
        return {"server": "patch accepted (dry run)", "kind": plan.target.kind,
                "spec": {k: v for k, v in (result.get("spec") or {}).items()
                         if k in ("replicas", "minReplicas", "maxReplicas")}}  # fmt: skip

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        try:
            await _patch(plan, clients, dry_run=True)
        except BackendError as exc:
            if exc.reason == "invalid":
                return f"the {plan.target.kind}'s replicas changed since the preview ({exc.detail})"
            raise
        if int(plan.params["replicas"]) > _planned_current(plan):
            # The nodes may have filled since the preview: place the new pods again.
            kube = await clients.kube_writer()
            deployment = await kube.get_deployment(
                plan.target.namespace or "", str(plan.params["deployment"])
            )
            added = int(plan.params["replicas"]) - _replicas(deployment)
            verdict = await _fit_verdict(kube, deployment, added)
            if not verdict.ok:
                return f"the new pod(s) no longer fit: {verdict.reason}"
        return None

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        kube = await clients.kube_writer()
        namespace = plan.target.namespace or ""
        deployment = await kube.get_deployment(namespace, str(plan.params["deployment"]))
        before = await kube.list_pods(namespace, label_selector=_selector(deployment))
        await _patch(plan, clients, dry_run=False)
        return {
            "patched": plan.target.label,
            "replicas": plan.params["replicas"],
            "before_uids": [(p.get("metadata") or {}).get("uid") for p in before],
        }

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        kube = await clients.kube_writer()
        namespace, name = plan.target.namespace or "", str(plan.params["deployment"])
        wanted = int(plan.params["replicas"])
        before = {u for u in result.get("before_uids") or [] if u}
        added = wanted - _planned_current(plan)
        up = added > 0
        say(f"waiting for {wanted} Ready replica(s) of {name}")
        seen = ""
        for _ in range(math.ceil(VERIFY_TIMEOUT_S / POLL_INTERVAL_S) + 1):
            deployment = await kube.get_deployment(namespace, name)
            pods = await kube.list_pods(namespace, label_selector=_selector(deployment))
            live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
            ready = [p for p in live if pod_ready(p)]
            new = [p for p in ready if (p.get("metadata") or {}).get("uid") not in before]
            status = deployment.get("status") or {}
            now = f"{len(ready)} of {wanted} Ready" + _pending(live)
            if now != seen:
                say(now)
                seen = now
            if up and len(ready) >= wanted and len(new) >= added:
                names = ", ".join(sorted(str(p["metadata"].get("name")) for p in new)) or "-"
                return True, f"{len(ready)} replica(s) Ready; new: {names}"
            if not up and len(live) == wanted and int(status.get("replicas") or 0) == wanted:
                return True, f"{wanted} replica(s) ({len(ready)} Ready); the removed pod is gone"
            await asyncio.sleep(POLL_INTERVAL_S)
        return False, f"not {wanted} Ready replica(s) within {VERIFY_TIMEOUT_S:g}s: {seen}"


def _replicas(deployment: Obj) -> int:
    """spec.replicas (the apiserver defaults it to 1); PlanError on a value no server stores."""
    value = (deployment.get("spec") or {}).get("replicas", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlanError(f"the Deployment's spec.replicas is {value!r}, not a replica count")
    return value


def _planned_current(plan: Plan) -> int:
    """The Deployment's replicas when the plan was made: `before` starts with them (kept
    there, not in `params`, which are the action's parameters and are validated again)."""
    return int(str(plan.before).split(" ", 1)[0])


def _selector(deployment: Obj) -> str:
    labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not labels:
        raise PlanError("the Deployment has no spec.selector.matchLabels to find its pods by")
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _pending(pods: list[Obj]) -> str:
    """The scheduler's word on the first Pending, unscheduled pod (`FailedScheduling`)."""
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return f"; {pod['metadata'].get('name')} Pending: {cond.get('message')}"
    return ""


async def _fit_verdict(kube: KubeWriter, deployment: Obj, added: int) -> GuardVerdict:
    """Can the nodes take `added` new pods, besides the Deployment's pods still Pending?"""
    template = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    nodes = await kube.list_nodes()
    pods = await kube.list_all_pods()
    selector = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    namespace = (deployment.get("metadata") or {}).get("namespace")
    waiting = [
        p for p in pods
        if (p.get("metadata") or {}).get("namespace") == namespace
        and selector
        and all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v
                for k, v in selector.items())
        and not (p.get("spec") or {}).get("nodeName")
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]  # fmt: skip
    fit = node_fit(template, nodes, pods, count=added + len(waiting))
    detail: dict[str, Any] = {
        "requests": {k: str(v) for k, v in fit.requests.items()},
        "free": fit.free,
        "excluded": fit.excluded,
        "placed": list(fit.placed),
        "pending": [p["metadata"].get("name") for p in waiting],
    }
    names = ", ".join(str(n) for n in detail["pending"])
    also = f"; counting {len(waiting)} pod(s) of it Pending already ({names})" if waiting else ""
    return GuardVerdict(FIT, fit.fits, f"{fit.reason}{also}", detail)


def _hpa_for(hpas: list[Obj], deployment: str) -> Obj | None:
    for hpa in hpas:
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        group = str(ref.get("apiVersion") or "apps/v1").split("/")[0]
        if ref.get("kind") == "Deployment" and ref.get("name") == deployment and group == "apps":
            return hpa
    return None


def _hpa_verdict(
    hpa: Obj, current: int, wanted: int, clients: Clients
) -> tuple[GuardVerdict, list[dict[str, Any]] | None]:
    """The policy's verdict on scaling under `hpa`, and the HPA patch when it raises its min."""
    meta, spec = hpa.get("metadata") or {}, hpa.get("spec") or {}
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    policy = clients.settings.guards.scale_with_hpa
    describe = (
        f"HorizontalPodAutoscaler {meta.get('namespace')}/{meta.get('name')} scales this "
        f"Deployment (minReplicas {1 if low is None else low}, maxReplicas {high})"
    )
    detail: dict[str, Any] = {"describe": describe, "hpa": meta.get("name"), "policy": policy,
                              "min_replicas": low, "max_replicas": high}  # fmt: skip

    def refuse(why: str) -> tuple[GuardVerdict, None]:
        return GuardVerdict(HPA, False, f"{describe}; {why}", detail), None

    if wanted < current:
        return refuse("lower its minReplicas/maxReplicas where it is defined, not the Deployment")
    if policy == "refuse":
        return refuse(
            "guards.scale_with_hpa is refuse: raise its minReplicas where it is defined "
            "(or set guards.scale_with_hpa: raise-min)"
        )
    if not isinstance(high, int) or isinstance(high, bool):
        return refuse(f"its maxReplicas {high!r} is not a replica count")
    if wanted > high:
        return refuse(f"{wanted} is above its maxReplicas: raise that where it is defined")
    if low is not None and (not isinstance(low, int) or isinstance(low, bool) or low >= wanted):
        return refuse(f"its minReplicas {low!r} is not below {wanted}: nothing to raise")
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": MIN_REPLICAS, "value": low}
        if low is not None
        else {"op": "test", "path": "/spec/maxReplicas", "value": high},
        {"op": "replace" if low is not None else "add", "path": MIN_REPLICAS, "value": wanted},
    ]
    reason = (
        f"{describe}: its minReplicas becomes {wanted} (guards.scale_with_hpa: raise-min); "
        "the HPA scales the Deployment"
    )
    return GuardVerdict(HPA, True, reason, detail), ops


def _patch_request(
    api: str, resource: str, namespace: str, name: str, ops: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "method": "PATCH",
        "path": f"/apis/{api}/namespaces/{namespace}/{resource}/{name}",
        "content_type": "application/json-patch+json",
        "body": ops,
    }


async def _patch(plan: Plan, clients: Clients, *, dry_run: bool) -> Obj:
    kube = await clients.kube_writer()
    namespace, body = plan.target.namespace or "", plan.request["body"]
    if plan.target.kind == "HorizontalPodAutoscaler":
        return await kube.patch_hpa_json(namespace, plan.target.name, body, dry_run=dry_run)
    return await kube.patch_deployment_json(namespace, plan.target.name, body, dry_run=dry_run)


ACTION = ScaleDeployment()
