"""Fakes at the service boundary for the app's tests: alert states, checklist runs, a clock.

Nothing here sleeps: a scripted checklist waits on `asyncio.Event` gates the test opens, and a
hung one waits on a gate nobody opens.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.geometry import Region

from oncall.alerts.loader import load_rule_files
from oncall.model.alerts import AlertInstance, AlertRule, AlertStateName, RuleStatus
from oncall.model.checklist_events import (
    ChecklistEvent,
    ChecklistPlanned,
    EvidenceValue,
    Proposal,
    StepResult,
    StepStarted,
    StepStatus,
)
from oncall.settings import Settings
from oncall.tui.app import OncallApp

if TYPE_CHECKING:
    from textual.widgets import DataTable

T0 = 1_767_225_600.0  # 2026-01-01 00:00:00 UTC: every time on screen derives from this


class FakeClock:
    """A clock that moves only when told."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@functools.cache
def shipped_exprs() -> dict[str, str]:
    """The shipped golden alerts' expressions, by name (alerts/*.yaml)."""
    files = sorted((Path(__file__).resolve().parents[2] / "alerts").glob("*.yaml"))
    return {r.name: r.expr for r in load_rule_files(files).rules}


def rule(name: str, severity: str = "page", for_s: float = 120.0) -> AlertRule:
    """A rule named `name`, with the shipped rule's expression if there is one."""
    return AlertRule(
        name=name,
        expr=shipped_exprs().get(name, "vector(1)"),
        group="golden",
        file="alerts/ai-service.yaml",
        line=1,
        for_s=for_s,
        labels={"severity": severity},
        annotations={"summary": f"{name} summary"},
    )


def status(
    name: str,
    state: AlertStateName,
    *,
    value: float | None = None,
    fires_in: float | None = None,
    firing_for: float | None = None,
    last_eval: float | None = T0 - 3,
    error: str | None = None,
    stale_since: float | None = None,
    severity: str = "page",
) -> RuleStatus:
    instances: tuple[AlertInstance, ...] = ()
    if state in ("pending", "firing"):
        instances = (
            AlertInstance(
                rule=name,
                state=state,
                labels={"alertname": name},
                value=value,
                active_since=T0 - 200,
                fires_in_s=fires_in,
                firing_for_s=firing_for,
                last_evaluation=last_eval,
                source="prometheus",
            ),
        )
    return RuleStatus(
        rule(name, severity),
        "prometheus",
        state,
        instances,
        error=error,
        stale_since=stale_since,
        last_evaluation=last_eval,
    )


class FakeAlerts:
    """Answers each refresh with `statuses`, and each history request with `history`, as they
    are at that moment."""

    def __init__(
        self,
        statuses: Sequence[RuleStatus] = (),
        history: dict[str, list[tuple[float, float]]] | None = None,
    ) -> None:
        self.statuses = list(statuses)
        self.history_points = dict(history or {})
        #: What each refresh says its answers warned of (`AlertsSource.warnings`).
        self.warned: tuple[str, ...] = ()
        self.calls = 0
        self.history_calls = 0
        self.closed = False

    async def refresh(self) -> list[RuleStatus]:
        self.calls += 1
        return list(self.statuses)

    async def history(self) -> dict[str, list[tuple[float, float]]]:
        self.history_calls += 1
        return dict(self.history_points)

    def warnings(self) -> tuple[str, ...]:
        return self.warned

    async def aclose(self) -> None:
        self.closed = True


#: A checklist run as data: events to yield, gates to wait on, an exception to raise.
Script = list[ChecklistEvent | asyncio.Event | Exception]


@dataclass
class FakeChecklists:
    """Plays a script per alert: events are yielded, an `asyncio.Event` is waited on, an
    exception is raised.

    `calls` records each run's alert and the state it was started with; `ended` each run
    that stopped, normally or cancelled (a re-run cancels the run before it).
    """

    scripts: dict[str, Script] = field(default_factory=dict)
    calls: list[tuple[str, str | None]] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    warm_ups: int = 0
    closed: bool = False

    async def run(self, alert: str, status: RuleStatus | None) -> AsyncIterator[ChecklistEvent]:
        self.calls.append((alert, status.state if status else None))
        try:
            for item in self.scripts.get(alert, []):
                if isinstance(item, asyncio.Event):
                    await item.wait()
                elif isinstance(item, Exception):
                    raise item
                else:
                    yield item
        finally:
            self.ended.append(alert)

    @property
    def alerts(self) -> list[str]:
        return [alert for alert, _ in self.calls]

    def warm_up(self) -> None:
        self.warm_ups += 1

    async def aclose(self) -> None:
        self.closed = True


def started(step: str, title: str, at: float = T0) -> StepStarted:
    return StepStarted(step, title, at)


def result(
    step: str,
    title: str,
    state: StepStatus,
    summary: str | None,
    *,
    duration: float = 0.42,
    reason: str | None = None,
    evidence: tuple[EvidenceValue, ...] = (),
    proposals: tuple[Proposal, ...] = (),
    equivalent: str | None = None,
    probe: str = "prometheus.query",
    at: float = T0,
) -> StepResult:
    return StepResult(
        id=step,
        title=title,
        status=state,
        reason=reason,
        summary=summary,
        duration_s=duration,
        started_at=at,
        probe=probe,
        params={},
        equivalent=equivalent,
        timeout_s=5.0,
        evidence=evidence,
        proposals=proposals,
    )


P99 = "LLMHighP99Latency"
P99_STEPS = (
    ("gpu_memory", "GPU memory below 95% on every GPU"),
    ("deployment", "vLLM Deployment fully rolled out"),
    ("token_rate", "Every running sequence generates at least 5 tokens/s"),
    ("kv_cache", "KV cache not full, no preemptions"),
)

LOWER_SEQS = Proposal(
    id="lower-max-num-seqs",
    action="set-max-num-seqs",
    title="Lower --max-num-seqs to 64",
    params={"deployment": "vllm", "value": 64},
    step="gpu_memory",
    dangerous=True,
)


def p99_events() -> dict[str, ChecklistEvent]:
    """The P99 checklist's events by name: planned, <step>.started, <step>.result."""
    (gpu, gpu_t), (dep, dep_t), (tok, tok_t), (kv, kv_t) = P99_STEPS
    events: dict[str, Any] = {
        "planned": ChecklistPlanned("runbooks/LLMHighP99Latency.yaml", P99_STEPS),
        **{f"{s}.started": started(s, t) for s, t in P99_STEPS},
    }
    events[f"{gpu}.result"] = result(
        gpu,
        gpu_t,
        "fail",
        "busiest GPU at 97%, 1,200 MiB free on the fullest",
        probe="gpu.devices",
        evidence=(
            EvidenceValue("GPU memory used (busiest)", 0.972, 0.95, "ratio"),
            EvidenceValue("Free memory (fullest GPU)", 1200, None, "MiB"),
        ),
        proposals=(LOWER_SEQS,),
        equivalent="nvidia-smi --query-gpu=memory.used,memory.total --format=csv",
    )
    events[f"{dep}.result"] = result(
        dep, dep_t, "ok", "2/2 ready, --max-num-seqs 256", probe="kube.deployment", duration=0.18
    )
    events[f"{tok}.result"] = result(
        tok,
        tok_t,
        "unknown",
        "prometheus at http://127.0.0.1:9090: timeout",
        reason="prometheus at http://127.0.0.1:9090: timeout",
        probe="vllm.rates",
        duration=5.0,
    )
    events[f"{kv}.result"] = result(
        kv, kv_t, "fail", "KV cache 97% used, 1.20 preemptions/s, 14 waiting", duration=0.61
    )
    return events


def settings(**changes: Any) -> Settings:
    """Default settings with a few changed, e.g. settings(read_only=True)."""
    return Settings.model_validate(changes)


def make_app(
    alerts: FakeAlerts,
    checklists: FakeChecklists | None = None,
    *,
    clock: FakeClock | None = None,
    **setting_changes: Any,
) -> OncallApp:
    from tests.tui.chart_fakes import FakeCharts

    clock = clock or FakeClock()
    app = OncallApp(
        settings(**setting_changes),
        alerts_source=alerts,
        checklist_runner=checklists or FakeChecklists(),
        clock=clock,
    )
    app.chart_source = FakeCharts(clock)  # fixed series: the incident screen's charts
    return app


def p99_script(*gates: asyncio.Event) -> Script:
    """The whole P99 run; with gates: stops after the first step starts, after the first
    result, and before the last two steps."""
    ev = p99_events()
    first, second, third = (*gates, None, None, None)[:3]
    script: list[ChecklistEvent | asyncio.Event | None] = [
        ev["planned"],
        ev["gpu_memory.started"],
        ev["deployment.started"],
        ev["deployment.result"],
        first,
        ev["gpu_memory.result"],
        second,
        ev["token_rate.started"],
        ev["token_rate.result"],
        third,
        ev["kv_cache.started"],
        ev["kv_cache.result"],
    ]
    return [item for item in script if item is not None]


def board_history() -> dict[str, list[tuple[float, float]]]:
    """The last hour of two of `board_statuses`' alerts, a point a minute: P99 flat at 0.5 s,
    then climbing over the last 20 minutes; AIServiceUnavailable only in the last 15 minutes."""
    p99 = [(T0 - 3600 + 60 * i, 0.5) for i in range(40)]
    p99 += [(T0 - 1200 + 60 * i, 0.5 + 0.07 * i) for i in range(20)]
    unavailable = [(T0 - 900 + 60 * i, 0.002 * i) for i in range(15)]
    return {P99: p99, "AIServiceUnavailable": unavailable}


def board_statuses() -> list[RuleStatus]:
    """One alert in each state, listed in pack order (not the board's order)."""
    return [
        status("VectorSearchP999High", "inactive", severity="chat"),
        status("AIServiceUnavailable", "pending", value=0.031, fires_in=72),
        status(P99, "firing", value=1.84, firing_for=182),
        status(
            "PromptRejectionRateHigh",
            "unknown",
            severity="chat",
            error="prometheus at http://127.0.0.1:9090: refused",
            stale_since=T0 - 130,
            last_eval=T0 - 140,
        ),
        status("LLMOutOfMemory", "inactive"),
    ]


def board_app(
    checklists: FakeChecklists | None = None,
    *,
    history: bool = False,
    clock: FakeClock | None = None,
    **setting_changes: Any,
) -> OncallApp:
    """The app over the board's five alerts (`board_statuses`; with their last hour of values,
    `board_history`, when `history`), its checklists run by `checklists`."""
    alerts = FakeAlerts(board_statuses(), board_history() if history else None)
    return make_app(alerts, checklists, clock=clock, **setting_changes)


def shown(table: DataTable[Any]) -> list[str]:
    """The table's lines as the screen gets them (what the compositor asks each widget for)."""
    return [strip.text.rstrip() for strip in table.render_lines(Region(0, 0, *table.size))]
