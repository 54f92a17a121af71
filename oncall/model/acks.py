"""An acknowledgement of a firing alert: "I am on it", as every operator's board shows it.

Kept team-wide in Redis (oncall/backends/acks.py), made through the `acknowledge` action
(oncall/remediation/actions/acknowledge.py, audited like every action). It silences nothing:
Alertmanager still notifies; the board only tells the others that someone has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Ack:
    """Who acknowledged the alert, when (epoch seconds), until when, and their note."""

    alert: str
    by: str
    at: float
    until: float
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"by": self.by, "at": self.at, "until": self.until, "note": self.note}


@dataclass(frozen=True)
class AckBook:
    """The acknowledgements read at one refresh; `error` says why they are unknown."""

    acks: dict[str, Ack]
    error: str | None = None

    def cell(self, alert: str) -> str:
        """The board's and `oncall alerts`' ack cell: 'alice', 'unknown (…)', or ''."""
        if self.error is not None:
            return "unknown"
        ack = self.acks.get(alert)
        return ack.by if ack is not None else ""
