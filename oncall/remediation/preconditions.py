"""The checks of the target itself, as opposed to the guards' counters and Leases.

Before anyone is asked: what a failed server-side dry run says (`dry_run_refusal`: Kubernetes
refused us, or the target is not as planned). Just before the write, after the confirmation
and the Lease: the world as the person saw it (`recheck`: the alert still firing, the target
unchanged since the plan, as the action itself decides), since the person may have taken a
while to type the word.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict, Plan
from oncall.remediation import registry
from oncall.remediation.clients import Clients


def dry_run_refusal(exc: BackendError) -> GuardVerdict:
    """The preview's refusal for a dry run that failed with `exc`."""
    if exc.reason == "forbidden":
        reason = f"Kubernetes refused the dry run: {exc.detail}"
        return GuardVerdict("permission", False, reason, {})
    if exc.reason in ("conflict", "invalid", "not found"):
        reason = f"the target is not as planned: {exc.detail or exc.reason}"
        return GuardVerdict("precondition", False, reason, {})
    return GuardVerdict("dry run", False, str(exc), {})


async def recheck(
    plan: Plan, clients: Clients, alert_still_firing: Callable[[], Awaitable[bool]] | None
) -> GuardVerdict:
    """The world as the person saw it: the alert still firing, the target unchanged."""
    if alert_still_firing is not None and not await alert_still_firing():
        return GuardVerdict("precondition", False, "the alert is no longer firing", {})
    action = registry.action_named(plan.action)
    try:
        changed = await action.changed_since_plan(plan, clients)
    except BackendError as exc:
        return GuardVerdict("precondition", False, f"cannot re-read the target: {exc}", {})
    if changed:
        return GuardVerdict("precondition", False, changed, {})
    return GuardVerdict("precondition", True, "unchanged", {})
