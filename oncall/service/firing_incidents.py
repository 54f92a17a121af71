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
from oncall.incidents.grouping import group
from oncall.incidents.merge import merge
from oncall.model.incidents import Incident, Member
from oncall.model.verdicts import CHECKED, Firing, Verdict
from oncall.service.incidents import (
    THREAD_ABOVE,
    Steps,
    member_context,
    observed,
    plain_labels,
    scope_of,
)
from oncall.settings import Settings

log = logging.getLogger("oncall.serve")
#: The most firings kept for grouping; the oldest go first beyond it.
KEEP = 5000


def firing_member(settings: Settings, firing: Firing) -> Member:
    """The firing as an incident member, named as the app names it: labels without
    `alertname`, the context as `member_context` says; first firing at Alertmanager's
    `startsAt` (its receipt when that cannot be read)."""
    labels = {k: v for k, v in firing.labels.items() if k != "alertname"}
    started = parse_time(firing.starts_at) or firing.received_at or time.time()
    context = member_context(settings, firing.context)
    return Member(context, firing.alert, labels, started, None, firing.group_key)


class FiringIncidents:
    """The firings serve received lately, grouped after each checked or resolved one."""

    def __init__(self, settings: Settings, store: IncidentStore | None = None) -> None:
        self.settings = settings
        self.scope = scope_of(settings)
        self.store = store or IncidentStore(
            from_settings.redis_client(settings.redis), retention_s=settings.incidents.retention
        )
        #: The firings, by member key (oldest first), each with its checklist's steps (None:
        #: not checked, e.g. a resolution serve never saw fire).
        self._seen: dict[str, tuple[Member, Steps | None]] = {}
        self.errors = 0

    async def checked(self, firing: Firing, verdict: Verdict) -> list[Incident]:
        """A firing's verdict is in: group it with the others and fold them into the store."""
        member = firing_member(self.settings, firing)
        checked = verdict.get("status") == CHECKED
        steps: Steps | None = list(verdict.get("steps") or []) if checked else None
        self._seen.pop(member.key, None)
        self._seen[member.key] = (member, steps)
        return await self._fold()

    async def resolved(self, firing: Firing) -> list[Incident]:
        """A resolution serve was told of: its member resolved now."""
        member = firing_member(self.settings, firing)
        known, steps = self._seen.get(member.key, (member, None))
        self._seen[member.key] = (replace(known, resolved_at=time.time()), steps)
        return await self._fold()

    def _prune(self, now: float) -> None:
        horizon = now - self.settings.incidents.window - self.settings.incidents.close_after
        for key, (member, _) in list(self._seen.items()):
            if member.resolved_at is not None and member.resolved_at < horizon:
                del self._seen[key]
        while len(self._seen) > KEEP:
            del self._seen[next(iter(self._seen))]

    async def _fold(self) -> list[Incident]:
        now = time.time()
        self._prune(now)
        members = [member for member, _ in self._seen.values()]
        checked = {(m.context, m.alert, plain_labels(m.labels)): steps
                   for m, steps in self._seen.values() if steps is not None}  # fmt: skip
        found = observed(members, checked, self.scope)
        window = self.settings.incidents.window
        if len(found) > THREAD_ABOVE:
            fresh = await asyncio.to_thread(group, found, window=window)
        else:
            fresh = group(found, window=window)
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
