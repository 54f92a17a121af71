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
`declined`, `approved`, `started`, `succeeded` / `failed`, `verified`, `rolled_back`, and
`reverted` (a managed target put back after `verified`: `revert_watch`). Each
record also goes to the team's Redis Stream and, for Kubernetes targets, as an Event on the
target (`audit_mirror`); a mirror that fails is noted, never fatal, and never loses the local
record. The dry run's refusal and the re-check before the write are `preconditions`; the
approver's side of the two-person rule is `approval`, what undoes an action is `rollback`.

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
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from oncall.audit.log import AuditLog
from oncall.audit.records import AuditError, actor_now, new_action_id, secrets_of
from oncall.errors import BackendError
from oncall.model.write_path import (
    Confirm,
    GuardVerdict,
    Outcome,
    OutcomeStatus,
    Plan,
    Preview,
    Progress,
)
from oncall.remediation import registry
from oncall.remediation.action import TargetChanged
from oncall.remediation.after_change import INTERRUPTED_EXECUTING, after_change
from oncall.remediation.approval import (
    ApprovalConfirm,
    approval_record,
    decide,
    live_preview,
    second_person,
)
from oncall.remediation.audit_mirror import anchor_record, mirror_record
from oncall.remediation.audit_trail import Log, Run
from oncall.remediation.capacity_guard import (
    capacity_of,
    overridable,
    overridden,
    preview_verdict,
    recheck_verdict,
)
from oncall.remediation.clients import Clients
from oncall.remediation.context_guard import cluster_of, context_refusal, stamped
from oncall.remediation.guards import anchor_guard, read_only_guard, two_person_note
from oncall.remediation.lease import TargetLease, holder_identity
from oncall.remediation.managed import GUARD as MANAGED
from oncall.remediation.managed import managed_guard
from oncall.remediation.policy import Guards
from oncall.remediation.preconditions import dry_run_refusal, recheck
from oncall.remediation.revert_watch import RevertWatch
from oncall.remediation.rollback import undo_of
from oncall.settings import Settings


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
        #: Armed after a verified change to a managed Deployment; the front end runs it
        #: (`revert_watch.watch_and_record`) without holding up the outcome.
        self.revert_watch: RevertWatch | None = None

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
        self, run: Run, transition: str, *, mirror: bool | None = True, **fields: Any
    ) -> dict[str, Any]:
        """Append one record, then copy it (`mirror` None: as an Event only, its Stream copy
        is the caller's, who must know it was made: the `started` record's)."""
        plan = run.plan
        # The append fsyncs: in a thread, so the caller's loop (the app's) keeps answering.
        # Shielded: a Ctrl-C meanwhile does not stop the append, and its record is still known
        # to this run (the interrupt handlers ask what was written).
        append = asyncio.ensure_future(asyncio.to_thread(
            self.log.append,
            action_id=run.action_id,
            transition=transition,
            action=plan.action,
            target=plan.target.as_dict(),
            actor=self.actor,
            context=self.settings.context.name,  # `oncall audit list --context`
            alert=self.alert,
            **fields,
        ))  # fmt: skip
        try:
            record = await asyncio.shield(append)
        except asyncio.CancelledError:
            run.records.append(await append)
            raise
        run.records.append(record)
        if mirror is not False:
            await self._mirror(record, plan, stream=mirror is True)
        return record

    async def _mirror(self, record: dict[str, Any], plan: Plan, *, stream: bool = True) -> None:
        problem = await mirror_record(self.clients, record, plan, self.holder, stream=stream)
        if problem is not None:
            self.mirror_errors.append(problem)

    # -- lifecycle -------------------------------------------------------------------------

    async def plan(self, action: str, params: dict[str, Any]) -> Plan:
        """The action's plan in this remediator's context (`context_guard.stamped`)."""
        plan = await registry.plan(action, params, self.clients)
        return stamped(plan, await asyncio.to_thread(cluster_of, self.settings))

    async def preview(self, plan: Plan) -> Preview:
        """Dry run and every guard's verdict, before anyone is asked to confirm."""
        dry_run: Any
        verdicts = [
            read_only_guard(self.settings, flag=self.read_only_flag),
            anchor_guard(self.settings),
            *plan.checks,
        ]
        try:
            dry_run = await registry.action_named(plan.action).dry_run(plan, self.clients)
        except BackendError as exc:
            dry_run = {"error": str(exc)}
            verdicts.append(dry_run_refusal(exc))
        managed = await managed_guard(plan, self.clients)  # a Deployment something re-applies
        if managed is not None:
            verdicts.append(managed)
        verdicts.append(await self.guards.rate.check(plan.target.key))
        verdicts.append(await self.guards.breaker.check())
        verdicts.append(await self._lease_verdict(plan))
        capacity = await preview_verdict(registry.action_named(plan.action), plan, self.clients)
        if capacity is not None:  # an action that takes serving pods away: capacity_guard.py
            verdicts.append(capacity)
        return overridable(Preview(plan, dry_run, tuple(verdicts)))

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
        run = Run(new_action_id(), plan)
        elsewhere = context_refusal(plan, self.settings)
        if elsewhere is not None:  # recorded here only: no client of this context is used
            await self._record(
                run, "refused", mirror=False, guard=elsewhere.guard, outcome=elsewhere.reason,
                detail=elsewhere.detail,
            )  # fmt: skip
            return run.end("refused", f"refused (context): {elsewhere.reason}", elsewhere)
        await self.identify()
        preview = await self.preview(plan)
        preview = Preview(preview.plan, preview.dry_run, (*preview.verdicts, *extra))
        run.preview = preview
        await self._record(
            run, "proposed", request=plan.request, dry_run=preview.dry_run,
            evidence=self.evidence,
            # The notes too: the record is of the preview the person confirms on (secrets in
            # them are masked by the log, as everywhere in a record).
            # The anchor and the two-person policy too: a rule switched off (`--set
            # guards.two_person=[]`, audit.local_only) is on record, not silent (docs/audit.md).
            detail={"before": plan.before, "after": plan.after, "undo": plan.undo,
                    "rollback_of": rollback_of, "notes": list(plan.notes),
                    "anchor": anchor_guard(self.settings).reason,
                    "two_person": two_person_note(self.settings, plan.action),
                    # Who re-applies the target, and the policy: a warning gone past is on record.
                    "managed": next((v.detail for v in preview.verdicts
                                     if v.guard == MANAGED), None),
                    "capacity": _capacity_record(preview)},
        )  # fmt: skip
        if preview.refusal:
            return await self._refuse(run, preview.refusal)
        if not await confirm(preview):
            await self._record(run, "declined")
            return run.end("declined", "declined: nothing was changed")
        override = overridden(preview)  # confirmed: the phrase was part of the typed word
        await self._record(
            run, "approved",
            detail={"by": self.holder, **({"capacity_override": override} if override else {})},
        )  # fmt: skip
        if self.guards.two_person.required(plan.action):
            verdict = await second_person(
                self.guards.two_person, run.action_id, preview, self.person, say
            )
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
                async with lease.kept(plan):  # renewed while it runs and verifies
                    done = await self._execute(run, say)
            finally:
                await lease.release(plan)
        if rollback_of and done.status == "verified":
            original = Run(rollback_of, plan)
            await self._record_after(
                original, say, "rolled_back", outcome=done.message,
                detail={"by_action": done.action_id},
            )  # fmt: skip
            run.records.extend(original.records)
            return self._end(run, done.status, done.message)
        return done

    async def rollback_plan(self, action_id: str) -> Plan:
        """The plan that undoes a verified action: the same action back to the old value, only
        from a log whose hash chain verifies (`rollback.undo_of`)."""
        return await self.plan(*await undo_of(self.log, self.settings, action_id))

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
        unauthenticated = None
        if self.kube_user is None:
            unauthenticated = self.actor.get("kube_error") or "SelfSubjectReview gave no username"
        request, verdict = await decide(
            self.guards.two_person, action_id, self.person, confirm,
            read_only=read_only_guard(self.settings, flag=self.read_only_flag),
            unauthenticated=unauthenticated,
            live=lambda request: live_preview(self.plan, self.clients, request),
        )  # fmt: skip
        fields = approval_record(
            action_id, request, verdict, actor=self.actor, approver=self.person
        )
        record = await asyncio.to_thread(self.log.append, **fields)  # fsyncs: off the loop
        # Like every record, to the team Stream (docs/audit.md: verify found approvals
        # "written by hand"); a copy that fails is said, as the requester's are.
        problem = await anchor_record(self.clients, record)
        if problem is not None:  # said with the verdict, as `remediate` says its own
            self.mirror_errors.append(problem)
            note = f" (not copied to the team Stream: {problem})"
            return GuardVerdict(verdict.guard, verdict.ok, verdict.reason + note, verdict.detail)
        return verdict

    async def _execute(self, run: Run, say: Progress) -> Outcome:
        plan = run.plan
        action = registry.action_named(plan.action)
        seen = await recheck(plan, self.clients, self.alert_still_firing)
        if not seen.ok:
            return await self._refuse(run, seen)
        capacity = None
        if run.preview is not None:  # the capacity facts re-read: capacity_guard.py
            capacity = await recheck_verdict(action, plan, self.clients, run.preview)
            if capacity is not None and not capacity.ok:
                return await self._refuse(run, capacity)
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
            rechecked = (
                {}
                if capacity is None
                else {"detail": {"capacity": {**capacity.detail, "reason": capacity.reason}}}
            )
            started_record = await self._record(
                run, "started", mirror=None, request=plan.request, **rechecked
            )
        except AuditError as exc:
            # Write-ahead: no `started` on disk, no execution. The refusal cannot be written
            # either; the front end shows it.
            verdict = GuardVerdict("audit", False, f"the started record was not written: {exc}", {})
            return run.end("refused", f"refused (audit): nothing was changed — {exc}", verdict)
        unanchored = await anchor_record(self.clients, started_record)
        if unanchored is not None:
            # Write-ahead to the team too: a change the Stream does not know of does not run.
            reason = f"the started record could not be copied to the team Stream: {unanchored}"
            await self._record_after(run, say, "failed", guard="anchor", outcome=reason)
            verdict = GuardVerdict("anchor", False, reason, {})
            return run.end("refused", f"refused (anchor): nothing was changed — {reason}", verdict)
        started = time.monotonic()
        try:
            result = await action.execute(plan, self.clients)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # Ctrl-C while the change is being made: whether it was is unknown; the log says
            # so before the interrupt goes on (docs/audit.md).
            await self._record_after(
                run, say, "failed", duration_s=round(time.monotonic() - started, 3),
                outcome={"interrupted": True, "detail": INTERRUPTED_EXECUTING},
            )  # fmt: skip
            raise
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
        return await after_change(self, run, action=action, result=result, say=say, started=started)

    async def _record_after(self, run: Run, say: Progress, transition: str, **fields: Any) -> None:
        """An outcome record after the change ran: one that cannot be written is shown at once
        and does not stop the verification (the change happened either way)."""
        try:
            await self._record(run, transition, **fields)
        except AuditError as exc:
            text = f"the {transition} record of action {run.action_id} was not written: {exc}"
            self.audit_incomplete.append(text)
            say(f"AUDIT INCOMPLETE: {text}")

    def _end(self, run: Run, status: OutcomeStatus, message: str) -> Outcome:
        if self.audit_incomplete:
            message += " — audit incomplete: the change is not fully recorded"
        return run.end(status, message)

    async def _refuse(self, run: Run, verdict: GuardVerdict) -> Outcome:
        await self._record(
            run, "refused", guard=verdict.guard, outcome=verdict.reason, detail=verdict.detail
        )
        return run.end("refused", f"refused ({verdict.guard}): {verdict.reason}", verdict)


def _capacity_record(preview: Preview) -> dict[str, Any] | None:
    """The capacity guard's verdict and numbers as the preview showed them, for the record."""
    shown = capacity_of(preview)
    return None if shown is None else {**shown.detail, "reason": shown.reason}
