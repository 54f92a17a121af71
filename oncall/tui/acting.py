"""The one way a screen starts an action: plan it in an app worker, show its preview in the
confirm modal, await the person's answer there, then its progress and result.

The incident screen acts on a runbook's proposals (`p`, `1`…`9`); the board and the incident
screen also silence (`s`) and acknowledge (`a`), which they ask of the app by message
(`SilenceAlert`, `AcknowledgeAlert`): every one goes through `ActionDoor.start` and the same
`RemediationRunner` (the service's door to the executor), one action at a time app-wide.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel
from textual.worker import WorkerState

from oncall.errors import OncallError
from oncall.model.alerts import RuleStatus
from oncall.model.checklist_events import Proposal, StepResult
from oncall.model.write_path import Preview, RemediationResult
from oncall.service.remediation import (
    REVERT_WATCH,
    AlertContext,
    RemediationRequest,
    RemediationRunner,
)
from oncall.tui.confirm import RESULT_LOOK, ConfirmScreen

#: The worker group of remediations: one at a time, app-wide.
REMEDIATION_GROUP = "remediation"

#: Told what the action is doing: "asking to confirm …", "running …", the outcome line.
Say = Callable[[str], None]


def busy(app: App[Any]) -> bool:
    """Whether an action is being planned, asked or run somewhere in the app."""
    return any(
        w.group == REMEDIATION_GROUP and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        for w in app.workers
    )


def outcome_line(result: RemediationResult) -> str:
    """'✗ refused (lease): bob@ops-2 is acting on … · audit 5f3a…'."""
    symbol, _ = RESULT_LOOK.get(result.status, ("?", None))
    line = f"{symbol} {result.message or result.status}"
    if result.action_id:
        line += f" · audit {result.action_id}"
    return line


def describe(exc: BaseException) -> str:
    if isinstance(exc, OncallError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


async def act_with_modal(
    app: App[Any],
    runner: RemediationRunner,
    proposal: Proposal,
    alert: AlertContext,
    *,
    evidence: StepResult | None = None,
    say: Say,
) -> RemediationResult:
    """Run `proposal`; its preview in a `ConfirmScreen`; the result shown there once confirmed,
    else as a notification. `say` hears each phase and the outcome line."""
    modal: ConfirmScreen | None = None

    async def confirm(preview: Preview) -> bool:
        nonlocal modal
        modal = ConfirmScreen(preview, alert=alert.name, proposal=proposal.title)
        say(f"asking to confirm {proposal.title}…")
        await app.push_screen(modal)
        answer = await modal.answer
        if answer:
            say(f"running {proposal.title}…")
        return answer

    def progress(line: str) -> None:
        if modal is not None and (modal.is_attached or not line.startswith(REVERT_WATCH)):
            modal.post_message(ConfirmScreen.Progress(line))
        elif line.startswith(REVERT_WATCH):
            # The revert watch runs on after the result; once its modal is gone, say it here.
            reverted = "REVERTED" in line
            app.notify(line, severity="error" if reverted else "information", timeout=30)
            say(line)

    try:
        result = await runner.run(RemediationRequest(proposal, alert, evidence), confirm, progress)
    except Exception as exc:  # shown like any other outcome, never fatal
        result = RemediationResult("failed", describe(exc))
    line = outcome_line(result)
    say(line)
    if modal is not None and modal.confirmed and modal.is_attached:
        modal.post_message(ConfirmScreen.Finished(result))
    else:
        severity: SeverityLevel = "information" if result.status == "declined" else "warning"
        app.notify(line, severity=severity)
    return result


def _quiet(_line: str) -> None:
    return None


@dataclass(frozen=True)
class ActionDoor:
    """What a screen needs to start an action: the app its modal and worker belong to, the
    runner (made on first use), the board's live statuses (the alert's context, re-read at
    the re-check) — one door for the incident screen's proposals, silences and acks."""

    app: App[Any]
    runner: Callable[[], RemediationRunner | None]
    statuses: Mapping[str, RuleStatus]

    def context(self, alert: str) -> AlertContext:
        """`alert` as the runner sees it: its status now, and how to read it again later."""
        return AlertContext(
            alert, self.statuses.get(alert), latest=lambda: self.statuses.get(alert)
        )

    def start(
        self,
        proposal: Proposal,
        alert: str,
        *,
        evidence: StepResult | None = None,
        say: Say | None = None,
        done: Callable[[RemediationResult], None] | None = None,
    ) -> bool:
        """`act_with_modal` in an app worker (it outlives the screen once confirmed); False,
        with a notification, when there is no runner or another action is under way."""
        app = self.app
        runner = self.runner()
        if runner is None:
            app.notify("remediations are not available here", severity="warning")
            return False
        if busy(app):
            app.notify("a remediation is in progress; wait for its result", severity="warning")
            return False
        context = self.context(alert)

        async def work() -> None:
            result = await act_with_modal(
                app, runner, proposal, context, evidence=evidence, say=say or _quiet
            )
            if done is not None:
                done(result)

        app.run_worker(
            work(),
            name=f"remediation {proposal.action}",
            group=REMEDIATION_GROUP,
            exit_on_error=False,
            description=f"{proposal.action} for {alert}",
        )
        return True
