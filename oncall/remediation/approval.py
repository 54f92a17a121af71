"""The second person's side of the two-person rule: approving another's pending action.

The requester's side (asking, then waiting) is in the executor's lifecycle; here the approver,
in their own `oncall remediate approve`, is refused by the rule itself (`ApprovalGuard.pending`:
no such request, their own, the requester gone), in read-only mode, without an identity the
Kubernetes API authenticated, and unless they type the word on the requester's preview. The
approver's log records the approval (or the refusal) too, naming both people.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from oncall.model.action_params import ACTION_PARAMS
from oncall.model.write_path import GuardVerdict
from oncall.remediation.policy import ApprovalGuard

#: The approver's typed confirmation: shown the requester's preview and the word to type.
ApprovalConfirm = Callable[[str, str], Awaitable[bool]]


async def decide(
    rule: ApprovalGuard,
    action_id: str,
    approver: str,
    confirm: ApprovalConfirm,
    *,
    read_only: GuardVerdict,
    unauthenticated: str | None,
) -> tuple[dict[str, str], GuardVerdict]:
    """The pending request and `approver`'s verdict on it: the first refusal (the rule's, then
    `read_only`'s, then `unauthenticated`: why there is no authenticated identity, then not
    confirmed), else the rule's approval. `confirm` is asked only when nothing refused."""
    request, refused = await rule.pending(action_id, approver)
    if refused is None and not read_only.ok:
        refused = read_only
    if refused is None and unauthenticated is not None:
        reason = f"an approval needs an identity authenticated by Kubernetes: {unauthenticated}"
        refused = GuardVerdict("two-person", False, reason, {})
    if refused is None and not await confirm(
        request.get("preview", ""), request.get("confirm_word", "yes")
    ):
        refused = GuardVerdict("two-person", False, "not confirmed: nothing was approved", {})
    return request, refused or await rule.approve(action_id, approver)


def approval_record(
    action_id: str,
    request: dict[str, str],
    verdict: GuardVerdict,
    *,
    actor: dict[str, Any],
    approver: str,
) -> dict[str, Any]:
    """The fields of the approver's own record of approving (or being refused) the action."""
    try:
        target = json.loads(request.get("target_json") or "{}")
    except ValueError:
        target = {}
    fields: dict[str, Any] = {"guard": verdict.guard, "outcome": verdict.reason}
    if verdict.ok:
        fields = {}
    action = request.get("action")
    return {
        "action_id": action_id,
        "transition": "approved" if verdict.ok else "refused",
        "action": action if action in ACTION_PARAMS else None,
        "target": target or {"label": request.get("target")},
        "actor": actor,
        "detail": {"approval_of": request.get("requester"), "approver": approver},
        **fields,
    }
