"""Remediations for the front ends: the one door to the remediation executor.

The app hands a `RemediationRequest` (a proposal, the alert it answers and the step's evidence)
to a `RemediationRunner`, with two callbacks of its own: `confirm(preview)` shows the preview and
returns the person's answer, and `progress(line)` shows what the action is doing.
`LiveRemediations` is the real runner (the executor of `oncall.remediation`, one audited
lifecycle per call); tests hand in fakes. The CLI's `oncall remediate` opens a remediator
with `open_remediator` and approves with `approve`.

The values that cross this door (`Plan`, `Preview`, `GuardVerdict`, `Outcome`,
`RemediationResult`) are the write path's own, from `oncall.model.write_path`: a screen holds
them without importing the executor (docs/architecture.md §1).

The remediation runs on the caller's event loop; the executor moves only the audit log's fsync
into a thread. The executor is imported on first use, in a thread: the app's first frame does
not need it, and a key press does not wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from oncall.errors import OncallError
from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import Proposal, StepResult
from oncall.model.write_path import Confirm, GuardVerdict, Preview, Progress, RemediationResult
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.remediation.executor import Remediator

__all__ = [
    "AlertContext",
    "LiveRemediations",
    "RemediationRequest",
    "RemediationRunner",
    "approve",
    "evidence_record",
    "open_remediator",
]


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


@dataclass(frozen=True)
class RemediationRequest:
    """What the person chose to run: a proposal, the alert it answers, its step's evidence."""

    proposal: Proposal
    alert: AlertContext
    evidence: StepResult | None = None


class RemediationRunner(Protocol):
    """Runs one proposed remediation through preview, confirmation, guards and verification."""

    async def run(
        self, request: RemediationRequest, confirm: Confirm, progress: Progress
    ) -> RemediationResult:
        """Plan, preview, ask `confirm`, act and verify; every transition audited.

        `confirm` is awaited on the caller's event loop, `progress` called there too. When a
        guard refuses the action before anyone is asked, `confirm` is still called once with
        that preview (so the person sees why), and its answer is ignored.
        """
        ...


def _remediator_class() -> type[Remediator]:
    # Deferred: the executor (Kubernetes and Redis writers, the audit log) is an import the
    # app's first frame and the headless read commands do not need.
    from oncall.remediation.executor import Remediator

    return Remediator


@asynccontextmanager
async def open_remediator(
    settings: Settings, *, read_only_flag: bool = False
) -> AsyncIterator[Remediator]:
    """A remediator for one operator on the terminal (`oncall remediate`); closes its clients."""
    async with _remediator_class().from_settings(settings, read_only_flag=read_only_flag) as r:
        yield r


#: The approver's typed confirmation: shown the requester's preview and the word to type.
ApprovalConfirm = Callable[[str, str], Awaitable[bool]]


async def approve(
    settings: Settings, action_id: str, confirm: ApprovalConfirm, *, read_only_flag: bool = False
) -> GuardVerdict:
    """Approve another person's pending two-person action as the operator running this: as
    the identity Kubernetes authenticates, after `confirm` on the requester's preview."""
    async with open_remediator(settings, read_only_flag=read_only_flag) as remediator:
        return await remediator.approve(action_id, confirm)


class LiveRemediations:
    """Remediations against the configured cluster and Redis, with the executor's guards."""

    def __init__(self, settings: Settings, *, read_only_flag: bool = False) -> None:
        self.settings = settings
        self.read_only_flag = read_only_flag

    async def run(
        self, request: RemediationRequest, confirm: Confirm, progress: Progress
    ) -> RemediationResult:
        proposal, alert, evidence = request.proposal, request.alert, request.evidence
        if proposal.error:
            return RemediationResult("not planned", f"not actionable: {proposal.error}")
        context = alert.status.context if alert.status is not None else ""
        if context and context != self.settings.context.name:  # contexts: one runner each
            why = f"the alert is of context {context!r}, not {self.settings.context.name!r}"
            return RemediationResult("not planned", why)
        answers: list[bool] = []  # the person's answers to `confirm`, in order

        async def ask(preview: Preview) -> bool:
            answer = await confirm(preview)
            answers.append(answer)
            return answer

        async def lifecycle() -> RemediationResult:
            from oncall.service.checklists import alert_facts

            firing = alert.status is not None and alert.status.state == "firing"
            # The first import of the executor takes a while (~0.1 s): not on the app's loop.
            remediator_class = await asyncio.to_thread(_remediator_class)
            opened = remediator_class.from_settings(
                self.settings,
                read_only_flag=self.read_only_flag,
                alert=alert_facts(alert.name, alert.status),
                evidence=evidence_record(proposal, evidence),
                alert_still_firing=_still_firing(alert) if firing and alert.latest else None,
            )
            remediator = await opened.__aenter__()
            handed_off = False
            try:
                try:
                    plan = await remediator.plan(proposal.action, dict(proposal.params))
                except OncallError as exc:
                    return RemediationResult("not planned", f"could not plan: {exc}")
                outcome = await remediator.run(plan, ask, progress=progress)
                if not answers and outcome.preview is not None:
                    await ask(outcome.preview)  # refused before asking: show why
                # A managed target's revert watch outlives this call; it closes the clients.
                handed_off = hand_off_revert_watch(remediator, progress)
                return RemediationResult.of(outcome)
            finally:
                if not handed_off:
                    await opened.__aexit__(None, None, None)

        task = asyncio.ensure_future(lifecycle())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            # The screen or the app is going away. A question still open is withdrawn (nothing
            # runs); an action already confirmed runs on to its verdict while the loop lives.
            if not any(answers):
                task.cancel()
                raise
            while not task.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(task)
            raise


#: What the revert watch's lines start with, so that the app shows them after the modal closed.
REVERT_WATCH = "revert watch: "
#: The revert watches running after their action's result was shown (a reference keeps each).
_WATCHES: set[asyncio.Task[None]] = set()


def hand_off_revert_watch(remediator: Remediator, progress: Progress) -> bool:
    """Run the remediator's armed revert watch as a task of its own, which then closes the
    remediator: the result is shown at once, the watch's lines arrive later (REVERT_WATCH).
    False when no watch is armed (the caller closes the remediator)."""
    if getattr(remediator, "revert_watch", None) is None:  # none armed (or a test's stand-in)
        return False

    async def watch_then_close() -> None:
        from oncall.remediation.revert_watch import watch_and_record

        try:
            await watch_and_record(remediator, lambda line: progress(REVERT_WATCH + line))
        finally:
            await remediator.__aexit__(None, None, None)

    task = asyncio.ensure_future(watch_then_close())
    _WATCHES.add(task)
    task.add_done_callback(_WATCHES.discard)
    return True


def _still_firing(alert: AlertContext) -> Callable[[], Awaitable[bool]]:
    """The re-check before acting: the app's newest state of the alert says firing."""

    async def still_firing() -> bool:
        status = alert.latest() if alert.latest is not None else None
        # Fails closed: "unknown" (Prometheus not answering) is not "still firing".
        return status is not None and status.state == "firing"

    return still_firing


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
