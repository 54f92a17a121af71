"""The capacity preflight as a guard of the write path (docs/architecture.md §3).

An action that takes serving pods away says which (`Action.pods_taken`); for it the executor
asks here for the capacity guard's verdict in every preview (`preview_verdict`), makes the
typed confirmation carry the override phrase when the verdict is `refuse` (`overridable`: the
word to type becomes `override capacity <word>`, so every front end's existing typed
confirmation asks for it, and nothing changes without it), and re-reads the facts after the
confirmation, just before the write (`recheck_verdict`): a load grown past GROWTH_LIMIT since
the preview, or a worse verdict, refuses, and an override typed on the preview's numbers does
not carry over to worse ones.

`unknown` (no Deployment, Kubernetes or Prometheus not answering, a pod without series,
implausible numbers) passes with a warning that says so; it is never shown as ok.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict, Plan, Preview
from oncall.remediation.action import Action
from oncall.remediation.capacity import (
    GUARD,
    OVERRIDE_PHRASE,
    CapacityFacts,
    CapacityVerdict,
    PodsTaken,
    assess,
    guard_verdict,
    recheck,
)
from oncall.remediation.capacity_facts import (
    facts_of,
    loads_numbers,
    match_labels,
    read_loads,
    strategy,
)
from oncall.remediation.clients import Clients


async def read(
    plan: Plan, taken: PodsTaken, clients: Clients
) -> tuple[CapacityFacts | None, CapacityVerdict]:
    """The facts now and their verdict; no facts when the workload could not be read."""
    workload = plan.target if plan.target.kind == "Deployment" else plan.workload
    if workload is None or workload.kind != "Deployment":
        what = workload.label if workload else "no workload"
        return None, CapacityVerdict("unknown", f"capacity unknown: {what} is not a Deployment")
    namespace = workload.namespace or clients.settings.kubernetes.namespace
    try:
        kube = await clients.kube_writer()
        deployment = await kube.get_deployment(namespace, workload.name)
        selector = match_labels(deployment)
        pods = await kube.list_pods(namespace, label_selector=selector) if selector else []
    except BackendError as exc:
        return None, CapacityVerdict("unknown", f"capacity unknown: Kubernetes: {exc}")
    guards = clients.settings.guards
    async with clients.prometheus() as prometheus:
        loads = await read_loads(prometheus, namespace, guards.capacity_window)
    facts = facts_of(pods, loads, taken, guards.capacity_kv_threshold)
    verdict = assess(facts)
    numbers: dict[str, Any] = {
        **verdict.numbers, "replicas": loads_numbers(facts), "strategy": strategy(deployment),
    }  # fmt: skip
    if loads.error is not None:
        return facts, CapacityVerdict("unknown", f"capacity unknown: {loads.error}", numbers)
    # A named pod outside the Deployment's selector would move "0 sequences": not an ok.
    stray = sorted(set(taken.pods) - {r.pod for r in facts.affected})
    if stray:
        why = f"capacity unknown: {', '.join(stray)} not among {workload.label}'s pods"
        return facts, CapacityVerdict("unknown", why, numbers)
    return facts, CapacityVerdict(verdict.verdict, verdict.reason, numbers)


def _as_guard(verdict: CapacityVerdict, *, overridden: bool = False) -> GuardVerdict:
    shown = guard_verdict(verdict, OVERRIDE_PHRASE if overridden else None)
    if not shown.ok:
        reason = f"{shown.reason.split(' (type ')[0]} (type '{OVERRIDE_PHRASE} <word>' to go on)"
        return dataclasses.replace(shown, reason=reason, override=OVERRIDE_PHRASE)
    warning = verdict.verdict in ("warn", "unknown") or shown.detail.get("overridden") is True
    return dataclasses.replace(shown, warning=warning)


async def preview_verdict(action: Action[Any], plan: Plan, clients: Clients) -> GuardVerdict | None:
    """The capacity guard's line in the preview; None for an action that takes no pod away."""
    taken = action.pods_taken(plan)
    if taken is None:
        return None
    _facts, verdict = await read(plan, taken, clients)
    return _as_guard(verdict)


def capacity_of(preview: Preview) -> GuardVerdict | None:
    return next((v for v in preview.verdicts if v.guard == GUARD), None)


def overridable(preview: Preview) -> Preview:
    """The preview whose confirmation word carries the override phrase, when the capacity
    guard refuses: typing `override capacity <word>` is then the only way to confirm."""
    shown = capacity_of(preview)
    if shown is None or shown.override is None:
        return preview
    plan = preview.plan
    word = f"{shown.override} {plan.confirm_word}"
    plan = dataclasses.replace(plan, confirm_word=word, dangerous=True)
    return Preview(plan, preview.dry_run, preview.verdicts)


def overridden(preview: Preview) -> dict[str, Any] | None:
    """The audit detail of a confirmed override (the numbers and verdict it went past)."""
    shown = capacity_of(preview)
    if shown is None or shown.override is None:
        return None
    return {**shown.detail, "overridden": True, "phrase": shown.override, "reason": shown.reason}


async def recheck_verdict(
    action: Action[Any], plan: Plan, clients: Clients, preview: Preview
) -> GuardVerdict | None:
    """The verdict on the facts re-read just before the write. Refused (no phrase overrides
    it) when worse than the preview's or the load grew past GROWTH_LIMIT; a refusal the
    person overrode on the preview stays overridden only while it is no worse."""
    taken = action.pods_taken(plan)
    shown = capacity_of(preview)
    if taken is None or shown is None:
        return None
    detail = shown.detail
    previewed = CapacityVerdict(str(detail.get("verdict", "unknown")), shown.reason, detail)  # type: ignore[arg-type]
    facts, now = await read(plan, taken, clients)
    escalated: CapacityVerdict | None = None
    if facts is None or now.verdict == "unknown":
        if previewed.verdict == "ok":
            why = f"worse since the preview (ok -> unknown): {now.reason}"
            escalated = CapacityVerdict("refuse", why, now.numbers)
    else:
        checked = recheck(previewed, facts)
        if checked != assess(facts):  # worse, or grown: recheck's own refusal
            escalated = checked
    if escalated is not None:
        reason = f"re-check before the write: {escalated.reason}"
        numbers = {**now.numbers, **escalated.numbers}
        detail = {**numbers, "verdict": "refuse", "previewed": previewed.verdict}
        return GuardVerdict(GUARD, False, reason, detail)
    return _as_guard(now, overridden=overridden(preview) is not None)
