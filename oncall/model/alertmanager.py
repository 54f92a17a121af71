"""Alertmanager's view of alerts, as plain values: silences, inhibitions, and per instance.

`AmAlert` and `Silence` are what the API v2 client parses (`GET /api/v2/alerts`,
`GET /api/v2/silences`). `InstanceRouting` is what a screen shows for one firing instance of a
rule: active, silenced (by which silences: who, until when, why), inhibited (by which alerts),
not (yet) in Alertmanager, or unknown because Alertmanager could not be asked (with the
reason). `RuleRouting` counts them for a rule's row. The terminal app imports these directly
(`oncall.model`); the fetching lives behind `oncall.service`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from oncall.model.alerts import FailureReason

#: `status.state` of an alert in API v2 (openapi.yaml `alertStatus`).
AmStateName = Literal["unprocessed", "active", "suppressed"]
#: `status.state` of a silence (openapi.yaml `silenceStatus`).
SilenceStateName = Literal["expired", "active", "pending"]
#: What a screen says of one firing instance.
RoutingState = Literal[
    "active", "silenced", "inhibited", "muted", "unprocessed", "missing", "unknown"
]


@dataclass(frozen=True)
class SilenceMatcher:
    """One matcher of a silence: `name="value"`, `!=`, `=~` or `!~`."""

    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True

    @property
    def op(self) -> str:
        if self.is_regex:
            return "=~" if self.is_equal else "!~"
        return "=" if self.is_equal else "!="

    def text(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op}"{escaped}"'


@dataclass(frozen=True)
class Silence:
    """A silence as Alertmanager keeps it (`gettableSilence`); times are unix seconds."""

    id: str
    state: SilenceStateName
    matchers: tuple[SilenceMatcher, ...] = ()
    #: Who made it and why: what the board shows beside a silenced instance.
    created_by: str = ""
    comment: str = ""
    #: When it starts and ends muting (a pending silence starts later).
    starts_at: float = 0.0
    ends_at: float = 0.0
    updated_at: float | None = None

    def matchers_text(self) -> str:
        return "{" + ", ".join(m.text() for m in self.matchers) + "}"


@dataclass(frozen=True)
class AmAlert:
    """One alert as Alertmanager holds it (`gettableAlert`).

    `inhibited_by` holds the fingerprints of the inhibiting alerts (themselves alerts of the
    same payload); `silenced_by` the ids of the silences muting it; `muted_by` the names of
    the time intervals muting it on every route (Alertmanager >= 0.28). Its times are not kept:
    Prometheus' own say when it fired, and parsing 10,000 timestamps a refresh is the largest
    cost of reading 5,000 alerts (scripts/bench/alertmanager_refresh.py).
    """

    fingerprint: str
    labels: dict[str, str]
    state: AmStateName
    silenced_by: tuple[str, ...] = ()
    inhibited_by: tuple[str, ...] = ()
    muted_by: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")


@dataclass(frozen=True)
class AmSnapshot:
    """One read of Alertmanager (unix time `at`): the alerts it holds, the silences known
    then (by id), or why it could not be read (`reason`, `error`; no alerts then)."""

    at: float
    alerts: tuple[AmAlert, ...] = ()
    silences: dict[str, Silence] = field(default_factory=dict)
    reason: FailureReason | None = None
    error: str | None = None


@dataclass(frozen=True)
class Inhibitor:
    """An alert that inhibits another: its fingerprint and, when Alertmanager holds it, its
    labels (an inhibiting alert resolved meanwhile is known by fingerprint alone)."""

    fingerprint: str
    labels: dict[str, str] | None = None

    def text(self) -> str:
        if self.labels is None:
            return f"alert {self.fingerprint}"
        shown = [f'{k}="{v}"' for k, v in sorted(self.labels.items()) if k != "alertname"]
        return f"{self.labels.get('alertname', '?')}{{{', '.join(shown)}}}"


@dataclass(frozen=True)
class InstanceRouting:
    """What Alertmanager does with one instance of a rule now.

    `silences` are the silences named by `silenced_by` that the silences list had; a silence
    created since the last list is known by id alone until the next (`silenced_by`). For
    `unknown`, `reason` and `error` say why Alertmanager could not be asked. `missing`: the
    instance fires in Prometheus but Alertmanager does not hold it (yet: Prometheus sends
    every evaluation, or it is not configured to send there).
    """

    state: RoutingState
    silenced_by: tuple[str, ...] = ()
    silences: tuple[Silence, ...] = ()
    inhibited_by: tuple[Inhibitor, ...] = ()
    #: The time intervals muting it (`mute_time_intervals`, outside `active_time_intervals`).
    muted_by: tuple[str, ...] = ()
    reason: FailureReason | None = None
    error: str | None = None

    def text(self, now: float | None = None) -> str:
        """One line: 'silenced by alice until 14:20 UTC: rolling out…', 'inhibited by X{…}'."""
        if self.state == "silenced":
            if not self.silences:
                return f"silenced ({', '.join(self.silenced_by)})"
            return "silenced " + "; ".join(silence_text(s, now) for s in self.silences)
        if self.state == "inhibited":
            return "inhibited by " + ", ".join(i.text() for i in self.inhibited_by)
        if self.state == "muted":
            return "muted by time interval " + ", ".join(self.muted_by)
        if self.state == "unknown":
            return f"unknown: {self.error or self.reason or 'no answer'}"
        if self.state == "missing":
            return "not in alertmanager"
        return self.state


def silence_text(silence: Silence, now: float | None = None) -> str:
    """'by alice until 2026-12-01 14:20 UTC (1h59m left): rolling out the fix'."""
    until = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(silence.ends_at))
    left = ""
    if now is not None and silence.ends_at > now:
        minutes = int((silence.ends_at - now) // 60)
        left = (
            f" ({minutes // 60}h{minutes % 60:02d}m left)"
            if minutes >= 60
            else (f" ({minutes}m left)")
        )
    comment = f": {silence.comment}" if silence.comment else ""
    return f"by {silence.created_by or '?'} until {until}{left}{comment}"


@dataclass(frozen=True)
class Acknowledgement:
    """ "I am on it": who acknowledged a firing alert, when (unix seconds), with what note.
    Made and kept team-wide by the acknowledgement feature; shown beside the routing."""

    by: str
    at: float
    note: str = ""


@dataclass(frozen=True)
class RuleRouting:
    """A rule's firing instances as Alertmanager handles them: counts per state, and why the
    state is unknown when it is. `ack` is left for the acknowledgement ("I am on it", kept in
    Redis: who, when, note), which the board shows next to these counts; None: none made."""

    active: int = 0
    silenced: int = 0
    inhibited: int = 0
    muted: int = 0  # by a time interval (Alertmanager >= 0.28)
    other: int = 0  # unprocessed or not (yet) in Alertmanager
    unknown: int = 0
    reason: FailureReason | None = None
    error: str | None = None
    ack: Acknowledgement | None = None
    #: Why the acknowledgements could not be read (Redis down): shown as `ack unknown`.
    ack_error: str | None = None

    @property
    def total(self) -> int:
        return self.active + self.silenced + self.inhibited + self.muted + self.other + self.unknown

    def text(self) -> str:
        """The board's cell: '2 silenced, 1 active', 'unknown: timeout', '' when none fire."""
        if self.unknown:
            return f"unknown: {self.reason or 'no answer'}"
        parts = [
            f"{count} {name}"
            for name, count in (
                ("silenced", self.silenced),
                ("inhibited", self.inhibited),
                ("muted", self.muted),
                ("active", self.active),
                ("not in AM", self.other),
            )
            if count
        ]
        return ", ".join(parts)

    @staticmethod
    def of(routings: list[InstanceRouting]) -> RuleRouting:
        counts = dict.fromkeys(("active", "silenced", "inhibited", "muted", "other", "unknown"), 0)
        reason, error = None, None
        for routing in routings:
            key = routing.state if routing.state in counts else "other"
            counts[key] += 1
            if routing.state == "unknown":
                reason, error = routing.reason, routing.error
        return RuleRouting(
            active=counts["active"], silenced=counts["silenced"], inhibited=counts["inhibited"],
            muted=counts["muted"], other=counts["other"], unknown=counts["unknown"], reason=reason,
            error=error,
        )  # fmt: skip
