"""A remediation acts only in the context it was planned in (docs/operating.md).

Every plan the executor makes carries its `Cluster` (the settings context, kube context, API
server, production flag), stamped here from the remediator's own settings; the executor
refuses a plan whose context is not its own before it reads or writes anything, and the
rollback of an action recorded in another context is not planned at all. With `contexts:`
each context has its own remediator (`oncall.service.contexts`), so an alert of `eu` can only
lead to `eu`'s clients, and a plan carried over to `us`'s remediator is refused.

In a production context the typed confirmation names the context: `us/vllm-0` rather than
`vllm-0`, so a person cannot confirm from habit in the wrong terminal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from oncall.model.write_path import Cluster, GuardVerdict, Plan
from oncall.remediation.action import PlanError
from oncall.settings import Settings
from oncall.settings.kubeconfig import kube_target


def cluster_of(settings: Settings) -> Cluster:
    """Where these settings' remediations act (blocking: reads the kubeconfig)."""
    target = kube_target(settings.kubernetes)
    return Cluster(
        settings.context.name, target.context, target.server, settings.context.production
    )


def stamped(plan: Plan, cluster: Cluster) -> Plan:
    """The plan as it will run in `cluster`; in production its word names the context."""
    word = plan.confirm_word
    if cluster.production:
        word = f"{cluster.context}/{plan.target.name if word == 'yes' else word}"
    return dataclasses.replace(plan, cluster=cluster, confirm_word=word)


def context_refusal(plan: Plan, settings: Settings) -> GuardVerdict | None:
    """The refusal of a plan made for another context than these settings' (or for none)."""
    mine = settings.context.name
    if plan.cluster is None:
        reason = f"the plan names no context; this remediator acts in {mine!r} only"
    elif plan.cluster.context != mine:
        reason = f"planned in context {plan.cluster.context!r}; this remediator acts in {mine!r}"
    else:
        return None
    return GuardVerdict("context", False, reason, {"context": mine})


def check_rollback_context(proposed: dict[str, Any], settings: Settings) -> None:
    """A rollback runs where the action ran: refuse one recorded in another context."""
    recorded = proposed.get("context")
    mine = settings.context.name
    if recorded is not None and recorded != mine:
        raise PlanError(
            f"action {proposed.get('action_id')} ran in context {recorded!r}, not {mine!r}: "
            f"roll it back with --context {recorded}"
        )
