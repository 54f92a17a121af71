"""The registry is the one list of actions: everything that names actions derives from it.
And the shipped actions' preconditions are data on the plan, compared before the write."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import get_args

import pytest

from oncall.checklist.schema import runbook_schema
from oncall.cli.main import build_parser
from oncall.model.action_params import ACTION_PARAMS, ActionName
from oncall.model.write_path import Precondition, Preview, render_preview
from oncall.remediation import registry
from oncall.remediation.actions.set_degradation_level import STORED
from oncall.remediation.clients import Clients
from oncall.settings import Settings
from tests.harness.servers import RunningServer


def test_every_list_of_action_names_is_the_registrys() -> None:
    names = tuple(registry.ACTIONS)
    assert names == tuple(ACTION_PARAMS) == get_args(ActionName)
    assert all(registry.ACTIONS[n].params is ACTION_PARAMS[n] for n in names)
    remediation = runbook_schema()["$defs"]["Remediation"]
    assert remediation["properties"]["action"]["enum"] == list(names)
    assert [r["if"]["properties"]["action"]["const"] for r in remediation["allOf"]] == sorted(names)
    # A valid value for each required field (the parser checks them as the models do).
    valid = {"silence_id": "6d1f2c7e-1b2a-4c3d-9e8f-0a1b2c3d4e5f", "alert": "KubePodNotReady"}
    for name in names:  # a subcommand each, its positionals the model's required fields
        required = [f for f, info in ACTION_PARAMS[name].model_fields.items() if info.is_required()]
        given = {f: valid.get(f, "1") for f in required}
        args = build_parser().parse_args(["remediate", name, *given.values()])
        assert args.action == name
        assert {f: str(getattr(args, f)) for f in required} == given
        assert build_parser().parse_args(["audit", "list", "--action", name]).action == name


def test_an_action_module_that_does_not_match_its_name_is_a_loud_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    right = ACTION_PARAMS["rebuild-pod"]
    monkeypatch.setitem(ACTION_PARAMS, "rebuild-pod", ACTION_PARAMS["set-max-num-seqs"])
    with pytest.raises(RuntimeError, match=r"actions.rebuild_pod.ACTION must be the Action"):
        registry._load()
    monkeypatch.setitem(ACTION_PARAMS, "rebuild-pod", right)
    monkeypatch.setitem(ACTION_PARAMS, "no-such-action", ACTION_PARAMS["set-max-num-seqs"])
    with pytest.raises(ModuleNotFoundError, match="no_such_action"):
        registry._load()


@pytest.fixture
async def clients(redis_srv: RunningServer) -> AsyncIterator[Clients]:
    key = f"oncall:test:{uuid.uuid4().hex}:level"
    settings = Settings.model_validate(
        {"redis": {"url": redis_srv.url}, "degradation": {"store": "redis", "redis_key": key}}
    )
    opened = Clients.from_settings(settings)
    yield opened
    await opened.aclose()


async def test_the_degradation_recheck_compares_the_plans_stored_level(clients: Clients) -> None:
    key = clients.settings.degradation.redis_key
    action = registry.action_named("set-degradation-level")
    await clients.redis_writer().set(key, "0")
    plan = await registry.plan("set-degradation-level", {"level": 1}, clients)
    assert plan.expected(STORED) == Precondition(STORED, "0")
    assert await action.changed_since_plan(plan, clients) is None

    await clients.redis_writer().set(key, "2")
    assert await action.changed_since_plan(plan, clients) == "the level changed to '2' meanwhile"
    # The note is for people: a plan whose note names the new value is still refused.
    noted = dataclasses.replace(plan, notes=("raw value before: '2'",))
    assert await action.changed_since_plan(noted, clients) == "the level changed to '2' meanwhile"
    # And without the precondition the re-check fails closed.
    bare = dataclasses.replace(plan, preconditions=())
    assert await action.changed_since_plan(bare, clients) is not None


async def test_an_unset_level_is_a_precondition_too(clients: Clients) -> None:
    action = registry.action_named("set-degradation-level")
    plan = await registry.plan("set-degradation-level", {"level": 2}, clients)
    assert plan.expected(STORED) == Precondition(STORED, None)
    assert plan.before == "level 0 (normal), not set"
    key = clients.settings.degradation.redis_key
    assert plan.notes == (f"Redis key {key} is not set: the gateway serves level 0",)
    assert await action.changed_since_plan(plan, clients) is None
    await clients.redis_writer().set(clients.settings.degradation.redis_key, "0")
    assert await action.changed_since_plan(plan, clients) == "the level changed to '0' meanwhile"


@pytest.mark.parametrize(
    ("stored", "before", "note"),
    [
        ("2", "level 2 (LLM off, FAQ answers)", None),
        (" 1 ", "level 1 (RAG off, base LLM only)", None),
        ("high", "level 0 (normal), not a level", "holds 'high', not a level 0-3"),
        ("7", "level 0 (normal), not a level", "holds '7', not a level 0-3"),
        ("\x1b[2J" * 20, "level 0 (normal), not a level", "holds '\\x1b[2J"),
    ],
)
async def test_the_preview_notes_are_worded_for_a_person(
    clients: Clients, stored: str, before: str, note: str | None
) -> None:
    """The stored value is the precondition's (machines); the preview says in words what the
    gateway makes of a value that is not a plain level, and nothing about one that is."""
    await clients.redis_writer().set(clients.settings.degradation.redis_key, stored)
    plan = await registry.plan("set-degradation-level", {"level": 3}, clients)
    assert plan.expected(STORED) == Precondition(STORED, stored)
    assert plan.before == before
    shown = render_preview(Preview(plan, {}, ()))
    assert "raw value" not in shown and "\x1b" not in shown
    if note is None:
        assert plan.notes == () and "note:" not in shown
    else:
        (only,) = plan.notes
        assert only.startswith(f"Redis key {clients.settings.degradation.redis_key} {note}")
        assert only.endswith(": the gateway serves level 0") and len(only) < 200
        assert f"  note:    {only}" in shown.splitlines()
