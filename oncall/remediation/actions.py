"""The three actions' side effects: dry run, re-check, execute, verify. Called by the executor only.

Command-line equivalents:

- rebuild-pod: `kubectl delete pod NAME -n NS --dry-run=server`, then the delete with a UID
  precondition (`kubectl` has no flag for it: `curl -X DELETE … -d '{"preconditions":{"uid":…}}'`),
  then `kubectl get pods -l app=… -w` until a new UID is Ready.
- set-degradation-level: `redis-cli GET KEY` / `redis-cli SET KEY LEVEL` (or a ConfigMap merge
  patch), then the gateway's own `aigw_degradation_level` through Prometheus.
- set-max-num-seqs: `kubectl patch deployment NAME --type=json -p OPS --dry-run=server`, the
  patch, `kubectl rollout status deployment NAME`, and the new pods' args.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from oncall.backends.prometheus import PrometheusClient
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError
from oncall.model.vllm_args import parse_max_num_seqs
from oncall.remediation.plans import Clients, Plan, current_level

ROLLOUT_TIMEOUT_S = 180.0
REPLACE_TIMEOUT_S = 120.0
LEVEL_SEEN_TIMEOUT_S = 30.0


def _level(plan: Plan) -> int:
    return int(plan.params["level"])


async def dry_run(plan: Plan, clients: Clients) -> Any:
    """What the server says it would do, changing nothing."""
    target = plan.target
    if plan.action == "rebuild-pod":
        kube = await clients.kube_writer()
        await kube.delete_pod(
            target.namespace or "", target.name, uid=target.uid or "", dry_run=True
        )
        return {"server": "delete accepted (dry run)", "uid": target.uid}
    if plan.action == "set-max-num-seqs":
        kube = await clients.kube_writer()
        result = await kube.patch_deployment_json(
            target.namespace or "", target.name, plan.request["body"], dry_run=True
        )
        return {"server": "patch accepted (dry run)", "generation": _generation(result)}
    if target.kind == "ConfigMap":
        kube = await clients.kube_writer()
        data = {clients.settings.degradation.configmap_key: str(_level(plan))}
        await kube.patch_configmap(target.namespace or "", target.name, data, dry_run=True)
        return {"server": "patch accepted (dry run)"}
    return {
        "current": await current_level(clients),
        "note": "Redis has no dry run: value read back",
    }


def _generation(obj: dict[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("generation")


async def changed_since_plan(plan: Plan, clients: Clients) -> str | None:
    """Why the target is no longer what the person confirmed, or None."""
    target = plan.target
    if plan.action == "rebuild-pod":
        kube = await clients.kube_writer()
        try:
            pod = await kube.get_pod(target.namespace or "", target.name)
        except BackendError as exc:
            if exc.reason == "not found":
                return f"pod {target.name} is gone already"
            raise
        uid = (pod.get("metadata") or {}).get("uid")
        return None if uid == target.uid else f"pod {target.name} was replaced (UID {uid})"
    if plan.action == "set-max-num-seqs":
        try:
            await dry_run(plan, clients)
        except BackendError as exc:
            if exc.reason == "invalid":
                return "the Deployment's args changed since the preview (the patch's test failed)"
            raise
        return None
    raw_before = plan.notes[0].removeprefix("raw value before: ") if plan.notes else None
    now = await current_level(clients)
    return None if repr(now) == raw_before else f"the level changed to {now!r} meanwhile"


async def execute(plan: Plan, clients: Clients) -> dict[str, Any]:
    target = plan.target
    if plan.action == "rebuild-pod":
        kube = await clients.kube_writer()
        namespace = target.namespace or ""
        pod = await kube.get_pod(namespace, target.name)
        app = ((pod.get("metadata") or {}).get("labels") or {}).get("app")
        others = await kube.list_pods(namespace, label_selector=f"app={app}") if app else []
        await kube.delete_pod(namespace, target.name, uid=target.uid or "", dry_run=False)
        return {
            "deleted": target.name,
            "uid": target.uid,
            "selector": f"app={app}" if app else None,
            "other_uids": [(p.get("metadata") or {}).get("uid") for p in others],
        }
    if plan.action == "set-max-num-seqs":
        kube = await clients.kube_writer()
        result = await kube.patch_deployment_json(
            target.namespace or "", target.name, plan.request["body"], dry_run=False
        )
        return {"patched": target.name, "generation": _generation(result)}
    level = str(_level(plan))
    if target.kind == "ConfigMap":
        kube = await clients.kube_writer()
        data = {clients.settings.degradation.configmap_key: level}
        await kube.patch_configmap(target.namespace or "", target.name, data, dry_run=False)
    else:
        await RedisWriter(clients.redis_client()).set(target.name, level)
    return {"set": target.name, "level": int(level)}


async def verify(
    plan: Plan, clients: Clients, result: dict[str, Any], say: Callable[[str], None]
) -> tuple[bool, str]:
    """Did it take effect? (ok, what was seen)."""
    target = plan.target
    kube_namespace = target.namespace or ""
    if plan.action == "rebuild-pod":
        kube = await clients.kube_writer()
        selector = result.get("selector")
        if not selector:
            return False, "the pod had no app label: cannot tell its replacement"
        say(f"waiting for a replacement of {target.name} to be Ready")
        ignore = [u for u in result.get("other_uids", []) if u and u != target.uid]
        new = await kube.wait_pod_replaced(
            kube_namespace, selector, target.uid or "", timeout=REPLACE_TIMEOUT_S,
            ignore_uids=ignore,
        )  # fmt: skip
        if new is None:
            return False, f"no Ready replacement within {REPLACE_TIMEOUT_S:g}s"
        meta = new.get("metadata") or {}
        return True, f"replacement {meta.get('name')} (UID {meta.get('uid')}) is Ready"
    if plan.action == "set-max-num-seqs":
        return await _verify_rollout(plan, clients, say)
    return await _verify_level(plan, clients, say)


async def _verify_rollout(
    plan: Plan, clients: Clients, say: Callable[[str], None]
) -> tuple[bool, str]:
    kube = await clients.kube_writer()
    namespace, name = plan.target.namespace or "", plan.target.name

    def progress(status: Any) -> None:
        say(f"rollout: {status.message}")

    status = await kube.wait_rollout(
        namespace, name, timeout=ROLLOUT_TIMEOUT_S, on_progress=progress
    )
    if not status.done:
        return False, f"rollout not complete: {status.message}"
    deployment = await kube.get_deployment(namespace, name)
    labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    pods = await kube.list_pods(namespace, label_selector=selector)
    wanted = int(plan.params["value"])
    seen: list[int | None] = []
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            parsed = parse_max_num_seqs(container.get("command") or [], container.get("args") or [])
            if parsed.value is not None or parsed.form != "default":
                seen.append(parsed.value)
    if seen and all(v == wanted for v in seen):
        return True, f"rollout complete; {len(seen)} pod(s) run --max-num-seqs {wanted}"
    return False, f"rollout complete but pods run --max-num-seqs {seen}, not {wanted}"


async def _verify_level(
    plan: Plan, clients: Clients, say: Callable[[str], None]
) -> tuple[bool, str]:
    wanted = _level(plan)
    stored = await current_level(clients)
    if stored != str(wanted):
        return False, f"read back {stored!r}, not {wanted}"
    say(f"stored level {wanted}; waiting for the gateway to report it")
    settings = clients.settings.prometheus
    token = settings.bearer_token.get_secret_value() if settings.bearer_token else None
    deadline = time.monotonic() + LEVEL_SEEN_TIMEOUT_S
    async with PrometheusClient(settings.url, timeout=settings.timeout, bearer_token=token) as prom:
        while True:  # bounded by the deadline: the gauge changes at the next request + scrape
            try:
                samples = await prom.query("max(aigw_degradation_level)")
            except BackendError as exc:
                return False, f"stored level {wanted}; the service's level unknown: {exc}"
            if samples and samples[0].value == wanted:
                return True, f"stored level {wanted}; the gateway reports level {wanted}"
            if time.monotonic() >= deadline:
                seen = samples[0].value if samples else None
                return False, f"stored level {wanted}; the gateway still reports {seen}"
            await asyncio.sleep(1.0)
