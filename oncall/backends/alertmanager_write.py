"""Alertmanager API v2, the write side: create and expire silences. Only `remediation/` may
import this module (import-linter), like the other writers.

    POST   /api/v2/silences              → {"silenceID": "<uuid>"}      (amtool silence add)
    DELETE /api/v2/silence/{silenceID}   → 200, empty body              (amtool silence expire)
    GET    /api/v2/silence/{silenceID}   → the silence, `status.state` active|pending|expired

What a silence would match is the read client's `alerts(matchers=…)` (`GET /api/v2/alerts
?filter=…`, amtool alert query): this client is that one (oncall/backends/alertmanager.py)
plus the writes, with its error reasons (401/403 "auth", a login page "bad payload", and
Alertmanager's own messages — `"silence invalid: at least one matcher must not match the
empty string"` — quoted). Shapes from Alertmanager's `api/v2/openapi.yaml` (postableSilence,
gettableSilence), checked against the Debian `prometheus-alertmanager` 0.25 the tests run.

Nothing here asks for confirmation or writes audit records: the remediation executor does both
before it calls in.
"""

from __future__ import annotations

from typing import Any

from oncall.backends.alertmanager import AlertmanagerClient
from oncall.model.matchers import Matcher


def api_matcher(m: Matcher) -> dict[str, Any]:
    """A Prometheus matcher as API v2 writes it: `{name, value, isRegex, isEqual}`."""
    return {
        "name": m.name,
        "value": m.value,
        "isRegex": m.op in ("=~", "!~"),
        "isEqual": m.op in ("=", "=~"),
    }


class AlertmanagerWriter(AlertmanagerClient):
    """The read client plus silences' writes; use as `async with AlertmanagerWriter(…)`."""

    async def create_silence(self, silence: dict[str, Any]) -> str:
        """POST a postableSilence; the new silence's id."""
        body = await self.request("POST", "/api/v2/silences", body=silence)
        silence_id = body.get("silenceID") if isinstance(body, dict) else None
        if not isinstance(silence_id, str) or not silence_id:
            raise self._error("bad payload", "POST /api/v2/silences returned no silenceID")
        return silence_id

    async def silence(self, silence_id: str) -> dict[str, Any]:
        """GET one silence as Alertmanager returns it (`status.state`: active, pending,
        expired); the id is a UUID (checked by the action's parameters)."""
        body = await self.request("GET", f"/api/v2/silence/{silence_id}")
        if not isinstance(body, dict) or not isinstance(body.get("status"), dict):
            raise self._error("bad payload", f"GET /api/v2/silence/{silence_id}: not a silence")
        return body

    async def expire_silence(self, silence_id: str) -> None:
        """DELETE one silence: Alertmanager sets its end to now (it stays listed, expired)."""
        await self.request("DELETE", f"/api/v2/silence/{silence_id}", expect_json=False)
