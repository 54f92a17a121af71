"""What undoes a recorded action: read from an audit log whose hash chain verifies.

A rollback is the same action back to the value it replaced (the `undo` of its `proposed`
record), planned only for an action that ran, was not rolled back already, and ran in this
context (`context_guard.check_rollback_context`). Only from a log that verifies: a record
edited to say another "old value" must not become a change to production.
"""

from __future__ import annotations

import asyncio
from typing import Any

from oncall.remediation.action import PlanError
from oncall.remediation.audit_trail import Log, VerifiableLog
from oncall.remediation.context_guard import check_rollback_context
from oncall.settings import Settings


async def undo_of(log: Log, settings: Settings, action_id: str) -> tuple[str, dict[str, Any]]:
    """The action and parameters that undo verified action `action_id`; PlanError saying why
    there are none (a log that does not verify, no such action, nothing to undo)."""
    if not isinstance(log, VerifiableLog):
        raise PlanError(f"the audit log {log.path} cannot be verified: rollback refused")
    report = await asyncio.to_thread(log.verify)
    if not report.ok:
        problems = "; ".join(str(p) for p in report.problems[:3])
        raise PlanError(
            f"the audit log {log.path} does not verify ({problems}): rollback refused; "
            "see `oncall audit verify`"
        )
    records = [r for r in log.records() if r.get("action_id") == action_id]
    proposed = next((r for r in records if r.get("transition") == "proposed"), None)
    if proposed is None:
        raise PlanError(f"no action {action_id} in the audit log {log.path}")
    check_rollback_context(proposed, settings)
    if not any(r.get("transition") in ("verified", "succeeded") for r in records):
        raise PlanError(f"action {action_id} never ran: nothing to roll back")
    if any(r.get("transition") == "rolled_back" for r in records):
        raise PlanError(f"action {action_id} was rolled back already")
    undo = (proposed.get("detail") or {}).get("undo")
    if not undo:
        raise PlanError(f"{proposed.get('action')} cannot be rolled back (no previous value)")
    return str(proposed["action"]), dict(undo)
