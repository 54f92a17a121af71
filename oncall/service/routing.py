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

A read is I/O only, on the event loop: its answers are decoded in the refresh's one worker
thread, with Prometheus' (`AmReceived`; `oncall.alerts.engine`), so a refresh with
Alertmanager makes one thread hop as one without it does. Whether the groups and the silences
are asked for is read off the alerts' bytes (`oncall.backends.alertmanager.scan_alerts`).

Alertmanager must never slow or break the board: its read runs beside Prometheus', one at a
time; the board waits for it at most `grace` seconds after Prometheus answered, then shows the
last good answer (or `unknown`) and takes the late one at the next refresh. A failure makes
every firing instance `unknown` with the reason; Prometheus' states are shown as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from oncall.alerts.join import Received, route
from oncall.backends import from_settings
from oncall.backends.alertmanager import AlertmanagerClient, scan_alerts, with_mutes
from oncall.errors import BackendError
from oncall.model.alertmanager import AmSnapshot, Silence
from oncall.model.alerts import RuleStatus, failure_reason
from oncall.runtime import collector_paused
from oncall.service.refresh_read import RefreshRead
from oncall.settings import Settings

if TYPE_CHECKING:
    import httpx

__all__ = ["AlertmanagerView", "AmReceived", "alertmanager_view", "route"]


class AlertmanagerView(RefreshRead["AmSnapshot | AmReceived"]):
    """The latest Alertmanager read, and the routing it gives the rules' statuses.

    A read is I/O only, on the event loop: the answers as received (`AmReceived`), decoded
    in the refresh's one worker with Prometheus' (`oncall.alerts.engine`); a read that failed
    is a snapshot saying why."""

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
        """The latest read done (None before any); decoded here if no refresh decoded it."""
        done = self._done
        return done.decoded() if isinstance(done, AmReceived) else done

    def invalidate(self) -> None:
        """Read the silences list again at the next read (a silence was made or expired)."""
        self._silences_at = None

    def start(self) -> None:
        """Start a read unless one is in flight (call it when the Prometheus refresh starts)."""
        if self.client is not None:
            super().start()

    async def latest(self) -> AmSnapshot | Received:
        """This refresh's read, waited for at most `grace` seconds; when it is still running,
        the latest good one (its `at` says when) or, with none, a timeout. An answer received
        is decoded by whoever joins it, in a worker (`AmReceived.decoded`)."""
        taken = await self.take()
        read = taken.value
        if taken.current and read is not None:
            return read
        waited = f"no answer within {self.grace:g}s yet (the request is still waiting)"
        timeout = AmSnapshot(self.clock(), reason="timeout", error=f"alertmanager: {waited}")
        if read is None:
            return timeout
        if isinstance(read, AmReceived):
            return read.stale(timeout)  # a timeout still if its answer does not decode
        # stale: the routing shown is that of its time, as the board had it
        return timeout if read.reason is not None else read

    async def annotate(self, statuses: list[RuleStatus]) -> list[RuleStatus]:
        """`statuses` with each firing instance's routing and each firing rule's counts."""
        if self.client is None:
            return statuses
        read = await self.latest()
        # 5,000 firing instances are tens of ms of decoding and joining: in one worker thread,
        # so the event loop runs meanwhile (`route` reads its arguments only; both are done,
        # frozen values), the collector paused for the thousands of copies it makes
        # (`oncall.runtime`).
        retired, self._routed = self._routed, []
        routed = await asyncio.to_thread(_route_paused, statuses, read, retired)
        self._routed = list(routed)
        return routed

    async def aclose(self) -> None:
        await super().aclose()
        if self.client is not None:
            await self.client.aclose()

    async def _read(self) -> AmSnapshot | AmReceived:
        assert self.client is not None  # `start` reads only with a client
        try:
            return await self._read_from(self.client)
        except Exception as exc:  # a bug of ours must not take the board's states with it
            return _failed(self.clock(), exc)

    async def _read_from(self, client: AlertmanagerClient) -> AmSnapshot | AmReceived:
        # Received here, on the loop, and not decoded: the refresh's one worker decodes it
        # beside Prometheus' answer (docs/architecture.md, §3 "The three routes"). Which
        # further requests to make (the groups, the silences) is read off the answer's bytes
        # (`scan_alerts`: what the decoded alerts would say, or more).
        groups = silences = None
        try:
            alerts = await client.alerts_response()
            scan = scan_alerts(alerts)
            if scan is not None and scan.active and await client.reports_muting():
                groups = await client.groups_response()
        except BackendError as exc:
            return AmSnapshot(self.clock(), reason=failure_reason(exc), error=str(exc))
        now = self.clock()
        stale = self._silences_at is None or now - self._silences_at >= self.silences_refresh
        if scan is not None and (
            stale or scan.silence_ids is None or not scan.silence_ids <= self._silences.keys()
        ):
            # A failure: the states are known; the details wait for the next read.
            with contextlib.suppress(BackendError):
                silences = await client.silences_response()
        return AmReceived(self, client, now, alerts, groups=groups, silences=silences)

    def _decode(self, read: AmReceived) -> AmSnapshot:
        """`read` decoded (blocking: in a worker thread, the collector paused). The silences
        decoded are the view's from now on (the next reads ask for them only when needed)."""
        client = read.client
        try:
            alerts = client.decode_alerts(read.alerts)
            if read.groups is not None:
                alerts = with_mutes(alerts, client.decode_groups(read.groups))
        except BackendError as exc:
            return AmSnapshot(read.at, reason=failure_reason(exc), error=str(exc))
        if read.silences is not None:
            try:
                found = client.decode_silences(read.silences)
                self._silences = {s.id: s for s in found}
                self._silences_at = read.at
            except BackendError:
                pass  # the states are known; the details wait for the next read
        return AmSnapshot(read.at, tuple(alerts), self._silences)


class AmReceived:
    """One Alertmanager read as received (`/api/v2/alerts`, and the groups and silences when
    it called for them), decoded once, at the first `decoded()`, by the refresh's worker."""

    def __init__(
        self,
        view: AlertmanagerView,
        client: AlertmanagerClient,
        at: float,
        alerts: httpx.Response,
        *,
        groups: httpx.Response | None,
        silences: httpx.Response | None,
    ) -> None:
        self.view = view
        self.client = client
        self.at = at  # when it was received: the snapshot's `at`
        self.alerts = alerts
        self.groups = groups
        self.silences = silences
        self._snapshot: AmSnapshot | None = None

    def decoded(self) -> AmSnapshot:
        """The snapshot (blocking the first time; never raises: a failure says so). The
        answers are let go once decoded."""
        if self._snapshot is None:
            try:
                self._snapshot = self.view._decode(self)
            except Exception as exc:  # a bug of ours must not take the board's states with it
                self._snapshot = _failed(self.at, exc)
            self.alerts = self.groups = self.silences = None  # type: ignore[assignment]
        return self._snapshot

    def stale(self, timeout: AmSnapshot) -> _Stale:
        """This read given while a later one still runs: `timeout` if it failed."""
        return _Stale(self, timeout)


class _Stale:
    """The latest read done, given while this refresh's still runs (`AlertmanagerView.latest`)."""

    def __init__(self, read: AmReceived, timeout: AmSnapshot) -> None:
        self.read = read
        self.timeout = timeout

    def decoded(self) -> AmSnapshot:
        snapshot = self.read.decoded()
        return self.timeout if snapshot.reason is not None else snapshot


def _failed(at: float, exc: Exception) -> AmSnapshot:
    return AmSnapshot(at, reason="other", error=f"alertmanager: {type(exc).__name__}: {exc}")


def alertmanager_view(settings: Settings, *, grace: float | None) -> AlertmanagerView:
    """The view of the configured Alertmanager (disabled without `alertmanager.url`)."""
    config = settings.alertmanager
    client = from_settings.alertmanager_client(config)
    return AlertmanagerView(client, silences_refresh=config.silences_refresh, grace=grace)


def _route_paused(
    statuses: list[RuleStatus], read: AmSnapshot | Received, retired: list[RuleStatus]
) -> list[RuleStatus]:
    with collector_paused():
        retired.clear()  # the last join's, freed here where no one else holds them
        snapshot = read if isinstance(read, AmSnapshot) else read.decoded()
        return route(statuses, snapshot)
