"""One incident's draft from what was read: the pure step between the service's reads and the
document (docs/architecture.md §3), so that tests hand in fixed inputs and get the draft the
commands print."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from oncall.audit.chain import VerifyReport
from oncall.audit.log import LogLine
from oncall.incidents.audit_events import audit_events, unvouched
from oncall.incidents.postmortem import Chain, Draft, Signal
from oncall.incidents.timeline import (
    Event,
    alert_transitions,
    closing_event,
    history_gaps,
    verdict_events,
)
from oncall.model.incidents import Incident
from oncall.model.metrics import Series
from oncall.model.verdicts import Verdict


@dataclass(frozen=True)
class Read:
    """What the service read for one incident. `report` is None when the audit log could not
    be verified (`audit_problem` says why); `start`, `end` and `step` are the range queries'."""

    incident: Incident
    start: float
    end: float
    step: float
    now: float
    alerts: Sequence[Series] = ()
    #: The same `ALERTS` series' samples as written (when each evaluation wrote them).
    alert_samples: Sequence[Series] = ()
    signals: Sequence[Signal] = ()
    verdicts: Sequence[Verdict] = ()
    lines: Sequence[LogLine] = ()
    report: VerifyReport | None = None
    audit_problem: str | None = None
    gaps: Sequence[str] = ()


def chain_of(
    report: VerifyReport | None, problem: str | None, bad: Sequence[tuple[int, str]]
) -> Chain:
    """The verification as the draft states it, with the cited records it cannot vouch for."""
    if report is None:
        return Chain("unavailable", note=problem or "no audit log", unvouched=tuple(bad))
    if not report.ok:
        return Chain("failed", report.count, tuple(report.problems), tuple(bad), report.anchor)
    if report.incomplete_check is not None:
        return Chain("local-only", report.count, (), tuple(bad), note=report.incomplete_check)
    return Chain("intact", report.count, (), tuple(bad), report.anchor)


def peak_event(signal: Signal) -> Event | None:
    """The chart's key value on the timeline: when the alert's value was at its worst."""
    if signal.worst_at is None or signal.worst is None:
        return None
    limit = ""
    if signal.threshold is not None:
        limit = f" (threshold {signal.threshold[0]} {signal.threshold[1]:g})"
    word = "lowest" if signal.low_is_bad else "peak"
    return Event(signal.worst_at, "chart", f"{signal.alert} {word}: {signal.worst:.4g}{limit}",
                 signal.alert, "prometheus")  # fmt: skip


def draft_of(read: Read) -> Draft:
    incident = read.incident
    transitions, known = alert_transitions(
        read.alerts, incident.members, step=read.step, end=read.end,
        closed_at=incident.closed_at, raw=read.alert_samples,
    )  # fmt: skip
    events = [*transitions, *history_gaps(incident, known, read.alerts, queried_from=read.start)]
    events += verdict_events(read.verdicts)
    events += [peak for signal in read.signals if (peak := peak_event(signal)) is not None]
    bad = unvouched(read.lines, read.report)
    events += audit_events(read.lines, incident, bad, now=read.now)
    closing = closing_event(incident)
    if closing is not None:
        events.append(closing)
    cited = sorted(
        {(e.seq, e.record) for e in events if e.source == "audit" and e.seq in bad and e.seq},
        key=lambda item: item[0] or 0,
    )
    chain = chain_of(read.report, read.audit_problem, [(s, r) for s, r in cited if s])
    return Draft(incident, tuple(events), tuple(read.verdicts), chain, tuple(read.signals),
                 tuple(read.gaps), read.now)  # fmt: skip
