"""What Alertmanager does with each firing instance: read once per refresh, beside
Prometheus' request, and handed to the refresh stage, which builds the rules' states with it
(`oncall.alerts.join`; docs/architecture.md, §3 "The three routes").

Cost, steady state: one request per refresh, `GET /api/v2/alerts`. Each alert there names the
silences muting it (`silencedBy`, ids) and the alerts inhibiting it (`inhibitedBy`,
fingerprints of alerts of the same answer), so states and inhibitors need nothing more. The
silences' details (who, until when, comment) come from `GET /api/v2/silences`, read only when
an alert names a silence not seen yet, when asked (`invalidate`, after a silence is made or
expired here), or `alertmanager.silences_refresh` after the last read (a silence extended or
re-commented keeps its id). A silence list of a busy team is thousands of entries, most of
them expired; reading it every refresh would double the cost for nothing new.

Alertmanager must never slow or break the board: its read runs beside Prometheus', one at a
time; the board waits for it at most `grace` seconds after Prometheus answered, then shows the
last good answer (or `unknown`) and takes the late one at the next refresh. A failure makes
every firing instance `unknown` with the reason; Prometheus' states are shown as they are.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from oncall.alerts.join import route
from oncall.backends import from_settings
from oncall.backends.alertmanager import AlertmanagerClient, with_mutes
from oncall.errors import BackendError
from oncall.model.alertmanager import AmSnapshot, Silence
from oncall.model.alerts import RuleStatus, failure_reason
from oncall.runtime import collector_paused
from oncall.service.refresh_read import RefreshRead
from oncall.settings import Settings

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
__all__ = ["AlertmanagerView", "alertmanager_view", "route"]


class AlertmanagerView(RefreshRead[AmSnapshot]):
    """The latest Alertmanager read, and the routing it gives the rules' statuses."""

    def __init__(
        self,
        client: AlertmanagerClient | None,
        *,
        silences_refresh: float = 60.0,
        grace: float | None = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(grace=grace)
        self.client = client
        self.silences_refresh = silences_refresh
        self.clock = clock
        self._silences: dict[str, Silence] = {}
        self._silences_at: float | None = None
        #: The last join's statuses, kept alive for the next join's worker to free (once the
        #: board let go of them): thousands of copied instances, ms of CPU for the loop.
        self._routed: list[RuleStatus] = []

    @property
    def enabled(self) -> bool:
        return self.client is not None

    @property
    def snapshot(self) -> AmSnapshot | None:
        """The latest read done (None before any)."""
        return self._done

    def invalidate(self) -> None:
        """Read the silences list again at the next read (a silence was made or expired)."""
        self._silences_at = None

    def start(self) -> None:
        """Start a read unless one is in flight (call it when the Prometheus refresh starts)."""
        if self.client is not None:
            super().start()

    async def latest(self) -> AmSnapshot:
        """This refresh's read, waited for at most `grace` seconds; when it is still running,
        the latest good one (its `at` says when) or, with none, a timeout."""
        taken = await self.take()
        snapshot = taken.value
        if taken.current and snapshot is not None:
            return snapshot
        if snapshot is None or snapshot.reason is not None:
            waited = f"no answer within {self.grace:g}s yet (the request is still waiting)"
            return AmSnapshot(self.clock(), reason="timeout", error=f"alertmanager: {waited}")
        return snapshot  # stale: the routing shown is that of its time, as the board had it

    async def annotate(self, statuses: list[RuleStatus]) -> list[RuleStatus]:
        """`statuses` with each firing instance's routing and each firing rule's counts."""
        if self.client is None:
            return statuses
        snapshot = await self.latest()
        # 5,000 firing instances are tens of ms of joining: in a worker thread, so the event
        # loop runs meanwhile (`route` reads its arguments only; both are done, frozen values),
        # the collector paused for the thousands of copies it makes (`oncall.runtime`).
        retired, self._routed = self._routed, []
        routed = await asyncio.to_thread(_route_paused, statuses, snapshot, retired)
        self._routed = list(routed)
        return routed

    async def aclose(self) -> None:
        await super().aclose()
        if self.client is not None:
            await self.client.aclose()

    async def _read(self) -> AmSnapshot:
        assert self.client is not None  # `start` reads only with a client
        try:
            return await self._read_from(self.client)
        except Exception as exc:  # a bug of ours must not take the board's states with it
            error = f"alertmanager: {type(exc).__name__}: {exc}"
            return AmSnapshot(self.clock(), reason="other", error=error)

    async def _read_from(self, client: AlertmanagerClient) -> AmSnapshot:
        # Received here, decoded in a worker thread with the collector paused (5,000 alerts
        # are 2.4 MB; `oncall.runtime`): beside Prometheus' request, before the refresh's
        # own worker, which gets this read done (docs/architecture.md, §3 "The three routes").
        try:
            alerts = await _decoded(client.decode_alerts, await client.alerts_response())
            if client.may_be_muted(alerts) and await client.reports_muting():
                groups = await _decoded(client.decode_groups, await client.groups_response())
                alerts = with_mutes(alerts, groups)
        except BackendError as exc:
            return AmSnapshot(self.clock(), reason=failure_reason(exc), error=str(exc))
        now = self.clock()
        # Here, not in a thread: a set of the few silence ids alerts name is ~0.3 ms at 5,000
        # alerts, less than a thread's round trip costs the loop (and its wake-ups).
        named = {sid for alert in alerts for sid in alert.silenced_by}
        stale = self._silences_at is None or now - self._silences_at >= self.silences_refresh
        if stale or not named <= self._silences.keys():
            try:
                found = await _decoded(client.decode_silences, await client.silences_response())
                self._silences = {s.id: s for s in found}
                self._silences_at = now
            except BackendError:
                pass  # the states are known; the details wait for the next read
        return AmSnapshot(now, tuple(alerts), self._silences)


def alertmanager_view(settings: Settings, *, grace: float | None) -> AlertmanagerView:
    """The view of the configured Alertmanager (disabled without `alertmanager.url`)."""
    config = settings.alertmanager
    client = from_settings.alertmanager_client(config)
    return AlertmanagerView(client, silences_refresh=config.silences_refresh, grace=grace)


async def _decoded(decode: Callable[[httpx.Response], T], response: httpx.Response) -> T:
    """`decode(response)` in a worker thread, the collector paused: the decoded answer is
    freed before any collection walks it (`oncall.runtime`)."""

    def paused() -> T:
        with collector_paused():
            return decode(response)

    return await asyncio.to_thread(paused)


def _route_paused(
    statuses: list[RuleStatus], snapshot: AmSnapshot, retired: list[RuleStatus]
) -> list[RuleStatus]:
    with collector_paused():
        retired.clear()  # the last join's, freed here where no one else holds them
        return route(statuses, snapshot)
