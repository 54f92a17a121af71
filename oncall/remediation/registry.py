"""Every remediation by name. The names and parameter models are `ACTION_PARAMS`
(oncall/model/action_params.py, the layer runbooks, their schema and the audit log read too);
what each action does is its module here, oncall/remediation/actions/<name>.py (dashes as
underscores), exporting `ACTION`.

So adding a remediation is its module and its line (with its parameters model) in
`ACTION_PARAMS`; the executor, `plan`, the CLI's `remediate` subcommands, the runbook schema's
action list and the audit's action names all follow from those two. An action whose module
lives elsewhere (a test's) is added with one `register(action)` instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from oncall.model.action_params import ACTION_PARAMS
from oncall.model.write_path import Plan
from oncall.remediation.action import Action, PlanError
from oncall.remediation.clients import Clients


def module_of(name: str) -> str:
    """'set-max-num-seqs' → 'oncall.remediation.actions.set_max_num_seqs'."""
    return f"oncall.remediation.actions.{name.replace('-', '_')}"


def _load() -> dict[str, Action[Any]]:
    found: dict[str, Action[Any]] = {}
    for name, params in ACTION_PARAMS.items():
        action = getattr(importlib.import_module(module_of(name)), "ACTION", None)
        if not isinstance(action, Action) or action.name != name or action.params is not params:
            raise RuntimeError(
                f"{module_of(name)}.ACTION must be the Action {name!r} taking "
                f"{params.__name__} (oncall/model/action_params.py)"
            )
        found[name] = action
    return found


#: name → action, in the order of ACTION_PARAMS. Tests add their own actions here.
ACTIONS: dict[str, Action[Any]] = _load()


def register(action: Action[Any]) -> Callable[[], None]:
    """Add an action whose module is not one of oncall/remediation/actions/ (a test's): its
    name and parameters model join `ACTION_PARAMS`, the action `ACTIONS`, so the executor,
    the CLI's subcommands (a parser built after this), the audit's names and `ActionName`
    have it. Returns the undo. Runbooks do not: their model took the names when it was made,
    and a proposal in a shipped runbook names a shipped action."""
    if action.name in ACTION_PARAMS or action.name in ACTIONS:
        raise ValueError(f"an action named {action.name!r} is registered already")
    ACTION_PARAMS[action.name] = action.params
    ACTIONS[action.name] = action

    def unregister() -> None:
        ACTION_PARAMS.pop(action.name, None)
        ACTIONS.pop(action.name, None)

    return unregister


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
