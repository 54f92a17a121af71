"""An incident's audit records as timeline events, each with the record id that proves it.

Which records belong to an incident (docs/architecture.md §3, the write path): its notes
(`oncall note`, target kind `Incident`), the records naming one of its alerts, and the records
naming no alert made in its context while it was open (an `oncall remediate` from a terminal
answers no alert by name, yet it is what was done). Records naming another alert are left out.

Whether a record can be vouched for comes from the chain's verification (`VerifyReport`): a
record at a break, or one whose successor does not chain onto it (its content rewritten with
a fresh hash), or on a line that is not a record, is not vouched for; the draft marks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from oncall.audit.chain import VerifyReport
from oncall.audit.log import LogLine
from oncall.audit.records import NOTE_ACTION, Record, record_hash
from oncall.incidents.timeline import Event
from oncall.model.incidents import Incident

#: A record made this long before the incident opened still belongs to it (an ack of the
#: first pending alert); and as long after it closed (the verification of the last action).
GRACE_S = 300.0
_KINDS = {NOTE_ACTION: "note", "acknowledge": "ack", "silence": "silence",
          "silence-expire": "silence"}  # fmt: skip


def record_time(record: Record) -> float | None:
    ts = record.get("ts")
    if not isinstance(ts, str):
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def belongs(record: Record, incident: Incident, *, now: float) -> bool:
    target = record.get("target")
    if isinstance(target, dict) and target.get("kind") == "Incident":
        return target.get("name") == incident.id
    ts = record_time(record)
    end = incident.closed_at if incident.closed_at is not None else now
    if ts is None or not incident.opened_at - GRACE_S <= ts <= end + GRACE_S:
        return False
    context = record.get("context")
    if incident.context and isinstance(context, str) and context and context != incident.context:
        return False
    alert = record.get("alert")
    name = alert.get("name") if isinstance(alert, dict) else None
    if name:
        return name in {m.alert for m in incident.members}
    request = record.get("request")
    named = request.get("alert") if isinstance(request, dict) else None
    return not named or named in {m.alert for m in incident.members}


def unvouched(lines: Sequence[LogLine], report: VerifyReport | None) -> set[int]:
    """The seqs of the records the verification cannot vouch for. Without a report (the log
    could not be verified) none is vouched for: the caller marks every record."""
    if report is None:
        return {line.record["seq"] for line in lines if line.record and "seq" in line.record}
    bad = {item.seq for item in report.breaks if item.seq is not None}
    bad_lines = {item.line for item in report.breaks if item.line is not None}
    records = [line for line in lines if line.record is not None]
    nexts: list[LogLine | None] = [*records[1:], None]
    for line, after in zip(records, nexts[: len(records)], strict=True):
        record = line.record
        assert record is not None
        seq = record.get("seq")
        if not isinstance(seq, int):
            continue
        edited = record_hash(record) != record.get("hash")
        if (
            line.problem is not None
            or line.number in bad_lines
            or edited
            or (
                after is not None
                and after.record is not None
                and after.problem is None
                and after.record.get("prev") != record.get("hash")
            )
        ):
            bad.add(seq)
    return bad


def _numbers(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items() if not isinstance(v, dict | list))
    return "" if value is None else str(value)


def _target(record: Record) -> str:
    target = record.get("target")
    if not isinstance(target, dict):
        return "?"
    where = "/".join(str(target[k]) for k in ("namespace", "name") if target.get(k))
    return f"{target.get('kind', '?')} {where}".strip()


def describe(record: Record) -> tuple[str, str]:
    """(kind, text) of one record as the timeline says it."""
    action = str(record.get("action"))
    transition = str(record.get("transition"))
    kind = _KINDS.get(action, "action")
    detail = record.get("detail") if isinstance(record.get("detail"), dict) else {}
    assert isinstance(detail, dict)
    if action == NOTE_ACTION:
        return kind, f"note: {detail.get('text', '')}"
    text = f"{action} {_target(record)}: {transition}"
    if transition == "proposed":
        before, after = _numbers(detail.get("before")), _numbers(detail.get("after"))
        if before or after:
            text += f" (preview: {before or '?'} → {after or '?'})"
    outcome = record.get("outcome")
    if transition == "verified" and isinstance(outcome, dict):
        ok = outcome.get("ok")
        text += f" — {'verified' if ok else 'NOT verified'}: {outcome.get('detail', '')}"
    elif outcome not in (None, "", {}):
        text += f" — {outcome if isinstance(outcome, str) else _numbers(outcome)}"
    if record.get("guard"):
        text += f" (guard {record.get('guard')})"
    actor = record.get("actor")
    if isinstance(actor, dict) and actor.get("user"):
        text += f" by {actor.get('user')}"
    return kind, text


def audit_events(
    lines: Iterable[LogLine], incident: Incident, bad: set[int], *, now: float
) -> list[Event]:
    """The incident's records as events, marked with their id, seq and whether vouched for."""
    events: list[Event] = []
    for line in lines:
        record = line.record
        if record is None or (line.problem is not None and not isinstance(record.get("seq"), int)):
            continue
        ts = record_time(record)
        if ts is None or not belongs(record, incident, now=now):
            continue
        kind, text = describe(record)
        alert = record.get("alert")
        seq = record.get("seq") if isinstance(record.get("seq"), int) else None
        events.append(Event(
            ts, kind, text, str(alert.get("name") or "") if isinstance(alert, dict) else "",
            "audit", str(record.get("id") or ""), seq, seq not in bad,
            data={"action_id": record.get("action_id"), "transition": record.get("transition"),
                  "action": record.get("action")},
        ))  # fmt: skip
    return events
