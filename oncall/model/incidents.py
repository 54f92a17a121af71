"""An incident: the alert instances one cause is behind, as the grouping decided, in plain data.

The grouping (`oncall.incidents`) makes them, Redis keeps them team-wide
(`oncall.backends.incidents`), the board, `oncall incident` and the postmortem draft read them.
Stored as JSON (`to_json` / `from_json`): versions of oncall that read an incident written by
another tolerate a missing field, as verdicts do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


def member_key(context: str, alert: str, labels: dict[str, str]) -> str:
    """Names one alert instance across refreshes and replicas: context, alert name and its
    labels (sorted), hashed so that any label text makes a plain Redis key."""
    text = "\0".join([context, alert, *(f"{k}={v}" for k, v in sorted(labels.items()))])
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:24]


@dataclass(frozen=True)
class Member:
    """One alert instance of an incident: when it first fired and, once over, resolved."""

    context: str
    alert: str
    labels: dict[str, str]
    first_firing: float  # epoch s
    resolved_at: float | None = None
    #: Alertmanager's groupKey when a notification named it ("" otherwise).
    group_key: str = ""

    @property
    def key(self) -> str:
        return member_key(self.context, self.alert, self.labels)


@dataclass(frozen=True)
class Cause:
    """What links the members: a checklist step failing on the same target in `count` of the
    `of` checklists that ran (or Alertmanager's group, `step` "" then)."""

    step: str  # the failing step's id, e.g. "kv_cache"; "" for an Alertmanager group
    target: str  # e.g. "Deployment ai/vllm", "node gpu-node-1", "Redis 127.0.0.1:6379"
    count: int
    of: int


@dataclass(frozen=True)
class Incident:
    """Alert instances linked by one cause; open from the first firing until every member has
    resolved for the configured time (`closed_at` set then)."""

    id: str
    opened_at: float
    members: tuple[Member, ...]
    cause: Cause | None = None
    #: The grouping's reason in words: "grouped: kv_cache fails on Deployment ai/vllm in 7 of
    #: 9 checklists", or why an alert stands alone.
    explanation: str = ""
    closed_at: float | None = None
    context: str = ""  # the context of its first member ("" with one context only)
    extra: dict[str, Any] = field(default_factory=dict)  # fields a newer version wrote

    @property
    def ongoing(self) -> bool:
        return self.closed_at is None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "id": self.id,
            "opened_at": self.opened_at,
            "closed_at": self.closed_at,
            "context": self.context,
            "explanation": self.explanation,
            "cause": None
            if self.cause is None
            else {
                "step": self.cause.step,
                "target": self.cause.target,
                "count": self.cause.count,
                "of": self.cause.of,
            },
            "members": [
                {
                    "context": m.context,
                    "alert": m.alert,
                    "labels": dict(m.labels),
                    "first_firing": m.first_firing,
                    "resolved_at": m.resolved_at,
                    "group_key": m.group_key,
                }
                for m in self.members
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Incident:
        """The incident of a stored JSON object; KeyError/TypeError/ValueError when it is not one
        (the store skips such values)."""
        cause = data.get("cause")
        known = {"id", "opened_at", "closed_at", "context", "explanation", "cause", "members"}
        return cls(
            id=str(data["id"]),
            opened_at=float(data["opened_at"]),
            closed_at=None if data.get("closed_at") is None else float(data["closed_at"]),
            context=str(data.get("context") or ""),
            explanation=str(data.get("explanation") or ""),
            cause=None
            if not isinstance(cause, dict)
            else Cause(
                step=str(cause.get("step") or ""),
                target=str(cause["target"]),
                count=int(cause.get("count") or 0),
                of=int(cause.get("of") or 0),
            ),
            members=tuple(
                Member(
                    context=str(m.get("context") or ""),
                    alert=str(m["alert"]),
                    labels={str(k): str(v) for k, v in dict(m.get("labels") or {}).items()},
                    first_firing=float(m["first_firing"]),
                    resolved_at=None if m.get("resolved_at") is None else float(m["resolved_at"]),
                    group_key=str(m.get("group_key") or ""),
                )
                for m in data["members"]
            ),
            extra={k: v for k, v in data.items() if k not in known},
        )


def incident_id(first: Member) -> str:
    """A short stable id from the first member and when it fired: `inc-` + 10 hex digits, the
    same on every replica that groups the same firing."""
    text = f"{first.key}\0{first.first_firing:.3f}"
    return "inc-" + hashlib.sha256(text.encode()).hexdigest()[:10]
