"""A verdict: what a firing's checklist found when it fired (`oncall serve`), as plain JSON.

The serve part writes them (oncall/service/verdicts.py builds them), Redis keeps them
(oncall/backends/verdicts.py), the board, the incident screen and `oncall verdicts` read them.
A verdict is a JSON object, not a class: it is stored, listed and shown as it was written,
by versions of oncall that may not share one class. The functions here read the few fields
every reader needs, tolerating a field missing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

#: A verdict's `status`: its checklist ran (`checked`), or why not.
CHECKED = "checked"
OVERLOADED = "not checked: overloaded"
RUNBOOK_BROKEN = "not checked: runbook broken"

Verdict = dict[str, Any]


@dataclass(frozen=True)
class Firing:
    """One alert instance of an Alertmanager notification, as the checklist needs it."""

    context: str
    alert: str
    fingerprint: str
    starts_at: str
    status: str  # firing | resolved
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    ends_at: str = ""
    generator_url: str = ""
    received_at: float = 0.0  # epoch s, when serve received the notification
    #: Alertmanager's groupKey of the notification that carried it (incidents group by it).
    group_key: str = ""

    @property
    def key(self) -> str:
        """Names this firing (not its repeats): context + fingerprint + startsAt, hashed so
        that any label text makes a plain Redis key."""
        text = "\0".join((self.context, self.fingerprint, self.starts_at))
        return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


def step_counts(verdict: Verdict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for step in verdict.get("steps") or []:
        status = str(step.get("status", "unknown"))
        counts[status] = counts.get(status, 0) + 1
    return counts


def verdict_findings(verdict: Verdict) -> str:
    """'2 fail · 1 unknown', 'all ok', or why it was not checked."""
    if verdict.get("status") != CHECKED:
        return str(verdict.get("status") or "not checked")
    counts = step_counts(verdict)
    parts = [f"{counts[s]} {s}" for s in ("fail", "error", "unknown", "warn") if counts.get(s)]
    return " · ".join(parts) if parts else "all ok"


def failing_steps(verdict: Verdict) -> list[Verdict]:
    """The steps that failed or could not tell (fail, error, unknown), in run order."""
    return [
        s for s in verdict.get("steps") or [] if s.get("status") in ("fail", "error", "unknown")
    ]


def step_of(verdict: Verdict, step_id: str) -> Verdict | None:
    return next((s for s in verdict.get("steps") or [] if s.get("id") == step_id), None)


def open_command(verdict: Verdict) -> str:
    """How to open the alert in the app: `oncall --context C` (the board shows the alert)."""
    context = verdict.get("context") or "default"
    return f"oncall --context {context}  (alert {verdict.get('alert')})"


def summary_lines(verdict: Verdict) -> list[str]:
    """The notification's text: the alert, when it fired, failing steps, proposals, how to
    open it. Proposals are words: nothing in a chat message can act."""
    labels = verdict.get("labels") or {}
    where = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "alertname")
    lines = [
        f"{verdict.get('alert')} fired at {verdict.get('starts_at')}"
        + (f" ({where})" if where else ""),
        f"checklist at firing: {verdict_findings(verdict)} (runbook {verdict.get('runbook')})",
    ]
    for step in failing_steps(verdict):
        text = step.get("summary") or step.get("reason") or ""
        lines.append(f"  {str(step.get('status')).upper()} {step.get('id')}: {text}")
    for proposal in verdict.get("proposals") or []:
        lines.append(f"  proposed: {proposal.get('text')}")
    lines.append(
        f"open: {open_command(verdict)}; verdict: oncall verdicts show {verdict.get('id')}"
    )
    return lines
