"""An incident's timeline as values: what happened to its alerts, what was found and done.

Built from plain data the service read (docs/architecture.md §3, the read path): Prometheus'
`ALERTS` series over the incident's window (each pending, firing and resolved transition),
the at-firing verdicts `oncall serve` stored, and the incident's own record when Prometheus
holds no history for an alert (then the timeline says from when Prometheus knows). The audit
log's records become events in `audit_events.py`; `postmortem.py` writes the document. No I/O
here: the same inputs give the same timeline, which the golden test relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from oncall.model.incidents import Incident, Member
from oncall.model.metrics import Series
from oncall.model.verdicts import Verdict, failing_steps, verdict_findings

#: Event kinds in the order they sort at the same second: a transition before what it caused.
KINDS = (
    "history", "pending", "firing", "verdict", "check", "chart", "note", "ack", "silence",
    "action", "resolved", "closed",
)  # fmt: skip
#: Labels of an `ALERTS` series that are not the alert instance's own.
_ALERTS_ONLY = frozenset({"__name__", "alertstate"})


@dataclass(frozen=True)
class Event:
    """One line of the timeline. `record` and `seq` name the audit record behind it (empty
    when it did not come from the audit log); `vouched` is False for a record the chain's
    verification cannot vouch for, None when the event is not from the audit log."""

    ts: float
    kind: str
    text: str
    alert: str = ""
    source: str = ""  # prometheus | incident | verdict | audit
    record: str = ""
    seq: int | None = None
    vouched: bool | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts, "kind": self.kind, "text": self.text, "alert": self.alert,
            "source": self.source, "record": self.record or None, "seq": self.seq,
            "vouched": self.vouched, **({"data": self.data} if self.data else {}),
        }  # fmt: skip


def ordered(events: Iterable[Event]) -> list[Event]:
    """Oldest first; at the same second in `KINDS` order, then as given."""
    rank = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(events, key=lambda e: (round(e.ts, 3), rank.get(e.kind, len(KINDS))))


def instance_labels(labels: dict[str, str]) -> dict[str, str]:
    """The labels that name an alert instance: an `ALERTS` series' without `alertstate`."""
    return {k: v for k, v in labels.items() if k not in _ALERTS_ONLY}


def member_of(series: Series, members: Sequence[Member]) -> Member | None:
    """The member an `ALERTS` series belongs to: same alert name, and every label the member
    recorded (but `alertname`) equal in the series."""
    labels = series.labels
    for member in members:
        if labels.get("alertname") != member.alert:
            continue
        if all(labels.get(k) == v for k, v in member.labels.items() if k != "alertname"):
            return member
    return None


def _describe(member: Member) -> str:
    shown = [f"{k}={v}" for k, v in sorted(member.labels.items()) if k != "alertname"][:3]
    return f"{member.alert}{{{', '.join(shown)}}}" if shown else member.alert


def _written_at(at: float, times: Sequence[float], step: float) -> float:
    """When the evaluation wrote the sample a range query shows at `at`: the first raw sample
    within the step before it (`at` itself when none is known)."""
    return min((t for t in times if at - step < t <= at), default=at)


def alert_transitions(
    series: Sequence[Series],
    members: Sequence[Member],
    *,
    step: float,
    end: float,
    closed_at: float | None = None,
    raw: Sequence[Series] = (),
) -> tuple[list[Event], set[str]]:
    """Every pending, firing and resolved transition of the members in `ALERTS` range series
    (queried at `step` up to `end`), and the keys of the members Prometheus had history of.
    A range query shows a transition at the first step of its grid after it (up to a step
    late: after the verdict its firing triggered); the `raw` samples of the same series, when
    given, say when the evaluation wrote it, and a period begins at the first of those within
    the step before.

    A series' samples run while the alert is in that state; a gap of more than 1.5 steps, or
    samples ending before `end`, ends the period (Prometheus drops the series then). A member
    is resolved when neither its pending nor its firing series goes on. A period that ended
    before the member's episode (before its first firing, less 1.5 steps: the pending that led
    to it stays) is an earlier episode of the same alert, not this incident's.
    """
    periods: dict[str, list[tuple[float, float, str]]] = {}
    named: dict[str, Member] = {}
    written = {frozenset(one.labels.items()): [ts for ts, _ in one.points] for one in raw}
    for one in series:
        member = member_of(one, members)
        if member is None or not one.points:
            continue
        named[member.key] = member
        state = one.labels.get("alertstate", "firing")
        times = written.get(frozenset(one.labels.items()), [])
        begin = last = one.points[0][0]
        for ts, _ in one.points[1:]:
            if ts - last > step * 1.5:
                periods.setdefault(member.key, []).append(
                    (_written_at(begin, times, step), last, state)
                )
                begin = ts
            last = ts
        periods.setdefault(member.key, []).append((_written_at(begin, times, step), last, state))
    events: list[Event] = []
    known: set[str] = set()
    for key, every_run in periods.items():
        member = named[key]
        runs = sorted(r for r in every_run if r[1] >= member.first_firing - step * 1.5)
        if not runs:
            continue
        known.add(key)
        what = _describe(member)
        for begin, _last, state in runs:
            events.append(Event(begin, state, f"{what} {state}", member.alert, "prometheus"))
        # Resolved: the last period (pending or firing) stopped before the window's end.
        final = max(last for _, last, _ in runs)
        if final < end - step * 1.5:
            # Between its last sample and the next evaluation: said as the next, yet never
            # after the incident closed (it closed because this had resolved).
            at = final + step if closed_at is None else min(final + step, closed_at)
            events.append(Event(at, "resolved", f"{what} resolved", member.alert, "prometheus"))
    return events, known


def history_gaps(
    incident: Incident, known: set[str], series: Sequence[Series], *, queried_from: float
) -> list[Event]:
    """What the timeline cannot show from Prometheus, said as events: a member without any
    `ALERTS` history (its firing and resolution then come from the incident's record), and
    history that starts after the member first fired (retention, or Prometheus restarted)."""
    events: list[Event] = []
    first_seen: dict[str, float] = {}
    for one in series:
        member = member_of(one, incident.members)
        if member is not None and one.points:
            ts = one.points[0][0]
            first_seen[member.key] = min(ts, first_seen.get(member.key, ts))
    for member in incident.members:
        what = _describe(member)
        if member.key not in known:
            events.append(Event(
                member.first_firing, "history",
                f"Prometheus holds no ALERTS history of {what} from {_iso(queried_from)}: "
                "its transitions below are the incident's record",
                member.alert, "incident",
            ))  # fmt: skip
            events.append(
                Event(member.first_firing, "firing", f"{what} firing", member.alert, "incident")
            )
            if member.resolved_at is not None:
                events.append(Event(
                    member.resolved_at, "resolved", f"{what} resolved", member.alert, "incident"
                ))  # fmt: skip
        elif first_seen.get(member.key, 0.0) > member.first_firing + 60:
            seen = first_seen[member.key]
            events.append(Event(
                member.first_firing, "history",
                f"{what} fired at {_iso(member.first_firing)} by the incident's record; "
                f"Prometheus' ALERTS history of it starts at {_iso(seen)}",
                member.alert, "incident",
            ))  # fmt: skip
    return events


def verdict_events(verdicts: Iterable[Verdict]) -> list[Event]:
    """An at-firing verdict (`oncall serve`) as one event: what its checklist found."""
    events: list[Event] = []
    for verdict in verdicts:
        ran = verdict.get("ran_at")
        if not isinstance(ran, int | float):
            continue
        failing = [
            f"{s.get('id')} {s.get('status')}" for s in failing_steps(verdict) if s.get("id")
        ]
        text = (
            f"checklist at firing of {verdict.get('alert')}: {verdict_findings(verdict)}"
            + (f" ({', '.join(failing)})" if failing else "")
            + f" — verdict {verdict.get('id')}"
        )
        events.append(Event(
            float(ran), "verdict", text, str(verdict.get("alert") or ""), "verdict",
            data={"verdict": verdict.get("id")},
        ))  # fmt: skip
    return events


def closing_event(incident: Incident) -> Event | None:
    if incident.closed_at is None:
        return None
    return Event(incident.closed_at, "closed", "incident closed: every alert resolved", "",
                 "incident")  # fmt: skip


def _iso(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


iso = _iso
