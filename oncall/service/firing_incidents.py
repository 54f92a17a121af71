"""`oncall serve`'s side of incidents: each firing it checked (with Alertmanager's `groupKey`
and what its at-firing checklist found) is grouped with the firings it received within the
window, and folded into the team's store; a resolution it is told of resolves its member.

serve sees only the firings Alertmanager sends it, so it never resolves a member it was not
told of (`merge`'s partial writer); the app's refreshes, which see every instance, do that.
What it holds is bounded: the firings of the last `incidents.window` + `close_after`, at most
`KEEP` of them. See `docs/architecture.md` §3.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from oncall.backends import from_settings
from oncall.backends.alertmanager import parse_time
from oncall.backends.incidents import IncidentStore
from oncall.errors import BackendError
from oncall.incidents.grouping import Observed, group
from oncall.incidents.merge import merge
from oncall.incidents.targets import failing_targets
from oncall.model.incidents import Incident, Member
from oncall.model.verdicts import CHECKED, Firing, Verdict
from oncall.service.incidents import THREAD_ABOVE, scope_of
from oncall.settings import Settings

log = logging.getLogger("oncall.serve")
#: The most firings kept for grouping; the oldest go first beyond it.
KEEP = 5000


def firing_member(firing: Firing) -> Member:
    """The firing as an incident member: labels without `alertname` (as the app's), first
    firing at Alertmanager's `startsAt` (its receipt when that cannot be read)."""
    labels = {k: v for k, v in firing.labels.items() if k != "alertname"}
    started = parse_time(firing.starts_at) or firing.received_at or time.time()
    return Member(firing.context, firing.alert, labels, started, None, firing.group_key)


class FiringIncidents:
    """The firings serve received lately, grouped after each checked or resolved one."""

    def __init__(self, settings: Settings, store: IncidentStore | None = None) -> None:
        self.settings = settings
        self.scope = scope_of(settings)
        self.store = store or IncidentStore(
            from_settings.redis_client(settings.redis), retention_s=settings.incidents.retention
        )
        self._seen: dict[str, Observed] = {}  # by member key, oldest first
        self.errors = 0

    async def checked(self, firing: Firing, verdict: Verdict) -> list[Incident]:
        """A firing's verdict is in: group it with the others and fold them into the store."""
        member = firing_member(firing)
        checked = verdict.get("status") == CHECKED
        steps = list(verdict.get("steps") or []) if checked else []
        failing = failing_targets(steps, self.scope) if checked else {}
        self._seen.pop(member.key, None)
        self._seen[member.key] = Observed(member, failing, checked)
        return await self._fold()

    async def resolved(self, firing: Firing) -> list[Incident]:
        member = firing_member(firing)
        known = self._seen.get(member.key)
        ended = time.time()
        if known is None:
            self._seen[member.key] = Observed(replace(member, resolved_at=ended))
        else:
            self._seen[member.key] = replace(known, member=replace(known.member, resolved_at=ended))
        return await self._fold()

    def _prune(self, now: float) -> None:
        horizon = now - self.settings.incidents.window - self.settings.incidents.close_after
        for key, o in list(self._seen.items()):
            if o.member.resolved_at is not None and o.member.resolved_at < horizon:
                del self._seen[key]
        while len(self._seen) > KEEP:
            del self._seen[next(iter(self._seen))]

    async def _fold(self) -> list[Incident]:
        now = time.time()
        self._prune(now)
        observed = list(self._seen.values())
        window = self.settings.incidents.window
        if len(observed) > THREAD_ABOVE:
            fresh = await asyncio.to_thread(group, observed, window=window)
        else:
            fresh = group(observed, window=window)
        close_after = self.settings.incidents.close_after

        def fold(kept: list[Incident]) -> list[Incident]:
            return merge(kept, fresh, now=now, close_after=close_after)

        try:
            return await self.store.merge(fold, since=now - self.settings.incidents.retention)
        except BackendError as exc:
            # The next firing folds again, with everything still held here.
            self.errors += 1
            log.warning("incidents not updated: %s", exc)
            return []

    async def aclose(self) -> None:
        await self.store.aclose()
