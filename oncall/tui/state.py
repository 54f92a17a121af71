"""What the app knows between repaints: alert states, checklist runs, and when to start one.

Plain values with no Textual in them; the app changes them in its message handlers (on the
event loop only) and the screens render from them. Times come from the app's clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from oncall.model.alerts import RuleStatus

if TYPE_CHECKING:
    # Imported where a run's events arrive (after the first frame): five frozen dataclasses,
    # ≈ 9 ms of the start-up on two cores that the board's first frame does not need.
    from oncall.model.checklist_events import (
        ChecklistEvent,
        StepResult,
        StepStarted,
        StepStatus,
    )
    from oncall.model.incidents import Incident

#: An alert's checklist starts by itself at most this often (setting `runbooks.auto_run_every`).
#: It runs when the alert becomes firing; an alert that flaps (firing → pending → firing)
#: would otherwise hit every backend again each time. Re-running by hand (`r`) is not limited.
AUTO_RUN_EVERY_S = 60.0
#: The states whose start makes a checklist run by itself, per `runbooks.auto_run`.
AUTO_RUN_STATES: dict[str, tuple[str, ...]] = {
    "firing": ("firing",),
    "pending": ("pending", "firing"),
    "off": (),
}

TIER = {"firing": 0, "pending": 1}
#: A firing alert's at-firing verdict is asked for at most this often until one is found.
VERDICT_ASK_EVERY_S = 10.0

#: Why a run ended without its results: the board's short word for it.
RunFailure = Literal["no runbook", "runbook invalid", "error"]


@dataclass(frozen=True)
class StepView:
    """One row of the incident screen: a planned, running or finished step."""

    id: str
    title: str
    state: str  # queued | running | a StepStatus
    started_at: float | None = None
    result: StepResult | None = None


@dataclass
class ChecklistRun:
    """One run of an alert's checklist, filled in as its events arrive."""

    alert: str
    generation: int
    started_at: float
    finished_at: float | None = None
    runbook: str | None = None
    planned: tuple[tuple[str, str], ...] = ()
    started: dict[str, StepStarted] = field(default_factory=dict)
    results: dict[str, StepResult] = field(default_factory=dict)
    error: str | None = None
    error_short: RunFailure | None = None

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def apply(self, event: ChecklistEvent) -> None:
        from oncall.model.checklist_events import ChecklistPlanned, StepStarted

        if isinstance(event, ChecklistPlanned):
            self.runbook, self.planned = event.runbook, event.steps
        elif isinstance(event, StepStarted):
            self.started[event.id] = event
        else:
            self.results[event.id] = event

    def steps(self) -> list[StepView]:
        """Every step known so far: the runbook's order, then any unplanned ones as they came."""
        titles = dict(self.planned)
        events: list[StepStarted | StepResult] = [*self.started.values(), *self.results.values()]
        for event in events:
            titles.setdefault(event.id, event.title)
        views = []
        for step_id, title in titles.items():
            result = self.results.get(step_id)
            started = self.started.get(step_id)
            if result is not None:
                views.append(StepView(step_id, title, result.status, result.started_at, result))
            elif started is not None:
                views.append(StepView(step_id, title, "running", started.started_at))
            else:
                views.append(StepView(step_id, title, "queued"))
        return views

    def ordered_results(self) -> list[StepResult]:
        return [v.result for v in self.steps() if v.result is not None]

    def worst(self) -> StepStatus | None:
        """The most urgent status of the steps decided so far; None before any is."""
        from oncall.model.checklist_events import worst_status

        return worst_status(list(self.results.values()))

    def findings(self) -> str:
        """The board's findings column: 'running…', '2 fail · 1 unknown', 'all ok', or why not."""
        if self.running:
            return "running…"
        if self.error_short is not None and not self.results:
            return self.error_short
        from oncall.model.checklist_events import findings_line

        line = findings_line(self.ordered_results())
        return f"{line} · {self.error_short}" if self.error_short else line


@dataclass
class AlertBook:
    """The latest alert states, the checklist runs, and which runs are due to start."""

    statuses: dict[str, RuleStatus] = field(default_factory=dict)
    pack_order: dict[str, int] = field(default_factory=dict)
    runs: dict[str, ChecklistRun] = field(default_factory=dict)
    refreshed_at: float | None = None
    refresh_error: str | None = None
    #: The contexts whose last refresh raised, with the error (`contexts:`).
    context_errors: dict[str, str] = field(default_factory=dict)
    #: What each context's last answers warned of ("" with one context), none left empty.
    warnings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    wanted: set[str] = field(default_factory=set)
    last_auto: dict[str, float] = field(default_factory=dict)
    generation: int = 0
    #: Recent (unix time, value) points per alert, for the board's sparklines.
    history: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    auto_run_states: tuple[str, ...] = AUTO_RUN_STATES["firing"]
    auto_run_every_s: float = AUTO_RUN_EVERY_S
    #: The verdict `oncall serve` stored when each firing alert fired (oncall/model/verdicts.py).
    at_firing: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdicts_asked: dict[str, float] = field(default_factory=dict)
    #: The team's open incidents as of the latest grouping (oncall.service.incidents).
    incidents: list[Incident] = field(default_factory=list)

    def verdicts_wanted(self, now: float, every_s: float = VERDICT_ASK_EVERY_S) -> list[str]:
        """Firing alerts without an at-firing verdict yet, not asked for in `every_s`: serve
        stores it a checklist's time after the alert fired, so it is asked again until then.
        An alert no longer firing forgets its verdict (a new firing has a new one)."""
        for key in [k for k in self.at_firing if self._state(k) != "firing"]:
            del self.at_firing[key]
        wanted = []
        for key, status in self.statuses.items():
            if status.state != "firing" or key in self.at_firing:
                continue
            if now - self.verdicts_asked.get(key, float("-inf")) >= every_s:
                self.verdicts_asked[key] = now
                wanted.append(key)
        return wanted

    def _state(self, key: str) -> str | None:
        status = self.statuses.get(key)
        return status.state if status is not None else None

    def update(
        self, statuses: Iterable[RuleStatus], now: float, *, context: str | None = None
    ) -> None:
        """Take a refresh's states; an alert entering one of `auto_run_states` (firing, and
        pending too if so set) wants its checklist run. With `context`, the refresh is that
        context's: the others' states stay (one refresh loop per context)."""
        fresh = {s.key: s for s in statuses}
        if context is not None:
            self.context_errors.pop(context, None)
            order = {key: i for i, key in enumerate(fresh)}
            kept = {k: s for k, s in self.statuses.items() if s.context != context}
            fresh = {**kept, **fresh}
            self.pack_order = {**self.pack_order, **order}
        else:
            self.pack_order = {name: i for i, name in enumerate(fresh)}
        for name, status in fresh.items():
            before = self.statuses.get(name)
            entered = before is None or before.state != status.state
            if status.state in self.auto_run_states and entered:
                self.wanted.add(name)
            elif status.state not in self.auto_run_states:
                self.wanted.discard(name)
        self.statuses = fresh
        self.refreshed_at = now
        self.refresh_error = self.joined_context_errors()

    def warned(self, warnings: tuple[str, ...], *, context: str | None = None) -> None:
        """A refresh's warnings replace that context's last ones (none: the note goes)."""
        if warnings:
            self.warnings[context or ""] = warnings
        else:
            self.warnings.pop(context or "", None)

    def warning_line(self) -> str | None:
        """'prometheus warns: …' with the first warning of each context, or None."""
        notes = []
        for context, warnings in self.warnings.items():
            more = f" (+{len(warnings) - 1} more)" if len(warnings) > 1 else ""
            notes.append(f"{context + ': ' if context else ''}{warnings[0]}{more}")
        return f"prometheus warns: {'; '.join(notes)}" if notes else None

    def context_failed(self, context: str, error: str) -> None:
        """A context's refresh raised: said on the board, the other contexts' states kept."""
        self.context_errors[context] = error
        self.refresh_error = self.joined_context_errors()

    def joined_context_errors(self) -> str | None:
        errors = self.context_errors
        return "; ".join(f"{name}: {text}" for name, text in errors.items()) or None

    def due(self, now: float) -> list[str]:
        """Alerts whose checklist should start by itself now (see `auto_run_every_s`)."""
        ready = []
        for name in sorted(self.wanted, key=lambda n: self.pack_order.get(n, 0)):
            run = self.runs.get(name)
            if run is not None and run.running:
                continue  # one run per alert at a time; it stays wanted until this one ends
            if now - self.last_auto.get(name, float("-inf")) >= self.auto_run_every_s:
                ready.append(name)
        return ready

    def start_run(self, alert: str, now: float, *, auto: bool) -> ChecklistRun:
        """A new run replaces the alert's previous one (whose late events are then ignored)."""
        self.generation += 1
        run = ChecklistRun(alert, self.generation, now)
        self.runs[alert] = run
        if auto:
            self.wanted.discard(alert)
            self.last_auto[alert] = now
        return run

    def current(self, alert: str, generation: int) -> ChecklistRun | None:
        """The alert's run if it is still the one with this generation."""
        run = self.runs.get(alert)
        return run if run is not None and run.generation == generation else None

    def ordered(self) -> list[RuleStatus]:
        """Firing first, then pending, then the rest; the packs' order within each."""
        return sorted(
            self.statuses.values(),
            # Across contexts: firing first, an alert's rows of every context side by side.
            key=lambda s: (TIER.get(s.state, 2), self.pack_order.get(s.key, 0), s.context),
        )

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for status in self.statuses.values():
            counts[status.state] = counts.get(status.state, 0) + 1
            if status.silent:  # counted among the inactive and on its own
                counts["silent"] = counts.get("silent", 0) + 1
        return counts
