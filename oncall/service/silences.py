"""The silences Alertmanager keeps, for `oncall silence list` (one GET /api/v2/silences).

Making and expiring silences are actions (`silence`, `silence-expire`): they go through the
remediation door (oncall/service/remediation.py) like every change.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from oncall.backends import from_settings
from oncall.errors import UsageError
from oncall.model.alertmanager import Silence
from oncall.settings import Settings


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def silence_record(s: Silence) -> dict[str, Any]:
    """One silence as `oncall silence list -o json` prints it."""
    return {
        "id": s.id, "state": s.state, "matchers": s.matchers_text(), "createdBy": s.created_by,
        "comment": s.comment, "startsAt": _iso(s.starts_at), "endsAt": _iso(s.ends_at),
    }  # fmt: skip


async def list_silences(settings: Settings, *, expired: bool = False) -> list[dict[str, Any]]:
    """Active and pending silences (expired ones too with `expired`), the soonest end first;
    raises BackendError (exit 3) when Alertmanager cannot be asked."""
    client = from_settings.alertmanager_client(settings.alertmanager)
    if client is None:
        raise UsageError("no Alertmanager is configured: set alertmanager.url")
    async with client:
        found = await client.silences()
    kept = [s for s in found if expired or s.state != "expired"]
    return [silence_record(s) for s in sorted(kept, key=lambda s: (s.state, s.ends_at))]
