"""What Alertmanager does with each firing instance: read once per refresh, joined to the
rules' states.

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
from dataclasses import replace

from oncall.backends import from_settings
from oncall.backends.alertmanager import AlertmanagerClient
from oncall.errors import BackendError
from oncall.model.alertmanager import (
    AmAlert,
    AmSnapshot,
    Inhibitor,
    InstanceRouting,
    RuleRouting,
    Silence,
)
from oncall.model.alerts import AlertInstance, RuleStatus, failure_reason
from oncall.runtime import collector_paused
from oncall.service.refresh_read import RefreshRead
from oncall.settings import Settings


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
        try:
            alerts = await client.alerts()
        except BackendError as exc:
            return AmSnapshot(self.clock(), reason=failure_reason(exc), error=str(exc))
        now = self.clock()
        # Here, not in a thread: a set of the few silence ids alerts name is ~0.3 ms at 5,000
        # alerts, less than a thread's round trip costs the loop (and its wake-ups).
        named = {sid for alert in alerts for sid in alert.silenced_by}
        stale = self._silences_at is None or now - self._silences_at >= self.silences_refresh
        if stale or not named <= self._silences.keys():
            try:
                self._silences = {s.id: s for s in await client.silences()}
                self._silences_at = now
            except BackendError:
                pass  # the states are known; the details wait for the next read
        return AmSnapshot(now, tuple(alerts), self._silences)


def alertmanager_view(settings: Settings, *, grace: float | None) -> AlertmanagerView:
    """The view of the configured Alertmanager (disabled without `alertmanager.url`)."""
    config = settings.alertmanager
    client = from_settings.alertmanager_client(config)
    return AlertmanagerView(client, silences_refresh=config.silences_refresh, grace=grace)


def route(statuses: list[RuleStatus], snapshot: AmSnapshot) -> list[RuleStatus]:
    """Join Alertmanager's alerts to the rules' firing instances, by label set.

    Prometheus sends an instance's labels (plus its `external_labels`, which the instance
    lacks): an Alertmanager alert is keyed by the labels of the names the rule's instances
    have, so extra labels do not stop the match.
    """
    by_name: dict[str, list[AmAlert]] = {}
    for alert in snapshot.alerts:
        by_name.setdefault(alert.name, []).append(alert)
    fingerprints = {alert.fingerprint: alert for alert in snapshot.alerts}
    out = []
    for status in statuses:
        firing = [i for i in status.instances if i.state == "firing"]
        if not firing:
            out.append(status)
            continue
        if snapshot.reason is not None:
            unknown = InstanceRouting("unknown", reason=snapshot.reason, error=snapshot.error)
            routings = dict.fromkeys(map(id, firing), unknown)
        else:
            routings = _routings(firing, by_name.get(status.rule.name, []), snapshot, fingerprints)
        instances = tuple(
            _with_routing(i, routings[id(i)]) if id(i) in routings else i for i in status.instances
        )
        counts = RuleRouting.of(list(routings.values()))
        out.append(replace(status, instances=instances, routing=counts))
    return out


def _route_paused(
    statuses: list[RuleStatus], snapshot: AmSnapshot, retired: list[RuleStatus]
) -> list[RuleStatus]:
    with collector_paused():
        retired.clear()  # the last join's, freed here where no one else holds them
        return route(statuses, snapshot)


def _with_routing(instance: AlertInstance, routing: InstanceRouting) -> AlertInstance:
    """`replace(instance, routing=routing)` without its cost: `dataclasses.replace` calls
    `__init__` with every field (≈ 10 µs), 5,000 times a refresh for 5,000 firing instances;
    a copy of the frozen instance's `__dict__` is what it would give."""
    copy = object.__new__(AlertInstance)
    copy.__dict__.update(instance.__dict__)
    copy.__dict__["routing"] = routing
    return copy


def _routings(
    firing: list[AlertInstance],
    held: list[AmAlert],
    snapshot: AmSnapshot,
    fingerprints: dict[str, AmAlert],
) -> dict[int, InstanceRouting]:
    # By the whole label set first; only when that misses (labels Prometheus added, its
    # external_labels), by the labels of the names the rule's instances have.
    index = {frozenset(alert.labels.items()): alert for alert in held}
    narrowed: dict[frozenset[tuple[str, str]], AmAlert] | None = None
    missing = InstanceRouting("missing")
    active = InstanceRouting("active")
    result: dict[int, InstanceRouting] = {}
    for instance in firing:
        key = frozenset(instance.labels.items())
        alert = index.get(key)
        if alert is None and held:
            if narrowed is None:
                names = {name for i in firing for name in i.labels}
                narrowed = {
                    frozenset((k, v) for k, v in a.labels.items() if k in names): a for a in held
                }
            alert = narrowed.get(key)
        if alert is None:
            result[id(instance)] = missing
        elif alert.silenced_by:
            silences = tuple(
                snapshot.silences[s] for s in alert.silenced_by if s in snapshot.silences
            )
            result[id(instance)] = InstanceRouting(
                "silenced", silenced_by=alert.silenced_by, silences=silences
            )
        elif alert.inhibited_by:
            inhibitors = tuple(
                Inhibitor(fp, fingerprints[fp].labels if fp in fingerprints else None)
                for fp in alert.inhibited_by
            )
            result[id(instance)] = InstanceRouting("inhibited", inhibited_by=inhibitors)
        elif alert.muted_by:
            result[id(instance)] = InstanceRouting("muted", muted_by=alert.muted_by)
        elif alert.state == "unprocessed":
            result[id(instance)] = InstanceRouting("unprocessed")
        else:
            result[id(instance)] = active
    return result
