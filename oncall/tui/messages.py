"""Messages the app's background workers send to it: results travel as messages, never as
widget calls from a worker (STYLE 7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

from oncall.model.alerts import AlertInstance, RuleStatus
from oncall.tui.state import RunFailure

if TYPE_CHECKING:
    from oncall.model.checklist_events import ChecklistEvent


@dataclass
class AlertsRefreshed(Message):
    """A refresh answered: every rule's state, taken at `at` (the app's clock)."""

    statuses: list[RuleStatus]
    at: float
    #: The context refreshed (its loop's); None with one context.
    context: str | None = None
    #: What the answers warned of beside their data (`AlertsSource.warnings`).
    warnings: tuple[str, ...] = ()


@dataclass
class VerdictsFound(Message):
    """At-firing verdicts `oncall serve` stored, by alert key (oncall/model/verdicts.py)."""

    verdicts: dict[str, dict[str, Any]]


@dataclass
class HistoryRefreshed(Message):
    """Recent (unix time, value) points of each rule's expression, for the sparklines."""

    history: dict[str, list[tuple[float, float]]]


@dataclass
class AlertsFailed(Message):
    """A refresh raised instead of answering (bad rule files, an unexpected error)."""

    error: str
    context: str | None = None


@dataclass
class ChecklistProgress(Message):
    """One event of the run `generation` of `alert`'s checklist."""

    alert: str
    generation: int
    event: ChecklistEvent


@dataclass
class ChecklistEnded(Message):
    """The run ended: every step decided, or `error` says why it stopped early."""

    alert: str
    generation: int
    error: str | None = None
    error_short: RunFailure | None = None


@dataclass
class OpenIncident(Message):
    """The user opened an alert (enter on the board)."""

    alert: str


@dataclass
class RerunChecklist(Message):
    """The user asked for a fresh run of an alert's checklist (`r`)."""

    alert: str


@dataclass
class SilenceAlert(Message):
    """The user asked to silence an alert (`s`), or one of its instances: the app opens the
    silence modal (oncall.tui.silence), so that no screen imports another's."""

    alert: str
    instance: AlertInstance | None = None


@dataclass
class AcknowledgeAlert(Message):
    """The user acknowledged an alert team-wide (`a`): the app proposes the ack."""

    alert: str


@dataclass
class RefreshAlerts(Message):
    """The user asked for alert states now rather than at the next refresh."""


@dataclass
class IncidentsGrouped(Message):
    """The team's open incidents after a grouping (oncall/model/incidents.py)."""

    incidents: list[Any]
