"""The one lifecycle of every remediation, with an audit record at each transition.

    plan → preview (server-side dry run / current value) → guards → typed confirmation →
    two-person approval (when policy asks) → Lease → preconditions again → started → execute →
    succeeded | failed → verify (with progress) → verified

Audit transitions: `proposed` (plan and preview), `refused` (with the guard: read-only,
permission, rate limit, circuit breaker, lease, two-person, precondition, terminal),
`declined`, `approved`, `started`, `succeeded` / `failed`, `verified`, `rolled_back`. Each
record also goes to the team's Redis Stream and, for Kubernetes targets, as an Event on the
target; a mirror that fails is noted, never fatal, and never loses the local record.

How the person confirms is the caller's business (`Confirm`): the CLI asks on the terminal, the
app in a modal. Nothing here runs without `confirm` returning True.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from oncall.audit.log import AuditLog
from oncall.audit.records import actor_now, new_action_id, secrets_of
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError
from oncall.remediation import actions
from oncall.remediation.guards import (
    CircuitBreaker,
    GuardVerdict,
    RateLimit,
    TwoPersonRule,
    read_only_guard,
)
from oncall.remediation.plans import Clients, Plan, PlanError, plan
from oncall.settings import Settings

Confirm = Callable[[Plan, "Preview"], Awaitable[bool]]
Progress = Callable[[str], None]
MIRROR_TIMEOUT_S = 2.0


@dataclass
class Preview:
    plan: Plan
    dry_run: Any
    verdicts: list[GuardVerdict] = field(default_factory=list)

    @property
    def refused(self) -> GuardVerdict | None:
        return next((v for v in self.verdicts if not v.ok), None)


@dataclass
class Outcome:
    action_id: str
    status: str  # refused | declined | failed | succeeded | verified | unverified
    message: str
    plan: Plan | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    preview: Preview | None = None


class Remediator:
    """Runs remediations for one operator; `async with` closes its clients."""

    def __init__(
        self,
        settings: Settings,
        *,
        read_only_flag: bool = False,
        alert: dict[str, Any] | None = None,
        evidence: Any = None,
        alert_still_firing: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.settings = settings
        self.read_only_flag = read_only_flag
        self.alert = alert
        self.evidence = evidence
        self.alert_still_firing = alert_still_firing
        self.clients = Clients(settings)
        self.actor = actor_now()
        self.holder = f"{self.actor['user']}@{self.actor['host']}"
        self.log = AuditLog(settings.audit.path, secrets=secrets_of(settings))
        self.mirror_errors: list[str] = []
        guards = settings.guards
        redis = self.clients.redis_client()
        writer = RedisWriter(redis)
        self.writer = writer
        self.rate = RateLimit(
            redis, writer, actions=guards.rate_limit_actions, window_s=guards.rate_limit_window
        )
        self.breaker = CircuitBreaker(
            redis, writer, failures=guards.breaker_failures, cooldown_s=guards.breaker_cooldown
        )
        self.two_person = TwoPersonRule(
            redis, writer, actions=list(guards.two_person), timeout_s=120.0
        )

    async def __aenter__(self) -> Remediator:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.clients.aclose()

    # -- audit -----------------------------------------------------------------------------

    async def _record(
        self, run: Outcome, plan_: Plan, transition: str, **fields: Any
    ) -> dict[str, Any]:
        record = self.log.append(
            action_id=run.action_id,
            transition=transition,
            action=plan_.action,
            target=plan_.target.as_dict(),
            actor=self.actor,
            alert=self.alert,
            **fields,
        )
        run.records.append(record)
        await self._mirror(record, plan_)
        return record

    async def _mirror(self, record: dict[str, Any], plan_: Plan) -> None:
        stream = self.settings.audit.redis_stream
        try:
            async with asyncio.timeout(MIRROR_TIMEOUT_S):
                if stream:
                    fields = {k: _text(v) for k, v in record.items()}
                    await self.writer.xadd(stream, fields, maxlen=100_000)
                if self.settings.audit.kube_events and plan_.target.namespace:
                    kube = await self.clients.kube_writer()
                    message = f"oncall {record['transition']}: {plan_.summary} by {self.holder}"
                    await kube.create_event(
                        plan_.target.namespace,
                        {"kind": plan_.target.kind, "name": plan_.target.name,
                         "uid": plan_.target.uid or "",
                         "apiVersion": "apps/v1" if plan_.target.kind == "Deployment" else "v1"},
                        reason=f"Oncall{record['transition'].title().replace('_', '')}",
                        message=message[:1000],
                    )  # fmt: skip
        except (BackendError, TimeoutError) as exc:
            self.mirror_errors.append(f"record {record['seq']}: {exc}")

    # -- lifecycle -------------------------------------------------------------------------

    async def plan(self, action: str, params: dict[str, Any]) -> Plan:
        return await plan(action, params, self.clients)

    async def preview(self, plan_: Plan) -> Preview:
        """Dry run and every guard's verdict, before anyone is asked to confirm."""
        dry_run: Any
        verdicts = [read_only_guard(self.settings, flag=self.read_only_flag)]
        try:
            dry_run = await actions.dry_run(plan_, self.clients)
        except BackendError as exc:
            dry_run = {"error": str(exc)}
            if exc.reason == "forbidden":
                reason = f"Kubernetes refused the dry run: {exc.detail}"
                verdicts.append(GuardVerdict("permission", False, reason, {}))
            elif exc.reason in ("conflict", "invalid", "not found"):
                reason = f"the target is not as planned: {exc.detail or exc.reason}"
                verdicts.append(GuardVerdict("precondition", False, reason, {}))
            else:
                verdicts.append(GuardVerdict("dry run", False, str(exc), {}))
        verdicts.append(await self.rate.check(plan_.target.key))
        verdicts.append(await self.breaker.check())
        verdicts.append(await self._lease_holder(plan_))
        return Preview(plan_, dry_run, verdicts)

    async def run(
        self,
        plan_: Plan,
        confirm: Confirm,
        *,
        progress: Progress | None = None,
        extra: list[GuardVerdict] | None = None,
        rollback_of: str | None = None,
    ) -> Outcome:
        """Preview, ask, guard, execute and verify `plan_`; every step audited.

        `extra` verdicts come from the caller (the CLI's "is there a terminal to ask on").
        """
        say = progress or (lambda _text: None)
        outcome = Outcome(new_action_id(), "proposed", "", plan_)
        preview = await self.preview(plan_)
        preview.verdicts.extend(extra or [])
        outcome.preview = preview
        await self._record(
            outcome, plan_, "proposed", request=plan_.request, dry_run=preview.dry_run,
            evidence=self.evidence,
            detail={"before": plan_.before, "after": plan_.after, "undo": plan_.undo,
                    "rollback_of": rollback_of},
        )  # fmt: skip
        if preview.refused:
            return await self._refuse(outcome, plan_, preview.refused)
        if not await confirm(plan_, preview):
            await self._record(outcome, plan_, "declined")
            outcome.status, outcome.message = "declined", "declined: nothing was changed"
            return outcome
        await self._record(outcome, plan_, "approved", detail={"by": self.holder})
        if self.two_person.required(plan_.action):
            try:
                await self.two_person.request(
                    outcome.action_id, plan_.action, plan_.target.label, self.holder
                )
            except BackendError as exc:
                verdict = GuardVerdict("two-person", False, f"cannot ask for approval: {exc}", {})
                return await self._refuse(outcome, plan_, verdict)
            say(f"waiting for a second person: oncall remediate approve {outcome.action_id}")
            verdict = await self.two_person.wait(outcome.action_id, timeout_s=120.0)
            if not verdict.ok:
                return await self._refuse(outcome, plan_, verdict)
            await self._record(outcome, plan_, "approved", detail=verdict.detail)
        lease = await self._lease(plan_)
        if not lease.ok:
            return await self._refuse(outcome, plan_, lease)
        try:
            done = await self._execute(outcome, plan_, say)
        finally:
            await self._release(plan_)
        if rollback_of and done.status == "verified":
            original = Outcome(rollback_of, "rolled_back", "", plan_)
            await self._record(
                original, plan_, "rolled_back", outcome=done.message,
                detail={"by_action": done.action_id},
            )  # fmt: skip
            done.records.extend(original.records)
        return done

    async def rollback_plan(self, action_id: str) -> Plan:
        """The plan that undoes a verified action: the same action back to the old value."""
        records = [r for r in self.log.records() if r.get("action_id") == action_id]
        proposed = next((r for r in records if r.get("transition") == "proposed"), None)
        if proposed is None:
            raise PlanError(f"no action {action_id} in the audit log {self.log.path}")
        if not any(r.get("transition") in ("verified", "succeeded") for r in records):
            raise PlanError(f"action {action_id} never ran: nothing to roll back")
        if any(r.get("transition") == "rolled_back" for r in records):
            raise PlanError(f"action {action_id} was rolled back already")
        undo = (proposed.get("detail") or {}).get("undo")
        if not undo:
            raise PlanError(f"{proposed.get('action')} cannot be rolled back (no previous value)")
        return await self.plan(str(proposed["action"]), dict(undo))

    async def _execute(self, outcome: Outcome, plan_: Plan, say: Progress) -> Outcome:
        recheck = await self._recheck(plan_)
        if not recheck.ok:
            return await self._refuse(outcome, plan_, recheck)
        verdicts = [await self.rate.check(plan_.target.key), await self.breaker.check()]
        refused = next((v for v in verdicts if not v.ok), None)
        if refused:
            return await self._refuse(outcome, plan_, refused)
        try:
            await self.rate.record(plan_.target.key)
        except BackendError as exc:  # fail closed: an action we cannot count does not run
            verdict = GuardVerdict("rate limit", False, f"guard state unavailable: {exc}", {})
            return await self._refuse(outcome, plan_, verdict)
        await self._record(outcome, plan_, "started", request=plan_.request)
        started = time.monotonic()
        try:
            result = await actions.execute(plan_, self.clients)
        except BackendError as exc:
            with contextlib.suppress(BackendError):  # the failure is audited either way
                await self.breaker.record_failure(plan_.target.key, str(exc))
            await self._record(
                outcome, plan_, "failed", outcome=str(exc),
                duration_s=round(time.monotonic() - started, 3),
            )  # fmt: skip
            outcome.status, outcome.message = "failed", f"failed, nothing changed: {exc}"
            return outcome
        await self.breaker.record_success()
        await self._record(
            outcome, plan_, "succeeded", outcome=result,
            duration_s=round(time.monotonic() - started, 3),
        )  # fmt: skip
        say("executed; verifying")
        verified, detail = await actions.verify(plan_, self.clients, result, say)
        await self._record(
            outcome, plan_, "verified", outcome={"ok": verified, "detail": detail},
            duration_s=round(time.monotonic() - started, 3),
        )  # fmt: skip
        outcome.status = "verified" if verified else "unverified"
        outcome.message = detail
        return outcome

    async def _refuse(self, outcome: Outcome, plan_: Plan, verdict: GuardVerdict) -> Outcome:
        await self._record(
            outcome, plan_, "refused", guard=verdict.guard, outcome=verdict.reason,
            detail=verdict.detail,
        )  # fmt: skip
        outcome.status, outcome.message = "refused", f"refused ({verdict.guard}): {verdict.reason}"
        return outcome

    async def _recheck(self, plan_: Plan) -> GuardVerdict:
        """The world as the person saw it: the alert still firing, the target unchanged."""
        if self.alert_still_firing is not None and not await self.alert_still_firing():
            return GuardVerdict("precondition", False, "the alert is no longer firing", {})
        try:
            changed = await actions.changed_since_plan(plan_, self.clients)
        except BackendError as exc:
            return GuardVerdict("precondition", False, f"cannot re-read the target: {exc}", {})
        if changed:
            return GuardVerdict("precondition", False, changed, {})
        return GuardVerdict("precondition", True, "unchanged", {})

    def _lease_name(self, plan_: Plan) -> str:
        """A valid object name (RFC 1123 label) per target: oncall-pod-ai-vllm-x."""
        name = re.sub(r"[^a-z0-9-]+", "-", f"oncall-{plan_.target.key}".lower())
        return name[:63].rstrip("-")

    async def _lease_holder(self, plan_: Plan) -> GuardVerdict:
        """For the preview: whether someone else holds the target's Lease now. Taking it waits
        for the confirmation (`_lease`); a person is not asked to confirm what would be refused."""
        namespace = plan_.target.namespace or self.settings.kubernetes.namespace
        try:
            kube = await self.clients.kube_writer()
            held = await kube.lease_holder(namespace, self._lease_name(plan_))
        except BackendError as exc:
            return GuardVerdict("lease", False, f"cannot read the Lease: {exc}", {})
        now = datetime.now(UTC)
        if held is None or not held.holder or held.holder == self.holder:
            return GuardVerdict("lease", True, "free", {})
        if held.expires is None or held.expires <= now:
            return GuardVerdict("lease", True, f"free (expired, last held by {held.holder})", {})
        return self._held_by(plan_, held.holder, held.since)

    def _held_by(self, plan_: Plan, holder: str | None, since: datetime | None) -> GuardVerdict:
        when = since.isoformat() if since else "unknown"
        return GuardVerdict(
            "lease", False, f"{holder} is acting on {plan_.target.label} (since {when})",
            {"holder": holder, "since": when},
        )  # fmt: skip

    async def _lease(self, plan_: Plan) -> GuardVerdict:
        namespace = plan_.target.namespace or self.settings.kubernetes.namespace
        try:
            kube = await self.clients.kube_writer()
            lease = await kube.acquire_lease(
                namespace,
                self._lease_name(plan_),
                self.holder,
                int(self.settings.guards.lease_duration),
            )
        except BackendError as exc:
            return GuardVerdict("lease", False, f"cannot take the Lease: {exc}", {})
        if lease.acquired:
            return GuardVerdict("lease", True, "held", {})
        return self._held_by(plan_, lease.holder, lease.since)

    async def _release(self, plan_: Plan) -> None:
        namespace = plan_.target.namespace or self.settings.kubernetes.namespace
        try:
            kube = await self.clients.kube_writer()
            await kube.release_lease(namespace, self._lease_name(plan_), self.holder)
        except BackendError:
            pass  # it expires by itself after guards.lease_duration


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
