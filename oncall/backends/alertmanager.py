"""Alertmanager API v2 client (httpx, async): the alerts it holds and its silences.

Equivalent of `curl -s http://AM/api/v2/alerts` and `.../api/v2/silences` (what `amtool alert
query` and `amtool silence query` ask). Every call is bounded by the client's timeout as a
whole, and every failure becomes a `BackendError` as for Prometheus: "refused", "timeout",
"auth" (401/403), "http <status>", or "bad payload" (not the API's JSON: an SSO proxy's HTML
login page, or JSON of another shape). Shapes: prometheus/alertmanager `api/v2/openapi.yaml`
(`gettableAlert`, `alertStatus`, `gettableSilence`), recorded in fixtures/alertmanager/.

`request` is the one exchange, also for the write side (POST /api/v2/silences, DELETE
/api/v2/silence/{id}), which lives with the actions.

Time-interval muting (Alertmanager >= 0.28, `mute_time_intervals`/`active_time_intervals`) is
not on `/api/v2/alerts`: there a muted alert reads "active". Only `/api/v2/alerts/groups` says
it, per route (`status.mutedBy`: the intervals' names, state "suppressed"), so while any alert
reads active the groups are read too, and an alert muted on every route that holds it is
returned muted (`fixtures/alertmanager/alert_groups_v2_muted.json`). Older Alertmanagers (the
version `/api/v2/status` gives, asked once) have no mutedBy: one request per read, as before.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx

from oncall.backends.http import HttpBackend, status_reason
from oncall.backends.json_slices import array_items
from oncall.errors import BackendError
from oncall.model.alertmanager import AmAlert, AmStateName, Silence, SilenceMatcher

BACKEND = "alertmanager"
T = TypeVar("T")
_AM_STATES: frozenset[str] = frozenset({"unprocessed", "active", "suppressed"})
_SILENCE_STATES: frozenset[str] = frozenset({"expired", "active", "pending"})
#: The first release whose alert groups carry `mutedBy` (time-interval muting).
MUTED_BY_SINCE = (0, 28)
#: What `scan_alerts` looks for in an answer's bytes (JSON whitespace allowed where it may be).
_ARRAY = re.compile(rb"[ \t\n\r]*\[")
_ACTIVE = re.compile(rb'"state"[ \t\n\r]*:[ \t\n\r]*"active"')
#: (No leading quote: a pattern starting with the rarer "s" is found about 40 % faster.)
_SILENCED_BY = re.compile(rb'silencedBy"[ \t\n\r]*:[ \t\n\r]*\[[ \t\n\r]*("[^\]]*)\]')
#: The first bytes of an answer not in UTF-8 (a byte order mark, UTF-16/32's zero bytes).
_NOT_UTF8 = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")


@dataclasses.dataclass(frozen=True)
class AlertsScan:
    """What a read must know of an `/api/v2/alerts` answer before it is decoded (whether to
    ask for the groups and the silences), read off its bytes: a superset of what the decoded
    alerts say, so a request the decoded alerts would call for is never left out (at worst
    one more is made: a label `state="active"`).

    `active`: an alert may read active (a time interval may be muting it; `may_be_muted`).
    `silence_ids`: the ids of the silences alerts name (`silencedBy`); None: cannot tell."""

    active: bool
    silence_ids: frozenset[str] | None


def scan_alerts(response: httpx.Response) -> AlertsScan | None:
    """An `alerts_response`'s `AlertsScan`, without decoding it (a board's read runs on the
    event loop; the answer is decoded in the refresh's worker): regular expressions over the
    bytes, 1-2 ms at 5,000 alerts (2.4 MB). None when it is not a JSON array (a login
    page, an error object): its decoding fails, so nothing more is worth asking for."""
    content = response.content
    if content.startswith(_NOT_UTF8) or b"\x00" in content[:4]:
        return AlertsScan(active=True, silence_ids=None)  # not what the patterns read
    if _ARRAY.match(content) is None:
        return None
    active = _ACTIVE.search(content) is not None
    named = _SILENCED_BY.findall(content)
    if not named:
        return AlertsScan(active, frozenset())
    try:
        ids = json.loads(b"[" + b",".join(named) + b"]")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return AlertsScan(active, None)  # an id with "]" in it: the decoded alerts will tell
    if not all(isinstance(i, str) for i in ids):
        return AlertsScan(active, None)
    return AlertsScan(active, frozenset(ids))


def reports_muting(version: object) -> bool:
    """Whether an Alertmanager of this `versionInfo.version` ("0.28.1", "v0.27.0") reports
    time-interval muting; an unreadable version (a fork, a proxy) is taken to."""
    numbers = str(version).lstrip("v").split("-")[0].split(".")[:2]
    try:
        return tuple(int(n) for n in numbers) >= MUTED_BY_SINCE
    except ValueError:
        return True


def parse_time(raw: object) -> float | None:
    """An RFC 3339 time as unix seconds ('2026-12-01T12:25:49.666Z'); Go's zero time and
    an absent value are None. More than microsecond digits (another server's nanoseconds)
    are cut, which `fromisoformat` would refuse."""
    if not isinstance(raw, str) or not raw or raw.startswith("0001-01-01"):
        return None
    text = raw.replace("Z", "+00:00").replace("z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}" if digits else head + rest
    return datetime.fromisoformat(text).timestamp()


def _strings(raw: object, what: str) -> dict[str, str]:
    # A loop, not all(genexpr): this runs for every label of 5,000 alerts a refresh.
    if type(raw) is not dict:
        raise ValueError(f"{what} is not a mapping")
    for key, value in raw.items():
        if type(key) is not str or type(value) is not str:
            raise ValueError(f"{what} is not a mapping of strings")
    return raw


def _ids(raw: object, what: str) -> tuple[str, ...]:
    if not raw:
        return ()  # the usual case: nothing silences or inhibits it
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise ValueError(f"{what} is not a list of strings")
    return tuple(raw)


def parse_alert(raw: Any, previous: Mapping[str, AmAlert] | None = None) -> AmAlert:
    """One `gettableAlert`; ValueError/KeyError/TypeError when it is not one.

    `previous`: the alerts of the last read by fingerprint. An alert read again unchanged
    (same labels, state, silences and inhibitors) is that same object, not a new one: a
    steady board's 5,000 alerts then allocate nothing that outlives the read. Kept for what
    it measures: the worker's parse of 5,000 alerts, collector on, 75 -> 59 ms of CPU (the
    young collection ending the pause has no new alerts to walk)."""
    status = raw["status"]
    state = status["state"]
    if state not in _AM_STATES:
        raise ValueError(f"alert state {state!r}")
    am_state: AmStateName = state
    fingerprint = str(raw["fingerprint"])
    labels = _strings(raw["labels"], "labels")
    silenced_by = _ids(status.get("silencedBy"), "silencedBy")
    inhibited_by = _ids(status.get("inhibitedBy"), "inhibitedBy")
    seen = previous.get(fingerprint) if previous else None
    if (
        seen is not None
        and seen.state == am_state
        and seen.silenced_by == silenced_by
        and seen.inhibited_by == inhibited_by
        and seen.labels == labels
    ):
        return seen
    return AmAlert(
        fingerprint=fingerprint,
        labels=labels,
        state=am_state,
        silenced_by=silenced_by,
        inhibited_by=inhibited_by,
    )


def group_mutes(raw: Any) -> list[tuple[str, tuple[str, ...]]]:
    """(fingerprint, mutedBy) of each alert of one `alertGroup`; () before Alertmanager 0.28."""
    return [
        (str(alert["fingerprint"]), _ids((alert.get("status") or {}).get("mutedBy"), "mutedBy"))
        for alert in raw["alerts"]
    ]


def muted_alerts(groups: Iterable[list[tuple[str, tuple[str, ...]]]]) -> dict[str, tuple[str, ...]]:
    """Fingerprint -> the time intervals muting it, for alerts muted in every group that holds
    them: a route that still notifies (another receiver, `continue: true`) means not muted."""
    muted: dict[str, tuple[str, ...]] = {}
    notified: set[str] = set()
    for group in groups:
        for fingerprint, by in group:
            if not by:
                notified.add(fingerprint)
            else:
                muted[fingerprint] = tuple(dict.fromkeys((*muted.get(fingerprint, ()), *by)))
    return {fp: by for fp, by in muted.items() if fp not in notified}


def parse_silence(raw: Any) -> Silence:
    """One `gettableSilence`; ValueError/KeyError/TypeError when it is not one."""
    state = raw["status"]["state"]
    if state not in _SILENCE_STATES:
        raise ValueError(f"silence state {state!r}")
    matchers = tuple(
        SilenceMatcher(
            name=str(m["name"]),
            value=str(m["value"]),
            is_regex=bool(m.get("isRegex", False)),
            # isEqual came with 0.22; older servers only had equality matchers.
            is_equal=bool(m.get("isEqual", True)),
        )
        for m in raw["matchers"]
    )
    starts, ends = parse_time(raw.get("startsAt")), parse_time(raw.get("endsAt"))
    if starts is None or ends is None:
        raise ValueError("silence without startsAt/endsAt")
    return Silence(
        id=str(raw["id"]),
        state=state,
        matchers=matchers,
        created_by=str(raw.get("createdBy", "")),
        comment=str(raw.get("comment", "")),
        starts_at=starts,
        ends_at=ends,
        updated_at=parse_time(raw.get("updatedAt")),
    )


def _filters(matchers: list[str] | None) -> list[tuple[str, str]] | None:
    return [("filter", m) for m in matchers or []] or None


def with_mutes(alerts: list[AmAlert], muted: Mapping[str, tuple[str, ...]]) -> list[AmAlert]:
    """`alerts` with those muted on every route (`decode_groups`) as suppressed by it."""
    return [
        dataclasses.replace(a, state="suppressed", muted_by=muted[a.fingerprint])
        if a.fingerprint in muted and a.state == "active"
        else a
        for a in alerts
    ]


class AlertmanagerClient(HttpBackend):
    """One connection pool to one Alertmanager; use as `async with AlertmanagerClient(...)`."""

    BACKEND = BACKEND

    def __init__(self, url: str, *, timeout: float, bearer_token: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:  # fmt: skip
        # As for Prometheus: the token as `Authorization: Bearer`, JSON asked for.
        auth = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        headers = {"Accept": "application/json", **auth}
        super().__init__(url, timeout=timeout, headers=headers, transport=transport)
        self.requests = 0  # how many API requests this client made (benchmarks count them)
        self._alerts_seen: dict[str, AmAlert] = {}  # the last read's, by fingerprint
        self._muting: bool | None = None  # whether it reports time-interval muting (asked once)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]] | None = None,
        body: Any = None,
        expect_json: bool = True,
    ) -> Any:
        """One API exchange; its JSON body (None when `expect_json` is false), or BackendError.

        Alertmanager's own errors are a JSON string or plain text with a 4xx/5xx status
        ("silence not found", a bad matcher): quoted, redacted, in the error's detail.
        """
        response = await self._send(method, path, params, body)
        return self._json(response, json.loads) if expect_json else None

    async def alerts(self, *, matchers: list[str] | None = None) -> list[AmAlert]:
        """Every alert it holds (`GET /api/v2/alerts`: active, silenced, inhibited and
        unprocessed), optionally only those matching `matchers` ('alertname="X"'), each
        answer decoded in a worker thread. The board's refresh reads the same with
        `alerts_response`/`decode_alerts` in threads of its own (oncall.service.routing)."""
        alerts = await asyncio.to_thread(self.decode_alerts, await self.alerts_response(matchers))
        if not self.may_be_muted(alerts) or not await self.reports_muting():
            return alerts  # nothing a time interval could be muting, or no way to tell
        groups = await self.groups_response(matchers)
        return with_mutes(alerts, await asyncio.to_thread(self.decode_groups, groups))

    async def alerts_response(self, matchers: list[str] | None = None) -> httpx.Response:
        """`GET /api/v2/alerts` as received, for `decode_alerts`."""
        return await self._send("GET", "/api/v2/alerts", _filters(matchers))

    def decode_alerts(self, response: httpx.Response) -> list[AmAlert]:
        """The alerts of an `alerts_response` (blocking: 5,000 alerts are 2.4 MB; call it in a
        worker thread). An alert read again unchanged is the last read's object (`parse_alert`)."""
        seen: dict[str, AmAlert] = self._alerts_seen
        fresh: dict[str, AmAlert] = {}

        def parse(raw: Any) -> AmAlert:
            alert = parse_alert(raw, seen)
            fresh[alert.fingerprint] = alert
            return alert

        alerts = self._parsed(response, parse, "alert")
        self._alerts_seen = fresh
        return alerts

    @staticmethod
    def may_be_muted(alerts: list[AmAlert]) -> bool:
        """Whether a time interval could be muting any of them (one reads active)."""
        return any(a.state == "active" for a in alerts)

    async def groups_response(self, matchers: list[str] | None = None) -> httpx.Response:
        """`GET /api/v2/alerts/groups` as received, for `decode_groups`."""
        return await self._send("GET", "/api/v2/alerts/groups", _filters(matchers))

    def decode_groups(self, response: httpx.Response) -> dict[str, tuple[str, ...]]:
        """Fingerprint -> the time intervals muting it, from a `groups_response` (blocking)."""
        return muted_alerts(self._parsed(response, group_mutes, "alert group"))

    async def reports_muting(self) -> bool:
        """Whether it reports time-interval muting (its version, asked once)."""
        if self._muting is None:
            try:
                status = await self.request("GET", "/api/v2/status")
                self._muting = reports_muting(status["versionInfo"]["version"])
            except (BackendError, KeyError, TypeError):
                self._muting = False  # no status to tell by: not a second request per read
        return self._muting

    async def silences(self) -> list[Silence]:
        """Every silence it keeps, expired ones included (`GET /api/v2/silences`)."""
        return await asyncio.to_thread(self.decode_silences, await self.silences_response())

    async def silences_response(self) -> httpx.Response:
        """`GET /api/v2/silences` as received, for `decode_silences`."""
        return await self._send("GET", "/api/v2/silences", None)

    def decode_silences(self, response: httpx.Response) -> list[Silence]:
        """The silences of a `silences_response` (blocking)."""
        return self._parsed(response, parse_silence, "silence")

    async def _send(
        self, method: str, path: str, params: Sequence[tuple[str, str]] | None, body: Any = None
    ) -> httpx.Response:
        """One exchange; an error status becomes BackendError."""
        self.requests += 1
        query = tuple(params or ())  # a tuple: httpx's parameter type is invariant in a list
        response = await self._exchange(self._http.request(method, path, params=query, json=body))
        if response.status_code >= 400:
            status = response.status_code
            snippet = response.text[:160].replace("\n", " ").strip().strip('"')
            detail = f"http {status} {response.reason_phrase}"
            raise self._error(
                status_reason(status), f"{detail}: {snippet}" if snippet else detail,
                http_status=status,
            )  # fmt: skip
        return response

    def _json(self, response: httpx.Response, loads: Callable[[bytes], Any]) -> Any:
        try:
            return loads(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._not_json(response) from exc

    def _not_json(self, response: httpx.Response) -> Exception:
        snippet = response.text[:80].replace("\n", " ")
        return self._error("bad payload", f"not an Alertmanager API response: {snippet!r}")

    def _parsed(self, response: httpx.Response, parse: Callable[[Any], T], what: str) -> list[T]:
        """A list of the API's objects, each parsed; any other shape is "bad payload".

        One alert at a time (one decode call each: `json_slices`), so no call holds the
        interpreter lock for long and each decoded alert is freed before the next."""
        items = self._json(response, array_items)
        if items is None:  # not an array: malformed JSON, or JSON of another shape
            self._json(response, json.loads)
            raise self._error("bad payload", f"{what}s response is not a list")
        return self._each(response, items, parse, what)

    def _each(
        self, response: httpx.Response, items: Iterable[Any], parse: Callable[[Any], T], what: str
    ) -> list[T]:
        parsed: list[T] = []
        try:
            for item in items:  # decoding happens here, item by item
                try:
                    parsed.append(parse(item))
                except (KeyError, TypeError, ValueError) as exc:
                    for _ in items:  # malformed JSON further on is what a whole decode says
                        pass
                    raise self._error("bad payload", f"malformed {what}: {exc}") from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._not_json(response) from exc
        return parsed
