"""What the executor does once an action's change was made: `succeeded`, then the verification
and its `verified` record, each recorded before the process may exit.

Ctrl-C (asyncio.run cancels the main task) or the app going away anywhere after the change
was made (the circuit breaker's reset, the `succeeded` record and its copies, the verification)
is recorded as such before the interrupt goes on (docs/audit.md: one landing between the
change and its verification left the change without any record).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from oncall.errors import BackendError
from oncall.model.write_path import Outcome, Progress
from oncall.remediation.revert_watch import arm

if TYPE_CHECKING:
    from oncall.remediation.action import Action
    from oncall.remediation.audit_trail import Run
    from oncall.remediation.executor import Remediator

INTERRUPTED_EXECUTING = "interrupted while the change was being made: it may have been made"
INTERRUPTED_VERIFYING = "verification interrupted: the change was made, unverified"


async def after_change(
    remediator: Remediator, run: Run, *, action: Action[Any], result: Any, say: Progress,
    started: float,
) -> Outcome:  # fmt: skip
    """Record `succeeded` (the breaker reset), verify and record `verified`; interrupted,
    whatever is missing of those is recorded (`interrupted: true`) and the interrupt raised."""
    plan = run.plan

    def took() -> float:
        return round(time.monotonic() - started, 3)

    try:
        try:
            await remediator.guards.breaker.record_success()
        except BackendError as exc:  # the change was made: its record matters more
            say(f"the circuit breaker was not reset: {exc}")
        await remediator._record_after(run, say, "succeeded", outcome=result, duration_s=took())
        say("executed; verifying")
        verified, detail = await action.verify(plan, remediator.clients, result, say)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if not any(r.get("transition") == "succeeded" for r in run.records):
            await remediator._record_after(
                run,
                say,
                "succeeded",
                outcome=result,
                duration_s=took(),
                detail={"interrupted": True},
            )
        await remediator._record_after(
            run, say, "verified", duration_s=took(),
            outcome={"ok": False, "interrupted": True, "detail": INTERRUPTED_VERIFYING},
        )  # fmt: skip
        raise
    await remediator._record_after(
        run, say, "verified", outcome={"ok": verified, "detail": detail}, duration_s=took()
    )
    # A managed target: watch for its revert. Unverified too: an operator that reconciles at
    # once (production-stack's) may have put it back during the rollout; the watch says so.
    if arm(remediator, run) is not None:
        detail += "; watching for a revert"
    return remediator._end(run, "verified" if verified else "unverified", detail)
