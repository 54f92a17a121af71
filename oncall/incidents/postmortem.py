"""The postmortem draft of an incident: Markdown for people, JSON for tools.

In the shape of the widely used postmortem templates (summary, impact, timeline, findings,
actions, what was not checked), built only from checked evidence: the incident's record,
Prometheus' `ALERTS` history, the at-firing verdicts and the audit chain (docs/architecture.md
§3). Every line that comes from the audit log carries its record id, and the chain's
verification is said at the end, and at the top when it failed, with each record it cannot
vouch for marked, so that a reviewer can prove each line with `oncall audit show ID`.
Pure: `Draft` in, text out; the times are the only thing that varies between two runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from oncall.incidents.timeline import Event, iso, ordered
from oncall.model.incidents import Incident
from oncall.model.verdicts import Verdict

_BARS = "▁▂▃▄▅▆▇█"
NOT_VOUCHED = "⚠ NOT VOUCHED"


@dataclass(frozen=True)
class Signal:
    """One alert's value over the incident (a golden signal): its worst value and a chart."""

    alert: str
    expr: str
    points: tuple[float, ...]
    threshold: tuple[str, float] | None = None  # (">", 0.9) from the rule's comparison
    worst_at: float | None = None  # when the worst value was seen (epoch s)

    @property
    def low_is_bad(self) -> bool:
        return self.threshold is not None and self.threshold[0] in ("<", "<=")

    @property
    def worst(self) -> float | None:
        values = [v for v in self.points if not math.isnan(v)]
        if not values:
            return None
        return min(values) if self.low_is_bad else max(values)


@dataclass(frozen=True)
class Chain:
    """The audit chain's verification as the draft states it."""

    status: str  # intact | local-only | failed | unavailable
    count: int = 0
    problems: tuple[str, ...] = ()
    #: (seq, record id) of the incident's records it cannot vouch for.
    unvouched: tuple[tuple[int, str], ...] = ()
    anchor: str | None = None
    note: str | None = None  # why it is local-only or unavailable


@dataclass(frozen=True)
class Draft:
    incident: Incident
    events: tuple[Event, ...]
    verdicts: tuple[Verdict, ...]
    chain: Chain
    signals: tuple[Signal, ...] = ()
    #: What could not be read (a backend down): the draft is incomplete, and says so.
    gaps: tuple[str, ...] = ()
    now: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def sparkline(points: Sequence[float], width: int = 40) -> str:
    """The points as block characters, each column the highest of its share of points."""
    values = [v for v in points if not math.isnan(v)]
    if not values:
        return ""
    if len(points) > width:
        size = len(points) / width
        cols = [points[int(i * size) : max(int((i + 1) * size), int(i * size) + 1)]
                for i in range(width)]  # fmt: skip
        points = [max((v for v in c if not math.isnan(v)), default=math.nan) for c in cols]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(
        " " if math.isnan(v) else _BARS[min(7, int((v - low) / span * 7.999))] for v in points
    )


def _num(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _title(incident: Incident) -> str:
    if incident.cause is not None:
        return f"{incident.cause.step or 'alert group'} on {incident.cause.target}"
    return incident.members[0].alert if incident.members else incident.id


def _mark(event: Event) -> str:
    if event.source != "audit":
        return ""
    mark = f" [record {event.record}, seq {event.seq}]"
    return mark + (f" {NOT_VOUCHED}" if event.vouched is False else "")


def _timeline_line(event: Event) -> str:
    return f"- {iso(event.ts)} **{event.kind}** {event.text}{_mark(event)}"


def _step_line(verdict: Verdict, step: dict[str, Any], *, reason_first: bool = False) -> str:
    texts = [step.get("summary"), step.get("reason")]
    text = next((t for t in (reversed(texts) if reason_first else texts) if t), "")
    return (
        f"- **{verdict.get('alert')}** step `{step.get('id')}` {step.get('status')}: {text} "
        f"(verdict {verdict.get('id')})"
    )


def _evidence_line(item: dict[str, Any]) -> str:
    limit = item.get("threshold")
    side = "over" if item.get("bad", "above") == "above" else "under"
    unit = f" {item['unit']}" if item.get("unit") else ""
    bound = f" (bad {side} {limit})" if limit is not None else ""
    return f"  - {item.get('label')}: {item.get('value')}{unit}{bound}"


def _findings(verdicts: Sequence[Verdict]) -> tuple[list[str], list[str]]:
    """The failing evidence with its thresholds, and the steps that could not tell."""
    found: list[str] = []
    unchecked: list[str] = []
    for verdict in verdicts:
        for step in verdict.get("steps") or []:
            status = step.get("status")
            if status in ("fail", "error", "warn"):
                found.append(_step_line(verdict, step))
                evidence = [i for i in step.get("evidence") or [] if isinstance(i, dict)]
                found.extend(_evidence_line(item) for item in evidence)
            elif status in ("unknown", "skipped"):
                unchecked.append(_step_line(verdict, step, reason_first=True))
    return found, unchecked


def _actions(events: Sequence[Event]) -> list[str]:
    """One line per remediation (its action id): each transition with its record id."""
    lines: list[str] = []
    by_action: dict[str, list[Event]] = {}
    for event in events:
        if event.kind in ("action", "ack", "silence") and event.data.get("action_id"):
            by_action.setdefault(str(event.data["action_id"]), []).append(event)
    for action_id, steps in by_action.items():
        last = steps[-1]
        verified = next((e for e in steps if e.data.get("transition") == "verified"), None)
        result = (
            "verified" if verified is not None and "NOT verified" not in verified.text
            else "NOT verified" if verified is not None
            else f"ended {last.data.get('transition')}, not verified"
        )  # fmt: skip
        lines.append(f"- **{steps[0].data.get('action')}** (action {action_id}): {result}")
        lines.extend(f"  - {iso(e.ts)} {e.text}{_mark(e)}" for e in steps)
    return lines


def markdown(draft: Draft) -> str:
    """The draft as a Markdown document."""
    inc = draft.incident
    out: list[str] = [f"# Postmortem draft: {_title(inc)} ({inc.id})", ""]
    chain = draft.chain
    if chain.status == "failed":
        out += [f"> **⚠ The audit chain FAILED verification.** This draft cannot vouch for "
                f"{len(chain.unvouched)} of its records: "
                + (", ".join(f"seq {s} ({i})" for s, i in chain.unvouched) or "none of this "
                   "incident's records is at a break, yet the chain is broken")
                + f". Lines marked {NOT_VOUCHED} may have been edited.", ""]  # fmt: skip
    elif chain.status == "unavailable":
        out += [f"> **⚠ The audit log could not be verified** ({chain.note}): "
                f"no record in this draft is vouched for.", ""]  # fmt: skip
    if draft.gaps:
        out += ["> **Incomplete:** " + "; ".join(draft.gaps), ""]
    end = inc.closed_at
    status = "ongoing (still open)" if end is None else f"resolved at {iso(end)}"
    out += ["## Summary", "",
            f"- Incident: `{inc.id}`" + (f" (context {inc.context})" if inc.context else ""),
            f"- Status: {status}",
            f"- Opened: {iso(inc.opened_at)}; duration "
            f"{_duration((end if end is not None else draft.now) - inc.opened_at)}"
            + (" so far" if end is None else ""),
            f"- Cause: {inc.explanation or 'not grouped by a shared cause'}",
            f"- Alerts: {len(inc.members)}", ""]  # fmt: skip
    out += ["## Impact", "", "| Alert | Labels | First firing | Resolved | Firing for |",
            "|---|---|---|---|---|"]  # fmt: skip
    for m in inc.members:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(m.labels.items()) if k != "alertname")
        until = m.resolved_at if m.resolved_at is not None else (end or draft.now)
        out.append(f"| {_cell(m.alert)} | {_cell(labels)} | {iso(m.first_firing)} | "
                   f"{iso(m.resolved_at) if m.resolved_at is not None else 'ongoing'} | "
                   f"{_duration(until - m.first_firing)} |")  # fmt: skip
    out.append("")
    if draft.signals:
        out += ["Golden signals over the incident (worst value, chart from opening to end):", "",
                "| Alert | Worst | Threshold | Chart |", "|---|---|---|---|"]  # fmt: skip
        for s in draft.signals:
            limit = f"{s.threshold[0]} {_num(s.threshold[1])}" if s.threshold else "—"
            out.append(f"| {_cell(s.alert)} | {_num(s.worst)} | {_cell(limit)} | "
                       f"`{sparkline(s.points) or 'no data'}` |")  # fmt: skip
        out.append("")
    out += ["## Timeline", ""]
    out += [_timeline_line(e) for e in ordered(draft.events)] or ["- (no events)"]
    found, unchecked = _findings(draft.verdicts)
    out += ["", "## What the checklists found", ""]
    out += found or ["- No checklist verdict failed (or none was stored for these alerts)."]
    out += ["", "## What was done", ""]
    out += _actions(ordered(draft.events)) or ["- No remediation is on record."]
    out += ["", "## What was not checked", ""]
    out += unchecked or ["- Every checklist step ran and decided."]
    out += ["", "## Audit chain", ""]
    out += _chain_lines(chain, draft.events)
    return "\n".join(out) + "\n"


def _chain_lines(chain: Chain, events: Sequence[Event]) -> list[str]:
    cited = sorted({(e.seq, e.record) for e in events if e.source == "audit" and e.seq},
                   key=lambda item: item[0] or 0)  # fmt: skip
    lines = {
        "intact": f"- Verified: {chain.count} records, chain intact"
        + (f"; anchored on {chain.anchor}" if chain.anchor else ""),
        "local-only": f"- Local chain intact ({chain.count} records), not anchored: {chain.note}",
        "failed": f"- FAILED: the chain is broken ({chain.count} records read)",
        "unavailable": f"- Not verified: {chain.note}",
    }
    out = [lines.get(chain.status, f"- {chain.status}")]
    out += [f"  - {p}" for p in chain.problems]
    bad = {seq for seq, _ in chain.unvouched}
    if cited:
        out.append("- Records this draft cites (`oncall audit show ID`; `oncall audit verify`):")
        out += [f"  - seq {seq}: {rid}" + (f" {NOT_VOUCHED}" if seq in bad else "")
                for seq, rid in cited]  # fmt: skip
    return out


def to_json(draft: Draft) -> dict[str, Any]:
    """The draft as data: the incident, ordered events, findings, actions and the chain."""
    found, unchecked = _findings(draft.verdicts)
    return {
        "incident": draft.incident.to_json(),
        "status": "ongoing" if draft.incident.ongoing else "resolved",
        "events": [e.to_json() for e in ordered(draft.events)],
        "signals": [
            {"alert": s.alert, "expr": s.expr, "worst": s.worst,
             "threshold": list(s.threshold) if s.threshold else None,
             "sparkline": sparkline(s.points)}
            for s in draft.signals
        ],
        "findings": found,
        "not_checked": unchecked,
        "chain": {
            "status": draft.chain.status, "count": draft.chain.count,
            "problems": list(draft.chain.problems),
            "unvouched": [{"seq": s, "id": i} for s, i in draft.chain.unvouched],
            "anchor": draft.chain.anchor, "note": draft.chain.note,
        },
        "gaps": list(draft.gaps),
    }  # fmt: skip
