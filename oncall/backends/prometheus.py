"""Prometheus HTTP API client (httpx, async): queries, rules, alerts, targets.

Equivalent of `curl -s 'http://PROM/api/v1/query?query=up'`. Every call is bounded by the
client's timeout as a whole (connect, send, wait, read), and every failure becomes a
`BackendError` with reason "refused", "timeout", "auth" (401/403), "http <status>",
"bad payload" (anything that is not the API's JSON: an SSO proxy's HTML login page) or
"query error". Error bodies are quoted only redacted (BackendError redacts its detail).

Thanos Query and Mimir serve the same API (fixtures/thanos, fixtures/mimir say from which
upstream files): the URL may carry a path prefix (Mimir's `/prometheus`), which every API
path is joined below (httpx keeps a base URL's path); `headers` are sent with every request
(Mimir's tenant, `X-Scope-OrgID`) and never shown. A `warnings` list beside `data` (Thanos
with a store down and partial responses on, Prometheus' own query warnings) is not an error:
the answer is used and its warnings are kept in `warnings` for the caller to show.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from oncall.backends.answer_size import AnswerTooLarge
from oncall.backends.http import HttpBackend, decoded_in_thread, status_reason
from oncall.model.metrics import Sample, Series

BACKEND = "prometheus"
POST_OVER_CHARS = 2000
#: At most this many distinct warnings are kept between two `take_warnings` calls.
MAX_WARNINGS = 20


def _decoded(content: bytes, loads: Callable[[bytes], Any]) -> Any:
    """The JSON of an answer, None when it is not JSON (an SSO proxy's HTML page)."""
    try:
        return loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _switch_point(fields: dict[str, Any]) -> dict[str, Any]:
    """`json.loads`' object hook: each object as decoded. Being a Python function, each call
    is a point where the decoding thread hands the interpreter lock to the event loop's
    thread when that asked for it (CPython checks at every function entry), so the C decoder
    never holds it for long: every alert, label set and rule of `/api/v1/rules` is one object.
    """
    return fields


def _rules(content: bytes) -> Any:
    # One C decode with a switch point per object: the same value as `json.loads`, and a
    # fifth of the CPU of decoding in slices from Python (a walker json_slices had; 135 vs
    # 29 ms for 1.7 MB; 14.5 vs 1.3 ms for 200 rules), which competed with the loop for the
    # interpreter lock all that time.
    return json.loads(content, object_hook=_switch_point)


def _number(raw: object) -> float:
    """Prometheus sends sample values as strings ("0.94", "NaN", "+Inf")."""
    if not isinstance(raw, str | int | float):
        raise ValueError(f"sample value {raw!r} is not a number")
    return float(raw)


class PrometheusClient(HttpBackend):
    """One connection pool to one Prometheus; use as `async with PrometheusClient(...) as p`."""

    BACKEND = BACKEND

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        bearer_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        sent = {"Accept": "application/json", **(headers or {})}
        if bearer_token:
            sent["Authorization"] = f"Bearer {bearer_token}"
        super().__init__(url, timeout=timeout, headers=sent, transport=transport)
        self.requests = 0  # how many API requests this client made (benchmarks count them)
        #: The `warnings` of the answers since the last `take_warnings`, each once, in order.
        self.warnings: dict[str, None] = {}

    def take_warnings(self) -> list[str]:
        """The warnings the server sent since the last call (Thanos: a store that did not
        answer), and forget them."""
        taken, self.warnings = list(self.warnings), {}
        return taken

    def _keep_warnings(self, body: dict[str, Any]) -> None:
        raw = body.get("warnings")
        for warning in raw if isinstance(raw, list) else []:
            if len(self.warnings) < MAX_WARNINGS:
                self.warnings[str(warning)[:300]] = None

    async def _get(
        self, path: str, params: dict[str, Any] | None = None, *, post: bool = False
    ) -> Any:
        """GET (or POST, form-encoded) an API path and return its `data`, or raise BackendError."""
        response = await self._send(path, params, post=post)
        return self._data(response, _decoded(response.content, json.loads))

    async def _send(
        self, path: str, params: dict[str, Any] | None = None, *, post: bool = False
    ) -> httpx.Response:
        self.requests += 1
        request = (
            self._http.post(path, data=params) if post else self._http.get(path, params=params)
        )
        return await self._exchange(request)

    def _data(self, response: httpx.Response, body: Any) -> Any:
        """The `data` of a decoded answer (`body`: None when it was not JSON), or BackendError."""
        if isinstance(body, dict) and body.get("status") == "error":
            # 400 bad_data, 422 execution, 503 timeout: Prometheus explains itself.
            kind = body.get("errorType", "error")
            reason = "query error" if response.status_code in (200, 400, 422) else None
            detail = f"{kind}: {body.get('error', '')}"
            status = response.status_code
            raise self._error(reason or status_reason(status), detail, http_status=status)
        if response.status_code >= 400:
            status = response.status_code
            detail = f"http {status} {response.reason_phrase}"
            snippet = response.text[:120].replace("\n", " ").strip()
            raise self._error(
                status_reason(status), f"{detail}: {snippet}" if snippet else detail,
                http_status=status,
            )  # fmt: skip
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            snippet = response.text[:80].replace("\n", " ")
            raise self._error("bad payload", f"not a Prometheus API response: {snippet!r}")
        self._keep_warnings(body)
        return body["data"]

    async def query(self, expr: str, *, at: float | None = None) -> list[Sample]:
        """Instant query (`/api/v1/query`); a scalar result is one sample without labels."""
        params: dict[str, Any] = {"query": expr, "timeout": f"{self.timeout:g}s"}
        if at is not None:
            params["time"] = at
        # Long expressions (batched alert rules) go in a form body, not the URL.
        data = await self._get("/api/v1/query", params, post=len(expr) > POST_OVER_CHARS)
        try:
            kind, result = data["resultType"], data["result"]
            if kind == "vector":
                return [
                    Sample(dict(item["metric"]), float(item["value"][0]), _number(item["value"][1]))
                    for item in result
                ]
            if kind == "scalar":
                return [Sample({}, float(result[0]), _number(result[1]))]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise self._error("bad payload", f"malformed query result: {exc}") from exc
        raise self._error("query error", f"expected an instant vector, got a {kind}")

    async def query_range(
        self, expr: str, *, start: float, end: float, step: float
    ) -> list[Series]:
        """Range query (`/api/v1/query_range`), step in seconds."""
        params = {
            "query": expr,
            "start": start,
            "end": end,
            "step": step,
            "timeout": f"{self.timeout:g}s",
        }
        data = await self._get("/api/v1/query_range", params)
        return self._matrix(data, "range query")

    def _matrix(self, data: Any, what: str) -> list[Series]:
        """The series of a matrix result, or BackendError ("bad payload")."""
        try:
            if data["resultType"] != "matrix":
                raise self._error("bad payload", f"{what} gave a {data['resultType']}")
            return [
                Series(
                    dict(item["metric"]),
                    [(float(ts), _number(value)) for ts, value in item["values"]],
                )
                for item in data["result"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise self._error("bad payload", f"malformed range result: {exc}") from exc

    async def raw_samples(self, selector: str, *, window_s: float, at: float) -> list[Series]:
        """Every sample of `selector` in the `window_s` seconds up to `at`, at the times it was
        written (an instant query of `selector[window]`): where a range query's step would
        round a transition to its grid, these say when an evaluation wrote it."""
        expr = f"{selector}[{max(1, math.ceil(window_s))}s]"
        params: dict[str, Any] = {"query": expr, "time": at, "timeout": f"{self.timeout:g}s"}
        data = await self._get("/api/v1/query", params, post=len(expr) > POST_OVER_CHARS)
        return self._matrix(data, "a range selector")

    async def rules(self, *, kind: str | None = None) -> list[dict[str, Any]]:
        """Rule groups with their rules and alert states (`/api/v1/rules`), one request.

        With thousands of active alerts the answer is megabytes: it is received on the event
        loop but decoded in a worker thread (`decode_rules`), so that the loop keeps running
        meanwhile. The board does not come here: its refresh stage receives the answer with
        `rules_response` and decodes it in its own worker (docs/architecture.md, "The alert
        route")."""
        return await asyncio.to_thread(self.decode_rules, await self.rules_response(kind=kind))

    async def rules_response(self, *, kind: str | None = None) -> httpx.Response:
        """The `/api/v1/rules` answer as received, still encoded (gzip at fleet size): what
        `decode_rules` takes, in whichever thread the caller decodes in."""
        params = {"type": kind} if kind else None
        self.requests += 1
        request = self._http.build_request("GET", "/api/v1/rules", params=params)
        return await self._exchange_encoded(request)

    def decode_rules(self, response: httpx.Response) -> list[dict[str, Any]]:
        """The rule groups of a `rules_response`, inflated and decoded (blocking: call it in a
        worker thread), or BackendError as `rules` raises it. Its only effect beyond the value
        is the answer's `warnings`, kept for `take_warnings`."""
        try:
            decoded_in_thread(response)
        except AnswerTooLarge as exc:  # "answer larger than 64 MiB", as `exchange` says it
            raise self._error("bad payload", str(exc)) from exc
        except httpx.DecodingError as exc:
            raise self._error("bad payload", f"{type(exc).__name__}: {exc}") from exc
        data = self._data(response, _decoded(response.content, _rules))
        groups = data.get("groups") if isinstance(data, dict) else None
        if not isinstance(groups, list):
            raise self._error("bad payload", "rules response has no groups list")
        return groups

    async def alerts(self) -> list[dict[str, Any]]:
        """Active (pending and firing) alerts (`/api/v1/alerts`)."""
        data = await self._get("/api/v1/alerts")
        alerts = data.get("alerts") if isinstance(data, dict) else None
        if not isinstance(alerts, list):
            raise self._error("bad payload", "alerts response has no alerts list")
        return alerts

    async def targets(self) -> list[dict[str, Any]]:
        """Active scrape targets with health and last error (`/api/v1/targets`)."""
        data = await self._get("/api/v1/targets", {"state": "active"})
        targets = data.get("activeTargets") if isinstance(data, dict) else None
        if not isinstance(targets, list):
            raise self._error("bad payload", "targets response has no activeTargets list")
        return targets
