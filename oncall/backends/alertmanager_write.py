"""Alertmanager API v2, the write side: create and expire silences, and what a silence would
match. Only `remediation/` may import this module (import-linter), like the other writers.

    POST   /api/v2/silences              → {"silenceID": "<uuid>"}      (amtool silence add)
    DELETE /api/v2/silence/{silenceID}   → 200, empty body              (amtool silence expire)
    GET    /api/v2/silence/{silenceID}   → the silence, `status.state` active|pending|expired
    GET    /api/v2/alerts?filter=…       → the alerts those matchers select  (amtool alert query)

Shapes from Alertmanager's own `api/v2/openapi.yaml` (postableSilence, gettableSilence,
gettableAlerts) and checked against the Debian `prometheus-alertmanager` 0.25 the tests run.
Alertmanager answers a bad request with a bare JSON string (`"silence invalid: at least one
matcher must not match the empty string"`, 400) or a go-swagger error object
(`{"code": 601, "message": …}`, 422); both become the error's detail. Anything that is not
JSON (an SSO proxy's login page) is "bad payload"; 401/403 is "auth".

Nothing here asks for confirmation or writes audit records: the remediation executor does both
before it calls in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from oncall.backends.http import HttpBackend, status_reason
from oncall.model.matchers import Matcher

BACKEND = "alertmanager"
#: At most this many characters of an error body are quoted in an error.
SNIPPET_CHARS = 160


def api_matcher(m: Matcher) -> dict[str, Any]:
    """A Prometheus matcher as API v2 writes it: `{name, value, isRegex, isEqual}`."""
    return {
        "name": m.name,
        "value": m.value,
        "isRegex": m.op in ("=~", "!~"),
        "isEqual": m.op in ("=", "=~"),
    }


def matcher_text(raw: dict[str, Any]) -> str:
    """An API v2 matcher back as Prometheus writes it: `pod=~"vllm-.*"`."""
    regex, equal = bool(raw.get("isRegex")), raw.get("isEqual", True) is not False
    op = {(False, True): "=", (False, False): "!=", (True, True): "=~", (True, False): "!~"}
    value = str(raw.get("value", "")).replace("\\", "\\\\").replace('"', '\\"')
    return f'{raw.get("name", "")}{op[(regex, equal)]}"{value}"'


def _snippet(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, str):
        text = body
    elif isinstance(body, dict) and "message" in body:
        text = str(body["message"])
    else:
        kind = response.headers.get("content-type", "no content type")
        text = f"({kind}) {response.text}"
    return " ".join(text.split())[:SNIPPET_CHARS]


class AlertmanagerWriter(HttpBackend):
    """Silences through one Alertmanager's API v2; use as `async with AlertmanagerWriter(…)`."""

    BACKEND = BACKEND

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        bearer_token: str | None = None,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        sent = {"Accept": "application/json", **(headers or {})}
        if bearer_token:
            sent["Authorization"] = f"Bearer {bearer_token}"
        super().__init__(url, timeout=timeout, headers=sent, transport=transport)

    async def _call(self, request: Any, *, want_json: bool = True) -> Any:
        response = await self._exchange(request)
        status = response.status_code
        if status >= 400:
            detail = f"http {status} {response.reason_phrase}: {_snippet(response)}"
            raise self._error(status_reason(status), detail, http_status=status)
        if not want_json:
            return None
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._error(
                "bad payload", f"not an Alertmanager API answer: {_snippet(response)}"
            ) from exc

    async def matching_alerts(self, matchers: Sequence[Matcher]) -> list[dict[str, Any]]:
        """The alerts Alertmanager holds now that `matchers` select, silenced and inhibited
        ones included (`amtool alert query MATCHERS`). Alertmanager matches, with its RE2."""
        params = httpx.QueryParams([("filter", str(m)) for m in matchers])
        body = await self._call(self._http.get("/api/v2/alerts", params=params))
        if not isinstance(body, list) or not all(isinstance(a, dict) for a in body):
            raise self._error("bad payload", "GET /api/v2/alerts did not return a list of alerts")
        return body

    async def create_silence(self, silence: dict[str, Any]) -> str:
        """POST a postableSilence; the new silence's id."""
        body = await self._call(self._http.post("/api/v2/silences", json=silence))
        silence_id = body.get("silenceID") if isinstance(body, dict) else None
        if not isinstance(silence_id, str) or not silence_id:
            raise self._error("bad payload", "POST /api/v2/silences returned no silenceID")
        return silence_id

    async def silence(self, silence_id: str) -> dict[str, Any]:
        """GET one silence (`status.state`: active, pending or expired)."""
        body = await self._call(self._http.get(f"/api/v2/silence/{silence_id}"))
        if not isinstance(body, dict) or not isinstance(body.get("status"), dict):
            raise self._error("bad payload", f"GET /api/v2/silence/{silence_id}: not a silence")
        return body

    async def expire_silence(self, silence_id: str) -> None:
        """DELETE one silence: Alertmanager sets its end to now (it stays listed, expired)."""
        await self._call(self._http.delete(f"/api/v2/silence/{silence_id}"), want_json=False)
