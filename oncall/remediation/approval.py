"""The second person's side of the two-person rule: approving another's pending action.

The requester's side (asking, then waiting) is in the executor's lifecycle; here the approver,
in their own `oncall remediate approve`, is refused by the rule itself (`ApprovalGuard.pending`:
no such request, their own, the requester gone), in read-only mode, without an identity the
Kubernetes API authenticated, and unless they type the word on the preview recomputed from the
live target (`LivePreview`: the action and parameters asked for, planned again by the approver;
the preview the requester stored is never shown, docs/audit.md). The approver's log records
the approval (or the refusal) too, naming both people, and copies it to the team Stream.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from oncall.audit.records import UNKNOWN_APPROVAL
from oncall.errors import BackendError
from oncall.model.action_params import ACTION_PARAMS
from oncall.model.write_path import GuardVerdict, Plan, Preview, Progress, render_preview
from oncall.remediation import registry
from oncall.remediation.action import PlanError
from oncall.remediation.clients import Clients
from oncall.remediation.policy import APPROVAL_TIMEOUT_S, ApprovalGuard

#: The approver's typed confirmation: shown the live preview and the word to type.
ApprovalConfirm = Callable[[str, str], Awaitable[bool]]
#: The preview and word of a request, recomputed from the live target; or why there is none.
LivePreview = Callable[[dict[str, str]], Awaitable["tuple[str, str] | GuardVerdict"]]


async def second_person(
    rule: ApprovalGuard, action_id: str, preview: Preview, requester: str, say: Progress
) -> GuardVerdict:
    """The requester's side: store the request (what the approver's preview is recomputed
    from: the action, its parameters, the target) and wait for an approval, or the refusal."""
    plan = preview.plan
    try:
        await rule.request(
            action_id, plan.action, plan.target.label, requester,
            preview=render_preview(preview), confirm_word=plan.confirm_word,
            target_json=json.dumps(plan.target.as_dict(), sort_keys=True),
            params_json=json.dumps(plan.params, sort_keys=True, default=str),
        )  # fmt: skip
    except BackendError as exc:
        return GuardVerdict("two-person", False, f"cannot ask for approval: {exc}", {})
    say(f"waiting for a second person: oncall remediate approve {action_id}")
    return await rule.wait(action_id, timeout_s=APPROVAL_TIMEOUT_S)


async def decide(
    rule: ApprovalGuard,
    action_id: str,
    approver: str,
    confirm: ApprovalConfirm,
    *,
    read_only: GuardVerdict,
    unauthenticated: str | None,
    live: LivePreview,
) -> tuple[dict[str, str], GuardVerdict]:
    """The pending request and `approver`'s verdict on it: the first refusal (the rule's, then
    `read_only`'s, then `unauthenticated`: why there is no authenticated identity, then no live
    preview, then not confirmed), else the rule's approval. `confirm` is asked only when
    nothing refused."""
    request, refused = await rule.pending(action_id, approver)
    if refused is None and not read_only.ok:
        refused = read_only
    if refused is None and unauthenticated is not None:
        reason = f"an approval needs an identity authenticated by Kubernetes: {unauthenticated}"
        refused = GuardVerdict("two-person", False, reason, {})
    if refused is None:
        shown = await live(request)
        if isinstance(shown, GuardVerdict):
            refused = shown
        elif not await confirm(*shown):
            refused = GuardVerdict("two-person", False, "not confirmed: nothing was approved", {})
    return request, refused or await rule.approve(action_id, approver)


async def live_preview(
    plan_of: Callable[[str, dict[str, Any]], Awaitable[Plan]],
    clients: Clients,
    request: dict[str, str],
) -> tuple[str, str] | GuardVerdict:
    """The preview and word the approver confirms on: the requested action and parameters
    planned again (`plan_of`, the approver's executor) against the live target, which must be
    the one requested; the dry run as the approver's own credentials see it."""
    try:
        plan = await plan_of(request["action"], json.loads(request["params_json"]))
        asked = json.loads(request["target_json"])
    except (KeyError, ValueError, TypeError, PlanError, BackendError) as exc:
        reason = f"cannot recompute the preview from the live target: {exc}"
        return GuardVerdict("two-person", False, reason, {})
    live = json.loads(json.dumps(plan.target.as_dict(), sort_keys=True))
    if live != asked:
        reason = f"the live target is not the one requested: asked {asked}, now {live}"
        return GuardVerdict("two-person", False, reason, {"asked": asked, "live": live})
    try:
        dry_run = await registry.action_named(plan.action).dry_run(plan, clients)
    except BackendError as exc:
        dry_run = {"error": str(exc)}
    return render_preview(Preview(plan, dry_run, ())), plan.confirm_word


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
        # An unknown or expired id is audited too (docs/audit.md), as an approval of nothing.
        "action": action if action in ACTION_PARAMS else UNKNOWN_APPROVAL,
        "target": target or {"label": request.get("target")},
        "actor": actor,
        "detail": {"approval_of": request.get("requester"), "approver": approver},
        **fields,
    }
