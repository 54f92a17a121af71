"""What a checklist run reports: step events, evidence and proposals, as plain values.

The checklist engine makes them; the CLI prints them and the app shows them. They live here,
apart from the engine, so that a screen can hold and render them without importing the runbook
loader (pydantic models, YAML, expressions): the app starts without it and loads it the first
time a checklist runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

StepStatus = Literal["ok", "warn", "fail", "error", "unknown", "skipped"]
#: Most urgent first: the order a summary counts statuses in.
STATUS_ORDER: tuple[StepStatus, ...] = ("fail", "error", "unknown", "warn", "ok", "skipped")


@dataclass(frozen=True)
class EvidenceValue:
    label: str
    value: object
    threshold: object = None
    unit: str | None = None
    error: str | None = None
    #: The runbook's expression of the value (`facts.kv_cache_usage`): a chart finds the
    #: probe's PromQL series behind it (`oncall.service.charts.evidence_query`).
    source: str | None = None
    #: The unhealthy side of the threshold, "above" or "below" (the runbook's `bad`).
    bad: str = "above"


@dataclass(frozen=True)
class Proposal:
    """A remediation a failed step proposes, with its parameters evaluated on the evidence."""

    id: str
    action: str
    title: str
    params: dict[str, Any]
    step: str
    dangerous: bool = False
    error: str | None = None  # parameters that did not evaluate or validate: not actionable


@dataclass(frozen=True)
class ChecklistPlanned:
    """First event of a run: which runbook, and its steps (id, title) in dependency order.

    A screen lists every step as soon as the run starts, before any of them has begun.
    """

    runbook: str
    steps: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class StepStarted:
    id: str
    title: str
    started_at: float  # unix time


@dataclass(frozen=True)
class StepResult:
    id: str
    title: str
    status: StepStatus
    reason: str | None
    summary: str | None
    duration_s: float
    started_at: float
    probe: str
    params: dict[str, Any]
    equivalent: str | None
    timeout_s: float
    evidence: tuple[EvidenceValue, ...] = ()
    proposals: tuple[Proposal, ...] = ()
    facts: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


#: What a checklist run yields: the plan first, then each step's start and result.
ChecklistEvent = ChecklistPlanned | StepStarted | StepResult


def worst_status(results: list[StepResult]) -> StepStatus | None:
    """The most urgent status among results (`STATUS_ORDER`); None when there are none."""
    present = {r.status for r in results}
    return next((s for s in STATUS_ORDER if s in present), None)


def findings_line(results: list[StepResult]) -> str:
    """'2 fail · 1 unknown' — the counts that need attention, or 'all ok'."""
    counts = {s: sum(1 for r in results if r.status == s) for s in STATUS_ORDER}
    parts = [f"{counts[s]} {s}" for s in ("fail", "error", "unknown", "warn") if counts[s]]
    return " · ".join(parts) if parts else "all ok"
