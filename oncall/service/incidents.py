"""Incidents for the app, `oncall alerts` and `oncall serve`: after each refresh, group the
firing instances with what their checklists found and fold the result into the team's store.

What a checklist found comes from the verdicts `oncall serve` keeps (its at-firing checklist
runs) and from the checklists the app ran itself (`IncidentsView.checked`); Alertmanager's
`groupKey` from serve's notifications (`IncidentsView.group_keys`). The grouping is pure CPU
(`oncall.incidents`): past `THREAD_ABOVE` instances it runs in a thread, so that a storm never
holds the event loop. The store (`IncidentStore.merge`) makes concurrent writers safe; a Redis
that does not answer leaves the last incidents known in place. See `docs/architecture.md` §3.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from oncall.backends import from_settings
from oncall.backends.incidents import IncidentStore
from oncall.errors import BackendError, OncallError
from oncall.incidents.grouping import Observed, group
from oncall.incidents.merge import merge
from oncall.incidents.targets import (
    Scope,
    aliased,
    failing_targets,
    vllm_alias,
    vllm_deployment,
)
from oncall.model.alerts import RuleStatus
from oncall.model.incidents import Incident, Member, member_key
from oncall.model.verdicts import CHECKED, Verdict
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.service.verdicts import VerdictReader

#: Instances past which the grouping runs in a thread (below, the hop costs more than it saves).
THREAD_ABOVE = 200
#: Verdicts read per refresh: the newest, enough for every instance of a storm.
VERDICTS_READ = 500
#: How long a refresh waits for the verdict store: decoration, never a hold.
VERDICTS_TIMEOUT_S = 2.0

Steps = Sequence[Mapping[str, Any]]


def scope_of(settings: Settings) -> Scope:
    """The names a step's target takes when it leaves them implicit (host:port, no password)."""
    parts = urlsplit(settings.redis.url)
    return Scope(settings.kubernetes.namespace, f"{parts.hostname}:{parts.port or 6379}")


def member_context(settings: Settings, context: str) -> str:
    """The context an incident member carries: "" with one context (no `contexts:`), as the
    app's alerts carry it, whatever `context.name` says; the context's name otherwise. So the
    app and a serve replica of the same cluster name an instance alike."""
    return context if settings.contexts else ""


def plain_labels(labels: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in labels.items() if k != "alertname")


def firing_members(statuses: Iterable[RuleStatus], now: float) -> list[Member]:
    """Every firing instance as a member: first firing = active since + the rule's `for`."""
    out = []
    for status in statuses:
        for instance in status.instances:
            if instance.state != "firing":
                continue
            since = instance.active_since
            fired = now if since is None else min(now, since + status.rule.for_s)
            # Without `alertname` (the rule's name already), as serve's firings are.
            labels = {k: v for k, v in instance.labels.items() if k != "alertname"}
            out.append(Member(status.context, status.rule.name, labels, fired))
    return out


def observed(
    members: Iterable[Member],
    checked: Mapping[tuple[str, str, frozenset[tuple[str, str]]], Steps],
    scope: Scope,
    group_keys: Mapping[str, str] | None = None,
    by_rule: Mapping[tuple[str, str], Steps] | None = None,
) -> list[Observed]:
    """Each member with the steps of its latest checklist run (keyed by context, alert and
    labels without `alertname`; else the run of its rule, `by_rule`, as the app runs one per
    rule) and its Alertmanager groupKey (by member key)."""
    keys = group_keys or {}
    rules = by_rule or {}
    found: list[tuple[Member, Steps | None]] = []
    for seen in members:
        steps = checked.get((seen.context, seen.alert, plain_labels(seen.labels)))
        if steps is None:
            steps = rules.get((seen.context, seen.alert))
        m = seen if seen.key not in keys else replace(seen, group_key=keys[seen.key])
        found.append((m, steps))
    # The vLLM Deployments these checklists read: a vLLM step of a checklist that reads none
    # implicates the one of its namespace (`vllm_alias`).
    deployments = {d for _, steps in found if steps is not None
                   if (d := vllm_deployment(steps, scope)) is not None}  # fmt: skip
    aliases = vllm_alias(deployments)
    out = []
    for m, steps in found:
        failing = {} if steps is None else aliased(failing_targets(steps, scope), aliases)
        out.append(Observed(m, failing, steps is not None))
    return out


def verdict_steps(
    verdicts: Iterable[Verdict], settings: Settings
) -> dict[tuple[str, str, frozenset[tuple[str, str]]], Steps]:
    """The steps of the newest checked verdict of each firing (context, alert, labels)."""
    newest: dict[tuple[str, str, frozenset[tuple[str, str]]], tuple[float, Steps]] = {}
    for v in verdicts:
        if v.get("status") != CHECKED or v.get("resolved_at"):
            continue
        context = member_context(settings, str(v.get("context") or ""))
        key = (context, str(v.get("alert")), plain_labels(v.get("labels") or {}))
        ran = float(v.get("ran_at") or 0.0)
        if key not in newest or newest[key][0] < ran:
            newest[key] = (ran, list(v.get("steps") or []))
    return {k: steps for k, (_, steps) in newest.items()}


def membership(incidents: Iterable[Incident]) -> dict[str, str]:
    """member key → the id of the open incident it belongs to (what the board and `oncall
    alerts -o json` show beside each instance)."""
    return {m.key: i.id for i in incidents if i.ongoing for m in i.members}


def instance_key(context: str, alert: str, labels: Mapping[str, str]) -> str:
    """The member key of an alert instance (its labels without `alertname`)."""
    return member_key(context, alert, {k: v for k, v in labels.items() if k != "alertname"})


class IncidentsView:
    """The team's incidents as of the latest refresh; `update` after each one."""

    def __init__(self, settings: Settings, store: IncidentStore | None = None) -> None:
        self.settings = settings
        self.scope = scope_of(settings)
        self.store = store or IncidentStore(
            from_settings.redis_client(settings.redis),
            retention_s=settings.incidents.retention,
        )
        #: The app's own checklist runs, one per rule: (context, alert) → steps (JSON).
        self.by_rule: dict[tuple[str, str], Steps] = {}
        #: Alertmanager's groupKey of a member (by member key), from serve's notifications.
        self.group_keys: dict[str, str] = {}
        self.incidents: list[Incident] = []
        self.error: BackendError | None = None
        self._reader: VerdictReader | None = None

    def note_checklist(self, context: str, alert: str, steps: Steps) -> None:
        """Record a checklist run the app made for a rule (its steps as JSON): the grouping
        reads it for the rule's instances that no at-firing verdict covers."""
        self.by_rule[(context, alert)] = list(steps)

    def grouping(self, statuses: Iterable[RuleStatus], verdicts: Iterable[Verdict],
                 now: float) -> list[Incident]:  # fmt: skip
        """This refresh's grouping (pure; in the caller's thread)."""
        members = firing_members(statuses, now)
        found = observed(
            members,
            verdict_steps(verdicts, self.settings),
            self.scope,
            self.group_keys,
            self.by_rule,
        )
        return group(found, window=self.settings.incidents.window)

    async def update(
        self,
        statuses: list[RuleStatus],
        verdicts: list[Verdict] | None = None,
        *,
        now: float | None = None,
    ) -> list[Incident]:
        """Group this refresh's firing instances and fold them into the store; the incidents
        as written (the last known ones, with `error` set, when Redis did not answer)."""
        now = time.time() if now is None else now
        verdicts = verdicts or []
        size = sum(len(s.instances) for s in statuses)
        if size > THREAD_ABOVE:
            fresh = await asyncio.to_thread(self.grouping, statuses, verdicts, now)
        else:
            fresh = self.grouping(statuses, verdicts, now)
        close_after = self.settings.incidents.close_after
        since = now - self.settings.incidents.retention
        # The contexts this refresh saw whole: their instances missing from it have resolved.
        # A context whose refresh failed (unknown) resolves nothing.
        whole = {s.context for s in statuses} - {s.context for s in statuses if s.unreachable}

        def fold(kept: list[Incident]) -> list[Incident]:
            return merge(kept, fresh, now=now, close_after=close_after, seen_contexts=whole)

        try:
            written = await self.store.merge(fold, since=since)
        except BackendError as exc:
            self.error = exc
            return self.incidents
        self.error = None
        self.incidents = [i for i in written if i.ongoing]
        return self.incidents

    def membership(self) -> dict[str, str]:
        return membership(self.incidents)

    async def after_refresh(self, statuses: list[RuleStatus]) -> list[Incident]:
        """`update` with the newest at-firing verdicts `oncall serve` stored (none when the
        verdict store does not answer within VERDICTS_TIMEOUT_S: the app's runs still count)."""
        return await self.update(statuses, await self._verdicts())

    async def _verdicts(self) -> list[Verdict]:
        from oncall.service.verdicts import VerdictReader

        if self._reader is None:
            self._reader = VerdictReader.from_settings(self.settings)
        try:
            async with asyncio.timeout(VERDICTS_TIMEOUT_S):
                return await self._reader.list(limit=VERDICTS_READ)
        except (TimeoutError, OncallError):
            return []

    async def aclose(self) -> None:
        await self.store.aclose()
        if self._reader is not None:
            await self._reader.aclose()
