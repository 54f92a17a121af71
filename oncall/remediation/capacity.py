"""The capacity preflight: will the rest of the service carry the load a fix moves?
(docs/architecture.md §3, the write path; read by capacity_facts.py, shown by capacity_guard.py)

A pure function from facts to a verdict, so that the preview, the executor's re-check just
before the write and the audit record all judge the same numbers the same way. Reading the
facts (vLLM `/metrics`, pod conditions, the Deployment's strategy) is the caller's job.

Verdicts: `ok` (the other Ready replicas have free slots for all the moved sequences), `warn`
(they do not, but are not saturated: the estimate is shown), `refuse` (they are already
saturated, or none is left: only the typed override phrase lets a person go on) and `unknown`
(a fact is missing or implausible: it warns and says so, never passes as ok).

A replica is saturated, as production-facts.md describes vLLM under pressure, when its KV cache
is at or above the runbook's threshold AND it preempts, or when it runs at its effective cap
(`min(--max-num-seqs, --max-num-active-seqs)`) with requests waiting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from oncall.model.write_path import GuardVerdict

Verdict = Literal["ok", "warn", "refuse", "unknown"]
GUARD = "capacity"
OVERRIDE_PHRASE = "override capacity"
# The re-check refuses when the load to move grew by more than this since the preview: the
# person consented to numbers that no longer hold.
GROWTH_LIMIT = 1.5
_RANK: dict[str, int] = {"ok": 0, "unknown": 1, "warn": 1, "refuse": 2}


@dataclass(frozen=True)
class PodsTaken:
    """What an action takes away from serving while it runs, as it declares it
    (`Action.pods_taken`): the pods it names, or else its workload's `busiest` Ready pods
    (a rollout's pod at a time, a scale-down's one), the worst case for the others."""

    pods: tuple[str, ...] = ()
    busiest: int = 0


@dataclass(frozen=True)
class ReplicaLoad:
    """One vLLM pod's load, from its `/metrics` (None: not exposed or not reached)."""

    pod: str
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None  # fraction 0-1
    preemptions: float | None  # increase over the recent window, not the counter's total
    cap: int | None  # min(--max-num-seqs, --max-num-active-seqs)


@dataclass(frozen=True)
class CapacityFacts:
    """What the preflight judges: the pods the action takes away and the Ready others."""

    affected: tuple[ReplicaLoad, ...]
    others: tuple[ReplicaLoad, ...]
    kv_threshold: float
    time_to_ready_s: float | None = None  # from the current pods' startedAt -> Ready
    grace_period_s: float | None = None  # terminationGracePeriodSeconds
    p99_latency_s: float | None = None


@dataclass(frozen=True)
class CapacityVerdict:
    verdict: Verdict
    reason: str
    numbers: dict[str, Any] = field(default_factory=dict)


def _implausible(load: ReplicaLoad) -> str | None:
    """Why `load` cannot be a real vLLM answer (a forged or broken /metrics), or None."""
    values = {
        "running": load.running,
        "waiting": load.waiting,
        "kv_cache_usage": load.kv_cache_usage,
        "preemptions": load.preemptions,
    }
    for name, value in values.items():
        if value is not None and (not math.isfinite(value) or value < 0):
            return f"{name}={value}"
    if load.kv_cache_usage is not None and load.kv_cache_usage > 1:
        return f"kv_cache_usage={load.kv_cache_usage} above 1"
    # vLLM's scheduler never runs more sequences than its cap.
    if load.cap is not None and load.running is not None and load.running > load.cap:
        return f"running={load.running:g} above the cap {load.cap}"
    return None


def _missing(load: ReplicaLoad, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if getattr(load, name) is None]


def _saturated(load: ReplicaLoad, threshold: float) -> bool:
    kv_full = (load.kv_cache_usage or 0) >= threshold and (load.preemptions or 0) > 0
    at_cap = load.cap is not None and (load.running or 0) >= load.cap and (load.waiting or 0) > 0
    return kv_full or at_cap


def assess(facts: CapacityFacts) -> CapacityVerdict:
    """The verdict on `facts`, with the numbers it was judged on."""
    numbers: dict[str, Any] = {
        "affected": [load.pod for load in facts.affected],
        "others": [load.pod for load in facts.others],
        "kv_threshold": facts.kv_threshold,
        "time_to_ready_s": facts.time_to_ready_s,
        "grace_period_s": facts.grace_period_s,
        "p99_latency_s": facts.p99_latency_s,
    }
    for load in (*facts.affected, *facts.others):
        bad = _implausible(load)
        if bad:
            return CapacityVerdict(
                "unknown", f"implausible /metrics from {load.pod}: {bad}", numbers
            )
    gaps = [
        f"{a.pod}: {', '.join(m)}"
        for a in facts.affected
        if (m := _missing(a, ("running", "waiting")))
    ]
    needed = ("running", "waiting", "kv_cache_usage", "preemptions", "cap")
    gaps += [f"{o.pod}: {', '.join(m)}" for o in facts.others if (m := _missing(o, needed))]
    if gaps:
        return CapacityVerdict("unknown", f"capacity unknown, not read: {'; '.join(gaps)}", numbers)
    moved = sum((a.running or 0) + (a.waiting or 0) for a in facts.affected)
    cut = sum(a.running or 0 for a in facts.affected)
    free = sum(max((o.cap or 0) - (o.running or 0), 0) for o in facts.others)
    saturated = [o.pod for o in facts.others if _saturated(o, facts.kv_threshold)]
    numbers.update(moved_sequences=moved, running_cut=cut, free_slots=free, saturated=saturated)
    gone = _gone(facts)
    if not facts.others:
        return CapacityVerdict(
            "refuse", f"no other Ready replica takes {moved:g} sequences{gone}", numbers
        )
    if len(saturated) == len(facts.others):
        why = f"the remaining replicas are saturated ({', '.join(saturated)})"
        return CapacityVerdict(
            "refuse", f"{why}; {moved:g} sequences would move to them{gone}", numbers
        )
    if moved <= free and not saturated:
        return CapacityVerdict(
            "ok", f"{moved:g} sequences fit the {free:g} free slots{gone}", numbers
        )
    busy = f" ({', '.join(saturated)} saturated)" if saturated else ""
    return CapacityVerdict(
        "warn", f"{moved:g} sequences move onto {free:g} free slots{busy}{gone}", numbers
    )


def _gone(facts: CapacityFacts) -> str:
    if facts.time_to_ready_s is None:
        return "; time to Ready unknown"
    return f"; capacity gone about {facts.time_to_ready_s:.0f}s"


def recheck(previewed: CapacityVerdict, facts: CapacityFacts) -> CapacityVerdict:
    """The verdict just before the write: `refuse` when it got worse than the person saw, or the
    load to move grew beyond GROWTH_LIMIT times the previewed one."""
    now = assess(facts)
    if _RANK[now.verdict] > _RANK[previewed.verdict]:
        reason = f"worse since the preview ({previewed.verdict} -> {now.verdict}): {now.reason}"
        return CapacityVerdict("refuse", reason, now.numbers)
    before = previewed.numbers.get("moved_sequences")
    after = now.numbers.get("moved_sequences")
    if (
        isinstance(before, int | float)
        and isinstance(after, int | float)
        and after > max(before, 1) * GROWTH_LIMIT
    ):
        reason = f"the load to move grew from {before:g} to {after:g} sequences since the preview"
        return CapacityVerdict("refuse", reason, now.numbers)
    return now


def guard_verdict(verdict: CapacityVerdict, override: str | None = None) -> GuardVerdict:
    """The guard's line in the preview and the audit record: `refuse` blocks unless the person
    typed OVERRIDE_PHRASE, and the override is recorded as such."""
    overridden = verdict.verdict == "refuse" and override == OVERRIDE_PHRASE
    detail = {**verdict.numbers, "verdict": verdict.verdict, "overridden": overridden}
    if verdict.verdict == "refuse" and not overridden:
        reason = f"refuse: {verdict.reason} (type {OVERRIDE_PHRASE!r} to go on)"
        return GuardVerdict(GUARD, False, reason, detail)
    prefix = "overridden refuse" if overridden else verdict.verdict
    return GuardVerdict(GUARD, True, f"{prefix}: {verdict.reason}", detail)
