"""The one lifecycle of every remediation, with an audit record at each transition.

    plan → preview (server-side dry run / current value) → guards → typed confirmation →
    two-person approval (when policy asks) → Lease → preconditions again → started → execute →
    succeeded | failed → verify (with progress) → verified

The Lease is the Kubernetes Lease of the plan's target (and workload); an action whose writes
go only to Alertmanager or Redis takes none and says what guards it instead (`Action.unleased`:
an atomic compare-and-set in Redis, Alertmanager's own re-read), so silencing and acknowledging
need no Kubernetes. Its execute may raise `TargetChanged` (its atomic write found another's
first): audited as `failed` with guard `precondition`, not counted by the circuit breaker.

Audit transitions: `proposed` (plan and preview), `refused` (with the guard: read-only,
permission, rate limit, circuit breaker, lease, two-person, precondition, terminal),
`declined`, `approved`, `started`, `succeeded` / `failed`, `verified`, `rolled_back`. Each
record also goes to the team's Redis Stream and, for Kubernetes targets, as an Event on the
target; a mirror that fails is noted, never fatal, and never loses the local record.

The lifecycle runs on the caller's event loop (the app's, or the CLI's); only the audit log's
fsynced append leaves it, in a thread (`asyncio.to_thread`), so no write holds up a key press.
What each action does is its own module (oncall/remediation/actions/, by the registry); this
module never asks which action it runs.

How the person confirms is the caller's business (`Confirm`): the CLI asks on the terminal, the
app in a modal. Nothing here runs without `confirm` returning True.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from oncall.audit.log import AuditLog
from oncall.audit.records import AuditError, actor_now, new_action_id, secrets_of
from oncall.errors import BackendError
from oncall.model.action_params import ACTION_PARAMS
from oncall.model.write_path import (
    Confirm,
    GuardVerdict,
    Outcome,
    OutcomeStatus,
    Plan,
    Preview,
    Progress,
    render_preview,
)
from oncall.remediation import registry
from oncall.remediation.action import PlanError, TargetChanged
from oncall.remediation.audit_mirror import mirror_to_stream
from oncall.remediation.clients import Clients
from oncall.remediation.context_guard import (
    check_rollback_context,
    cluster_of,
    context_refusal,
    stamped,
)
from oncall.remediation.guards import read_only_guard
from oncall.remediation.lease import TargetLease, holder_identity
from oncall.remediation.policy import APPROVAL_TIMEOUT_S, Guards
from oncall.settings import Settings

MIRROR_TIMEOUT_S = 2.0


#: The approver's typed confirmation: shown the requester's preview and the word to type.
ApprovalConfirm = Callable[[str, str], Awaitable[bool]]


class Log(Protocol):
    """What the executor needs of the audit log (oncall.audit.log.AuditLog)."""

    @property
    def path(self) -> Any: ...

    def append(self, **fields: Any) -> dict[str, Any]: ...

    def records(self) -> Iterator[dict[str, Any]]: ...


@runtime_checkable
class VerifiableLog(Protocol):
    """A log whose hash chain can be checked (AuditLog): what `rollback_plan` plans from."""

    def verify(self) -> Any: ...  # a report with `ok` and `problems` (oncall.audit.chain)


@dataclass
class _Run:
    """One action's id and the audit records written for it so far."""

    action_id: str
    plan: Plan
    preview: Preview | None = None
    records: list[dict[str, Any]] = field(default_factory=list)

    def end(
        self, status: OutcomeStatus, message: str, refusal: GuardVerdict | None = None
    ) -> Outcome:
        return Outcome(
            self.action_id, status, message, self.plan, self.preview, refusal, tuple(self.records)
        )


class Remediator:
    """Runs remediations for one operator; `async with` closes its clients.

    `Remediator(clients, log, guards)` takes everything it talks to, so a test hands it fakes;
    the front ends use `Remediator.from_settings`.
    """

    def __init__(
        self,
        clients: Clients,
        log: Log,
        guards: Guards,
        *,
        actor: dict[str, Any] | None = None,
        read_only_flag: bool = False,
        alert: dict[str, Any] | None = None,
        evidence: Any = None,
        alert_still_firing: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.clients = clients
        self.settings = clients.settings
        self.log = log
        self.guards = guards
        self.actor = actor or actor_now()
        # Until SelfSubjectReview answers (`identify`): the OS account; unique per process.
        self.holder = self._auto_holder = holder_identity(str(self.actor["user"]))
        self.kube_user: str | None = None
        self.read_only_flag = read_only_flag
        self.alert = alert
        self.evidence = evidence
        self.alert_still_firing = alert_still_firing
        self.mirror_errors: list[str] = []
        #: Outcome records that could not be written after a change (shown loudly; exit 1).
        self.audit_incomplete: list[str] = []

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        read_only_flag: bool = False,
        alert: dict[str, Any] | None = None,
        evidence: Any = None,
        alert_still_firing: Callable[[], Awaitable[bool]] | None = None,
    ) -> Remediator:
        """The clients, audit log and guards the settings describe."""
        clients = Clients.from_settings(settings)
        return cls(
            clients,
            AuditLog(settings.audit.path, secrets=secrets_of(settings)),
            Guards.from_settings(settings, clients),
            read_only_flag=read_only_flag,
            alert=alert,
            evidence=evidence,
            alert_still_firing=alert_still_firing,
        )

    async def __aenter__(self) -> Remediator:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.clients.aclose()

    async def identify(self) -> str | None:
        """Who the Kubernetes API says we are (SelfSubjectReview); None when it cannot say.

        The username goes into every audit record's actor and into the Lease holder; `$USER`
        stays display only. Asked once per remediator.
        """
        if self.kube_user is not None or "kube_error" in self.actor:
            return self.kube_user
        try:
            found = await self.clients.identity()
        except BackendError as exc:
            self.actor = {**self.actor, "kube_user": None, "kube_error": str(exc)}
            return None
        self.kube_user = found.username
        self.actor = {**self.actor, "kube_user": found.username, "kube_groups": list(found.groups)}
        if self.holder == self._auto_holder:
            self.holder = self._auto_holder = holder_identity(found.username)
        return found.username

    # -- audit -----------------------------------------------------------------------------

    async def _record(
        self, run: _Run, transition: str, *, mirror: bool = True, **fields: Any
    ) -> dict[str, Any]:
        plan = run.plan
        # The append fsyncs: in a thread, so the caller's loop (the app's) keeps answering.
        record = await asyncio.to_thread(
            self.log.append,
            action_id=run.action_id,
            transition=transition,
            action=plan.action,
            target=plan.target.as_dict(),
            actor=self.actor,
            context=self.settings.context.name,  # `oncall audit list --context`
            alert=self.alert,
            **fields,
        )
        run.records.append(record)
        if mirror:
            await self._mirror(record, plan)
        return record

    async def _mirror(self, record: dict[str, Any], plan: Plan) -> None:
        stream = self.settings.audit.redis_stream
        try:
            async with asyncio.timeout(MIRROR_TIMEOUT_S):
                if stream:
                    await mirror_to_stream(self.clients.redis_writer(), stream, record)
                if self.settings.audit.kube_events and plan.target.namespace:
                    kube = await self.clients.kube_writer()
                    message = f"oncall {record['transition']}: {plan.summary} by {self.holder}"
                    await kube.create_event(
                        plan.target.namespace,
                        {"kind": plan.target.kind, "name": plan.target.name,
                         "uid": plan.target.uid or "",
                         "apiVersion": "apps/v1" if plan.target.kind == "Deployment" else "v1"},
                        reason=f"Oncall{record['transition'].title().replace('_', '')}",
                        message=message[:1000],
                    )  # fmt: skip
        except (BackendError, TimeoutError) as exc:
            self.mirror_errors.append(f"record {record['seq']}: {exc}")

    # -- lifecycle -------------------------------------------------------------------------

    async def plan(self, action: str, params: dict[str, Any]) -> Plan:
        """The action's plan in this remediator's context (`context_guard.stamped`)."""
        plan = await registry.plan(action, params, self.clients)
        return stamped(plan, await asyncio.to_thread(cluster_of, self.settings))

    async def preview(self, plan: Plan) -> Preview:
        """Dry run and every guard's verdict, before anyone is asked to confirm."""
        dry_run: Any
        verdicts = [read_only_guard(self.settings, flag=self.read_only_flag), *plan.checks]
        try:
            dry_run = await registry.action_named(plan.action).dry_run(plan, self.clients)
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
        verdicts.append(await self.guards.rate.check(plan.target.key))
        verdicts.append(await self.guards.breaker.check())
        verdicts.append(await self._lease_verdict(plan))
        return Preview(plan, dry_run, tuple(verdicts))

    async def _lease_verdict(self, plan: Plan) -> GuardVerdict:
        """The Lease guard's verdict for the preview: who holds the plan's Kubernetes Leases,
        or, for an action that takes none, what guards it instead."""
        unleased = registry.action_named(plan.action).unleased
        if unleased is not None:
            return GuardVerdict("lease", True, f"no Kubernetes Lease: {unleased}", {})
        return await TargetLease(self.clients, self.holder).holder_verdict(plan)

    async def run(
        self,
        plan: Plan,
        confirm: Confirm,
        *,
        progress: Progress | None = None,
        extra: Sequence[GuardVerdict] = (),
        rollback_of: str | None = None,
    ) -> Outcome:
        """Preview, ask, guard, execute and verify `plan`; every step audited.

        `extra` verdicts come from the caller (the CLI's "is there a terminal to ask on").
        """
        say = progress or (lambda _text: None)
        run = _Run(new_action_id(), plan)
        elsewhere = context_refusal(plan, self.settings)
        if elsewhere is not None:  # recorded here only: no client of this context is used
            await self._record(
                run, "refused", mirror=False, guard=elsewhere.guard, outcome=elsewhere.reason,
                detail=elsewhere.detail,
            )  # fmt: skip
            return run.end("refused", f"refused (context): {elsewhere.reason}", elsewhere)
        await self.identify()
        preview = await self.preview(plan)
        preview = run.preview = Preview(plan, preview.dry_run, (*preview.verdicts, *extra))
        await self._record(
            run, "proposed", request=plan.request, dry_run=preview.dry_run,
            evidence=self.evidence,
            # The notes too: the record is of the preview the person confirms on (secrets in
            # them are masked by the log, as everywhere in a record).
            detail={"before": plan.before, "after": plan.after, "undo": plan.undo,
                    "rollback_of": rollback_of, "notes": list(plan.notes)},
        )  # fmt: skip
        if preview.refusal:
            return await self._refuse(run, preview.refusal)
        if not await confirm(preview):
            await self._record(run, "declined")
            return run.end("declined", "declined: nothing was changed")
        await self._record(run, "approved", detail={"by": self.holder})
        if self.guards.two_person.required(plan.action):
            try:
                await self.guards.two_person.request(
                    run.action_id, plan.action, plan.target.label, self.person,
                    preview=render_preview(preview), confirm_word=plan.confirm_word,
                    target_json=json.dumps(plan.target.as_dict()),
                )  # fmt: skip
            except BackendError as exc:
                verdict = GuardVerdict("two-person", False, f"cannot ask for approval: {exc}", {})
                return await self._refuse(run, verdict)
            say(f"waiting for a second person: oncall remediate approve {run.action_id}")
            verdict = await self.guards.two_person.wait(run.action_id, timeout_s=APPROVAL_TIMEOUT_S)
            if not verdict.ok:
                return await self._refuse(run, verdict)
            await self._record(run, "approved", detail=verdict.detail)
        if registry.action_named(plan.action).unleased is not None:
            done = await self._execute(run, say)  # guarded by its own atomic write (`unleased`)
        else:
            lease = TargetLease(self.clients, self.holder)
            taken = await lease.take(plan)  # the target's and its workload's, as this process
            if not taken.ok:
                return await self._refuse(run, taken)
            try:
                done = await self._execute(run, say)
            finally:
                await lease.release(plan)
        if rollback_of and done.status == "verified":
            original = _Run(rollback_of, plan)
            await self._record_after(
                original, say, "rolled_back", outcome=done.message,
                detail={"by_action": done.action_id},
            )  # fmt: skip
            run.records.extend(original.records)
            return self._end(run, done.status, done.message)
        return done

    async def rollback_plan(self, action_id: str) -> Plan:
        """The plan that undoes a verified action: the same action back to the old value.

        Only from a log whose hash chain verifies: a record edited to say another "old value"
        must not become a change to production.
        """
        if not isinstance(self.log, VerifiableLog):
            raise PlanError(f"the audit log {self.log.path} cannot be verified: rollback refused")
        report = await asyncio.to_thread(self.log.verify)
        if not report.ok:
            problems = "; ".join(str(p) for p in report.problems[:3])
            raise PlanError(
                f"the audit log {self.log.path} does not verify ({problems}): rollback refused; "
                "see `oncall audit verify`"
            )
        records = [r for r in self.log.records() if r.get("action_id") == action_id]
        proposed = next((r for r in records if r.get("transition") == "proposed"), None)
        if proposed is None:
            raise PlanError(f"no action {action_id} in the audit log {self.log.path}")
        check_rollback_context(proposed, self.settings)
        if not any(r.get("transition") in ("verified", "succeeded") for r in records):
            raise PlanError(f"action {action_id} never ran: nothing to roll back")
        if any(r.get("transition") == "rolled_back" for r in records):
            raise PlanError(f"action {action_id} was rolled back already")
        undo = (proposed.get("detail") or {}).get("undo")
        if not undo:
            raise PlanError(f"{proposed.get('action')} cannot be rolled back (no previous value)")
        return await self.plan(str(proposed["action"]), dict(undo))

    @property
    def person(self) -> str:
        """Who this operator is for the two-person rule: the authenticated identity @ host."""
        who = self.kube_user or f"unauthenticated:{self.actor['user']}"
        return f"{who}@{self.actor['host']}"

    async def approve(self, action_id: str, confirm: ApprovalConfirm) -> GuardVerdict:
        """Approve another person's pending two-person action as this operator.

        Refused in read-only mode, without an authenticated identity (SelfSubjectReview), for
        the requester's own identity, once the requester is gone, and unless `confirm` (shown
        the requester's preview and the word to type) returns True. Audited in this log too.
        """
        await self.identify()
        request, refused = await self.guards.two_person.pending(action_id, self.person)
        if refused is None:
            read_only = read_only_guard(self.settings, flag=self.read_only_flag)
            refused = read_only if not read_only.ok else None
        if refused is None and self.kube_user is None:
            why = self.actor.get("kube_error") or "SelfSubjectReview gave no username"
            reason = f"an approval needs an identity authenticated by Kubernetes: {why}"
            refused = GuardVerdict("two-person", False, reason, {})
        if refused is None and not await confirm(
            request.get("preview", ""), request.get("confirm_word", "yes")
        ):
            refused = GuardVerdict("two-person", False, "not confirmed: nothing was approved", {})
        verdict = refused or await self.guards.two_person.approve(action_id, self.person)
        await self._approval_record(action_id, request, verdict)
        return verdict

    async def _approval_record(
        self, action_id: str, request: dict[str, str], verdict: GuardVerdict
    ) -> None:
        """The approver's own record of approving (or being refused) another's action."""
        try:
            target = json.loads(request.get("target_json") or "{}")
        except ValueError:
            target = {}
        fields: dict[str, Any] = {"guard": verdict.guard, "outcome": verdict.reason}
        if verdict.ok:
            fields = {}
        action = request.get("action")
        await asyncio.to_thread(
            self.log.append,
            action_id=action_id,
            transition="approved" if verdict.ok else "refused",
            action=action if action in ACTION_PARAMS else None,
            target=target or {"label": request.get("target")},
            actor=self.actor,
            detail={"approval_of": request.get("requester"), "approver": self.person},
            **fields,
        )

    async def _execute(self, run: _Run, say: Progress) -> Outcome:
        plan = run.plan
        action = registry.action_named(plan.action)
        recheck = await self._recheck(plan)
        if not recheck.ok:
            return await self._refuse(run, recheck)
        verdicts = [
            await self.guards.rate.check(plan.target.key),
            await self.guards.breaker.check(),
        ]
        refused = next((v for v in verdicts if not v.ok), None)
        if refused:
            return await self._refuse(run, refused)
        try:
            await self.guards.rate.record(plan.target.key)
        except BackendError as exc:  # fail closed: an action we cannot count does not run
            verdict = GuardVerdict("rate limit", False, f"guard state unavailable: {exc}", {})
            return await self._refuse(run, verdict)
        try:
            await self._record(run, "started", request=plan.request)
        except AuditError as exc:
            # Write-ahead: no `started` on disk, no execution. The refusal cannot be written
            # either; the front end shows it.
            verdict = GuardVerdict("audit", False, f"the started record was not written: {exc}", {})
            return run.end("refused", f"refused (audit): nothing was changed — {exc}", verdict)
        started = time.monotonic()
        try:
            result = await action.execute(plan, self.clients)
        except TargetChanged as exc:
            # Another process wrote first; the atomic write refused ours. Not a backend failure:
            # the circuit breaker does not count it.
            await self._record_after(
                run, say, "failed", guard="precondition", outcome=str(exc),
                duration_s=round(time.monotonic() - started, 3),
            )  # fmt: skip
            return self._end(run, "failed", f"failed (precondition), nothing changed: {exc}")
        except BackendError as exc:
            with contextlib.suppress(BackendError):  # the failure is audited either way
                await self.guards.breaker.record_failure(plan.target.key, str(exc))
            await self._record_after(
                run, say, "failed", outcome=str(exc),
                duration_s=round(time.monotonic() - started, 3),
            )  # fmt: skip
            return self._end(run, "failed", f"failed, nothing changed: {exc}")
        await self.guards.breaker.record_success()
        await self._record_after(
            run, say, "succeeded", outcome=result, duration_s=round(time.monotonic() - started, 3)
        )
        say("executed; verifying")
        try:
            verified, detail = await action.verify(plan, self.clients, result, say)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # Ctrl-C (asyncio.run cancels the main task) or the app going away: the change WAS
            # made; the log must say that verification did not finish, then the interrupt goes on.
            await self._record_after(
                run, say, "verified", duration_s=round(time.monotonic() - started, 3),
                outcome={"ok": False, "interrupted": True,
                         "detail": "verification interrupted: the change was made, unverified"},
            )  # fmt: skip
            raise
        await self._record_after(
            run, say, "verified", outcome={"ok": verified, "detail": detail},
            duration_s=round(time.monotonic() - started, 3),
        )  # fmt: skip
        return self._end(run, "verified" if verified else "unverified", detail)

    async def _record_after(self, run: _Run, say: Progress, transition: str, **fields: Any) -> None:
        """An outcome record after the change ran: one that cannot be written is shown at once
        and does not stop the verification (the change happened either way)."""
        try:
            await self._record(run, transition, **fields)
        except AuditError as exc:
            text = f"the {transition} record of action {run.action_id} was not written: {exc}"
            self.audit_incomplete.append(text)
            say(f"AUDIT INCOMPLETE: {text}")

    def _end(self, run: _Run, status: OutcomeStatus, message: str) -> Outcome:
        if self.audit_incomplete:
            message += " — audit incomplete: the change is not fully recorded"
        return run.end(status, message)

    async def _refuse(self, run: _Run, verdict: GuardVerdict) -> Outcome:
        await self._record(
            run, "refused", guard=verdict.guard, outcome=verdict.reason, detail=verdict.detail
        )
        return run.end("refused", f"refused ({verdict.guard}): {verdict.reason}", verdict)

    async def _recheck(self, plan: Plan) -> GuardVerdict:
        """The world as the person saw it: the alert still firing, the target unchanged."""
        if self.alert_still_firing is not None and not await self.alert_still_firing():
            return GuardVerdict("precondition", False, "the alert is no longer firing", {})
        action = registry.action_named(plan.action)
        try:
            changed = await action.changed_since_plan(plan, self.clients)
        except BackendError as exc:
            return GuardVerdict("precondition", False, f"cannot re-read the target: {exc}", {})
        if changed:
            return GuardVerdict("precondition", False, changed, {})
        return GuardVerdict("precondition", True, "unchanged", {})
