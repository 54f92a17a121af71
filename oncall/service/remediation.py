"""Remediations for the terminal app, behind one small seam: `RemediationRunner`.

The app hands a proposal, the alert it answers and the step's evidence to `run`, with two
callbacks of its own: `confirm(preview)` shows the preview and returns the person's answer, and
`progress(line)` shows what the action is doing. `LiveRemediations` is the real runner (the
executor of `oncall.remediation`, one audited lifecycle per call); tests hand in fakes.

The value types a screen shows (`PlanView`, `PreviewView`, `VerdictView`, `RemediationResult`)
are plain frozen dataclasses defined here, so that `oncall.tui` never imports the remediation
engine (DESIGN §3).

`LiveRemediations` runs each remediation on an event loop of its own, in a thread: the audit
log is appended and fsynced synchronously at every transition, and none of that may hold up a
key press. The two callbacks are carried back to the app's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from oncall.errors import OncallError
from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import Proposal, StepResult
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.remediation.executor import Outcome, Preview
    from oncall.remediation.guards import GuardVerdict
    from oncall.remediation.plans import Plan

T = TypeVar("T")

__all__ = [
    "AlertContext",
    "Confirm",
    "LiveRemediations",
    "PlanView",
    "PreviewView",
    "Progress",
    "RemediationResult",
    "RemediationRunner",
    "TargetView",
    "VerdictView",
]


@dataclass(frozen=True)
class TargetView:
    """Exactly what an action changes: kind, name, namespace and the UID it was planned on."""

    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None

    @property
    def label(self) -> str:
        """'Deployment ai/vllm'."""
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True)
class PlanView:
    """What an action will do: before → after, the exact request, how it is confirmed."""

    action: str
    params: dict[str, Any]
    target: TargetView
    before: Any
    after: Any
    request: dict[str, Any]
    dangerous: bool
    #: What the person types before Yes is allowed: the target's name for dangerous actions.
    confirm_word: str
    undo: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class VerdictView:
    """One guard's word on the action; `detail` carries e.g. the Lease's holder and since."""

    guard: str
    ok: bool
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def holder(self) -> str | None:
        """Who holds the target's Lease, when this is a refusal by the lease guard."""
        holder = self.detail.get("holder")
        return str(holder) if holder else None

    @property
    def since(self) -> str | None:
        since = self.detail.get("since")
        return str(since) if since else None


@dataclass(frozen=True)
class PreviewView:
    """What the person decides on: the plan, the server's dry run, every guard's verdict."""

    plan: PlanView
    dry_run: Any
    verdicts: tuple[VerdictView, ...] = ()

    @property
    def refused(self) -> tuple[VerdictView, ...]:
        """The verdicts that refuse the action; with any, the action cannot be confirmed."""
        return tuple(v for v in self.verdicts if not v.ok)


@dataclass(frozen=True)
class RemediationResult:
    """How one remediation ended.

    `status`: verified | unverified | succeeded | failed | refused | declined, or `not planned`
    when the action could not even be planned (nothing was proposed, nothing audited).
    `action_id` is the audit log's id of the action (None when not planned).
    """

    status: str
    message: str
    action_id: str | None = None
    #: The refusing guard's verdict, when refused (the lease guard's names the holder).
    refusal: VerdictView | None = None
    #: The command that undoes a verified change, when it can be undone.
    undo_command: str | None = None


@dataclass(frozen=True)
class AlertContext:
    """The alert a remediation answers: recorded in the audit, and re-checked before acting.

    `status` is the state the person saw when choosing the proposal. `latest` returns the
    app's newest state of the alert (refreshed every `alerts.refresh`); when the alert was
    firing, the action runs only if `latest` still says firing just before it acts.
    """

    name: str
    status: RuleStatus | None = None
    latest: Callable[[], RuleStatus | None] | None = None


#: Shows the preview and returns the person's answer (True: go ahead).
Confirm = Callable[[PreviewView], Awaitable[bool]]
#: Shows one line of what a running action is doing.
Progress = Callable[[str], None]


class RemediationRunner(Protocol):
    """Runs one proposed remediation through preview, confirmation, guards and verification."""

    async def run(
        self,
        proposal: Proposal,
        alert: AlertContext,
        evidence: StepResult | None,
        confirm: Confirm,
        progress: Progress,
    ) -> RemediationResult:
        """Plan, preview, ask `confirm`, act and verify; every transition audited.

        `confirm` is awaited on the caller's event loop, `progress` called there too. When a
        guard refuses the action before anyone is asked, `confirm` is still called once with
        that preview (so the person sees why), and its answer is ignored.
        """
        ...


class LiveRemediations:
    """Remediations against the configured cluster and Redis, with the executor's guards."""

    def __init__(self, settings: Settings, *, read_only_flag: bool = False) -> None:
        self.settings = settings
        self.read_only_flag = read_only_flag

    async def run(
        self,
        proposal: Proposal,
        alert: AlertContext,
        evidence: StepResult | None,
        confirm: Confirm,
        progress: Progress,
    ) -> RemediationResult:
        if proposal.error:
            return RemediationResult("not planned", f"not actionable: {proposal.error}")
        bridge = _Bridge(asyncio.get_running_loop(), confirm, progress, alert)
        try:
            # Its own loop in a thread: the audit's fsynced appends never block the app's loop.
            return await asyncio.to_thread(
                asyncio.run, self._run(proposal, alert, evidence, bridge)
            )
        except asyncio.CancelledError:
            # The app is going away. A question still open is withdrawn (nothing runs); an
            # action already confirmed runs on to its verdict so its audit is complete.
            bridge.withdraw()
            raise

    async def _run(
        self,
        proposal: Proposal,
        alert: AlertContext,
        evidence: StepResult | None,
        bridge: _Bridge,
    ) -> RemediationResult:
        # Deferred: the executor (Kubernetes and Redis writers, the audit log) and the checklist
        # machinery are imports the app's first frame does not need; this runs in a thread.
        from oncall.remediation.executor import Remediator
        from oncall.service.checklists import alert_facts

        firing = alert.status is not None and alert.status.state == "firing"
        async with Remediator(
            self.settings,
            read_only_flag=self.read_only_flag,
            alert=alert_facts(alert.name, alert.status),
            evidence=evidence_record(proposal, evidence),
            alert_still_firing=bridge.still_firing if firing and alert.latest else None,
        ) as remediator:
            try:
                plan = await remediator.plan(proposal.action, dict(proposal.params))
            except OncallError as exc:
                return RemediationResult("not planned", f"could not plan: {exc}")
            outcome = await remediator.run(plan, bridge.confirm, progress=bridge.progress)
            if not bridge.asked and outcome.preview is not None:
                await bridge.show(outcome.preview)  # refused before asking: show why
            return result_of(outcome)


class _Bridge:
    """The app's callbacks, called from the remediation's thread on the app's loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        confirm: Confirm,
        progress: Progress,
        alert: AlertContext,
    ) -> None:
        self.loop = loop
        self._confirm = confirm
        self._progress = progress
        self.alert = alert
        self.asked = False
        self.withdrawn = False
        self._pending: set[concurrent.futures.Future[Any]] = set()

    async def _on_app_loop(self, call: Callable[[], Awaitable[T]]) -> T:
        async def run() -> T:
            return await call()

        if self.withdrawn:
            raise asyncio.CancelledError  # nobody is waiting for an answer any more
        future = asyncio.run_coroutine_threadsafe(run(), self.loop)
        self._pending.add(future)
        try:
            return await asyncio.wrap_future(future)
        finally:
            self._pending.discard(future)

    def withdraw(self) -> None:
        """Cancel the calls waiting on the app, and any later one (called on the app's loop)."""
        self.withdrawn = True
        for future in list(self._pending):
            future.cancel()

    async def confirm(self, _plan: Plan, preview: Preview) -> bool:
        self.asked = True
        view = preview_view(preview)
        return bool(await self._on_app_loop(lambda: self._confirm(view)))

    async def show(self, preview: Preview) -> None:
        self.asked = True
        view = preview_view(preview)
        await self._on_app_loop(lambda: self._confirm(view))

    def progress(self, line: str) -> None:
        if self.withdrawn:
            return
        # The app's loop may have closed meanwhile: the action goes on, unseen but audited.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self._progress, line)

    async def still_firing(self) -> bool:
        latest = self.alert.latest
        if latest is None:
            return True

        async def read() -> RuleStatus | None:
            return latest()  # the app's state, read on the app's loop

        status = await self._on_app_loop(read)
        # Fails closed: "unknown" (Prometheus not answering) is not "still firing".
        return status is not None and status.state == "firing"


def evidence_record(proposal: Proposal, step: StepResult | None) -> dict[str, Any]:
    """What the audit keeps of the evidence: the proposal and its step's result, no raw facts."""
    record: dict[str, Any] = {
        "proposal": {"id": proposal.id, "title": proposal.title, "step": proposal.step},
    }
    if step is not None:
        record["step"] = {
            "id": step.id,
            "status": step.status,
            "summary": step.summary,
            "reason": step.reason,
            "probe": step.probe,
            "params": step.params,
            "started_at": step.started_at,
            "duration_s": step.duration_s,
            "evidence": [dataclasses.asdict(e) for e in step.evidence],
        }
    return record


def verdict_view(verdict: GuardVerdict) -> VerdictView:
    return VerdictView(verdict.guard, verdict.ok, verdict.reason, dict(verdict.detail))


def plan_view(plan: Plan) -> PlanView:
    target = plan.target
    return PlanView(
        action=plan.action,
        params=dict(plan.params),
        target=TargetView(target.kind, target.name, target.namespace, target.uid),
        before=plan.before,
        after=plan.after,
        request=dict(plan.request),
        dangerous=plan.dangerous,
        confirm_word=plan.confirm_word,
        undo=dict(plan.undo) if plan.undo is not None else None,
        notes=tuple(plan.notes),
    )


def preview_view(preview: Preview) -> PreviewView:
    return PreviewView(
        plan_view(preview.plan),
        preview.dry_run,
        tuple(verdict_view(v) for v in preview.verdicts),
    )


def result_of(outcome: Outcome) -> RemediationResult:
    refusal = None
    if outcome.status == "refused":
        record: Mapping[str, Any] = next(
            (r for r in reversed(outcome.records) if r.get("transition") == "refused"), {}
        )
        if record:
            refusal = VerdictView(
                str(record.get("guard", "")),
                False,
                str(record.get("outcome", "")),
                dict(record.get("detail") or {}),
            )
    undo = None
    if outcome.status == "verified" and outcome.plan is not None and outcome.plan.undo:
        undo = f"oncall remediate rollback {outcome.action_id}"
    return RemediationResult(outcome.status, outcome.message, outcome.action_id, refusal, undo)
