"""Every remediation by name: one line per action module. Adding a remediation is its module
under oncall/remediation/actions/ (exporting `ACTION`) and one line in `ACTIONS` below; the
executor, the CLI's `remediate` subcommands and `plan` take it from here.

The names and parameter models also sit in oncall/model/action_params.py, which the layers that
may not import remediation/ read (runbooks, their schema, the audit log); `_check` keeps the two
lists the same.
"""

from __future__ import annotations

from typing import Any

from oncall.model.action_params import ACTION_PARAMS
from oncall.model.write_path import Plan
from oncall.remediation.action import Action, PlanError
from oncall.remediation.actions import rebuild_pod, set_degradation_level, set_max_num_seqs
from oncall.remediation.clients import Clients

ACTIONS: dict[str, Action[Any]] = {
    action.name: action
    for action in (
        rebuild_pod.ACTION,
        set_degradation_level.ACTION,
        set_max_num_seqs.ACTION,
    )
}


def _check(actions: dict[str, Action[Any]]) -> None:
    for name, action in actions.items():
        if ACTION_PARAMS.get(name) is not action.params:
            raise RuntimeError(f"action {name!r}: its params model is not ACTION_PARAMS[{name!r}]")
    if set(actions) != set(ACTION_PARAMS):
        raise RuntimeError(f"actions without a module: {sorted(set(ACTION_PARAMS) - set(actions))}")


_check(ACTIONS)


def action_named(name: str) -> Action[Any]:
    action = ACTIONS.get(name)
    if action is None:
        raise PlanError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}")
    return action


async def plan(name: str, raw: dict[str, Any], clients: Clients) -> Plan:
    """Validate `raw` with the action's parameters model and plan it against the backends."""
    action = action_named(name)
    try:
        params = action.params.model_validate(raw)
    except ValueError as exc:
        raise PlanError(f"{name}: {exc}") from exc
    return await action.plan(params, clients)
