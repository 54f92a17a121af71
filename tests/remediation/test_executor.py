"""The executor's lifecycle, driven with fakes: a test-only action (`set-note`, registered in
the test like a shipped one), an in-memory audit log, fake guards and a fake Lease API.

Each test follows one path through the lifecycle and checks what was audited, what the action
did, and what the outcome carries; the real actions run against the drill in tests/drill/stack.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest

from oncall.cli.main import build_parser
from oncall.cli.remediate_cmd import params_of
from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict, Preview, RemediationResult, render_preview
from oncall.remediation.action import PlanError, TargetChanged
from tests.remediation.fakes import World, make_world
from tests.remediation.note_action import SetNote


@pytest.fixture
def world() -> World:
    return make_world()


def answer(value: bool, asked: list[Preview] | None = None) -> Any:
    async def confirm(preview: Preview) -> bool:
        if asked is not None:
            asked.append(preview)
        return value

    return confirm


async def test_a_confirmed_action_runs_every_step_on_the_loop_and_only_the_audit_leaves_it(
    note: SetNote, world: World
) -> None:
    r = world.remediator
    plan = await r.plan("set-note", {"text": "rollout paused"})
    asked: list[Preview] = []
    lines: list[str] = []
    outcome = await r.run(plan, answer(True, asked), progress=lines.append)

    assert outcome.status == "verified", outcome.message
    assert outcome.message == "the note reads 'rollout paused'"
    assert note.store.writes == [("main", "rollout paused")]
    assert world.log.transitions() == ["proposed", "approved", "started", "succeeded", "verified"]
    assert [r["transition"] for r in outcome.records] == world.log.transitions()
    assert {r["action"] for r in world.log.lines} == {"set-note"}
    assert world.log.lines[0]["dry_run"] == {"current": "all quiet"}
    assert asked[0].plan == plan and not asked[0].refused
    assert lines == ["executed; verifying", "reading back the note of main"]
    assert world.rate.recorded == ["note-main"]
    assert world.leases.taken == world.leases.released == ["default/oncall-note-main"]
    loop_thread = threading.get_ident()
    assert note.store.threads == {loop_thread}  # every step on the caller's loop
    assert loop_thread not in world.log.threads  # the fsynced append in a thread
    result = RemediationResult.of(outcome)
    assert result.undo_command == f"oncall remediate rollback {outcome.action_id}"
    assert result.refusal is None


async def test_a_declined_action_changes_nothing(note: SetNote, world: World) -> None:
    plan = await world.remediator.plan("set-note", {"text": "x"})
    outcome = await world.remediator.run(plan, answer(False))
    assert (outcome.status, outcome.message) == ("declined", "declined: nothing was changed")
    assert world.log.transitions() == ["proposed", "declined"]
    assert note.store.writes == [] and world.leases.taken == []


async def test_a_refusal_up_front_is_shown_not_asked_and_carries_its_verdict(
    note: SetNote, world: World
) -> None:
    world.breaker.open = True
    plan = await world.remediator.plan("set-note", {"text": "x"})
    asked: list[Preview] = []
    outcome = await world.remediator.run(plan, answer(True, asked))
    assert asked == []
    assert outcome.status == "refused"
    assert outcome.message == "refused (circuit-breaker): circuit breaker open"
    assert outcome.refusal == GuardVerdict(
        "circuit-breaker", False, "circuit breaker open", {"failures": 3}
    )
    assert outcome.preview is not None and outcome.preview.refusal == outcome.refusal
    assert RemediationResult.of(outcome).refusal is outcome.refusal
    refused = world.log.lines[-1]
    assert world.log.transitions() == ["proposed", "refused"]
    assert (refused["guard"], refused["outcome"]) == ("circuit-breaker", "circuit breaker open")
    assert note.store.writes == []


async def test_the_actions_own_check_is_in_the_preview_and_can_refuse(
    note: SetNote, world: World
) -> None:
    plan = await world.remediator.plan("set-note", {"text": "quiet"})
    preview = await world.remediator.preview(plan)
    assert [v.guard for v in preview.verdicts] == [
        "read-only", "anchor", "note", "rate-limit", "circuit-breaker", "lease",
    ]  # fmt: skip
    asked: list[Preview] = []
    loud = await world.remediator.plan("set-note", {"text": "PAUSED"})
    outcome = await world.remediator.run(loud, answer(True, asked))
    assert asked == []
    assert outcome.refusal == GuardVerdict(
        "note", False, "'PAUSED' is all capitals", {"text": "PAUSED"}
    )
    assert world.log.lines[-1]["guard"] == "note"
    assert note.store.writes == []


async def test_the_plans_precondition_is_compared_before_the_write(
    note: SetNote, world: World
) -> None:
    plan = await world.remediator.plan("set-note", {"text": "x"})

    async def confirm_while_someone_edits(_preview: Preview) -> bool:
        note.store.notes["main"] = "edited meanwhile"
        return True

    outcome = await world.remediator.run(plan, confirm_while_someone_edits)
    assert outcome.status == "refused"
    assert outcome.refusal is not None and outcome.refusal.guard == "precondition"
    assert (
        outcome.message
        == "refused (precondition): the note changed to 'edited meanwhile' meanwhile"
    )
    assert note.store.writes == []
    assert world.leases.released == world.leases.taken  # the Lease goes back either way


async def test_a_failed_write_is_audited_and_counted_by_the_breaker(
    note: SetNote, world: World
) -> None:
    note.store.fail_next = BackendError("notes", "memory", "http 503")
    plan = await world.remediator.plan("set-note", {"text": "x"})
    outcome = await world.remediator.run(plan, answer(True))
    assert outcome.status == "failed"
    assert outcome.message == "failed, nothing changed: notes at memory: http 503"
    assert world.log.transitions() == ["proposed", "approved", "started", "failed"]
    assert world.breaker.failures == [("note-main", "notes at memory: http 503")]


async def test_someone_elses_lease_refuses_the_preview_with_the_holder(
    note: SetNote, world: World
) -> None:
    world.leases.held_by = "bob@ops-2"
    plan = await world.remediator.plan("set-note", {"text": "x"})
    outcome = await world.remediator.run(plan, answer(True))
    assert outcome.status == "refused"
    assert outcome.refusal is not None and outcome.refusal.holder == "bob@ops-2"
    assert outcome.refusal.since is not None
    assert world.leases.taken == []


async def test_an_unleased_action_takes_no_lease_and_says_what_guards_it(
    note: SetNote, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Someone else holds the target's Lease: a Kubernetes action is refused (above); an
    action whose writes go only to Alertmanager or Redis neither reads nor takes it."""
    monkeypatch.setattr(note, "unleased", "an atomic write of its own")
    world.leases.held_by = "bob@ops-2"
    plan = await world.remediator.plan("set-note", {"text": "x"})
    outcome = await world.remediator.run(plan, answer(True))
    assert outcome.status == "verified", outcome.message
    assert outcome.preview is not None
    [lease] = [v for v in outcome.preview.verdicts if v.guard == "lease"]
    assert (lease.ok, lease.reason) == (True, "no Kubernetes Lease: an atomic write of its own")
    assert world.leases.taken == [] and world.leases.released == []


async def test_a_lost_atomic_write_is_a_failed_precondition_not_a_breaker_failure(
    note: SetNote, world: World
) -> None:
    note.store.fail_next = TargetChanged("the note was set by bob meanwhile")
    plan = await world.remediator.plan("set-note", {"text": "x"})
    outcome = await world.remediator.run(plan, answer(True))
    assert outcome.status == "failed"
    assert outcome.message == (
        "failed (precondition), nothing changed: the note was set by bob meanwhile"
    )
    assert world.log.transitions() == ["proposed", "approved", "started", "failed"]
    failed = world.log.lines[-1]
    assert (failed["guard"], failed["outcome"]) == (
        "precondition",
        "the note was set by bob meanwhile",
    )
    assert world.breaker.failures == []


async def test_a_two_person_action_waits_for_the_second_person(note: SetNote, world: World) -> None:
    world.two_person.actions = frozenset({"set-note"})
    plan = await world.remediator.plan("set-note", {"text": "x"})
    lines: list[str] = []
    refused = await world.remediator.run(plan, answer(True), progress=lines.append)
    assert refused.status == "refused"
    assert refused.refusal is not None and refused.refusal.guard == "two-person"
    assert lines == [f"waiting for a second person: oncall remediate approve {refused.action_id}"]
    assert note.store.writes == []

    world.two_person.approver = "bob@ops-2"
    plan = await world.remediator.plan("set-note", {"text": "x"})
    outcome = await world.remediator.run(plan, answer(True))
    assert outcome.status == "verified"
    approved = [r for r in outcome.records if r["transition"] == "approved"]
    assert [a["detail"].get("approver") for a in approved] == [None, "bob@ops-2"]


async def test_a_rollback_plans_the_old_value_and_marks_the_original(
    note: SetNote, world: World
) -> None:
    r = world.remediator
    first = await r.run(await r.plan("set-note", {"text": "paused"}), answer(True))
    assert first.status == "verified"
    undo = await r.rollback_plan(first.action_id)
    assert undo.params == {"text": "all quiet", "board": "main"}
    back = await r.run(undo, answer(True), rollback_of=first.action_id)
    assert back.status == "verified" and note.store.notes["main"] == "all quiet"
    marked = [x for x in world.log.lines if x["transition"] == "rolled_back"]
    assert [(m["action_id"], m["detail"]["by_action"]) for m in marked] == [
        (first.action_id, back.action_id)
    ]
    with pytest.raises(PlanError, match="was rolled back already"):
        await r.rollback_plan(first.action_id)


async def test_planning_validates_the_parameters_with_the_actions_model(
    note: SetNote, world: World
) -> None:
    with pytest.raises(PlanError, match="set-note: 1 validation error"):
        await world.remediator.plan("set-note", {"text": ""})
    with pytest.raises(PlanError, match=r"unknown action 'nope'; known: rebuild-pod, .*set-note"):
        await world.remediator.plan("nope", {})
    with pytest.raises(PlanError, match="already 'all quiet'"):
        await world.remediator.plan("set-note", {"text": "all quiet"})


def test_the_cli_has_a_subcommand_for_the_registered_action(note: SetNote) -> None:
    args = build_parser().parse_args(["remediate", "set-note", "hello", "--board", "ops"])
    assert args.action == "set-note" and args.dry_run is False
    assert params_of(args) == {"text": "hello", "board": "ops"}
    args = build_parser().parse_args(["remediate", "set-note", "hello"])
    assert params_of(args) == {"text": "hello"}


def test_cancelling_the_caller_before_the_answer_runs_nothing(note: SetNote, world: World) -> None:
    async def go() -> None:
        plan = await world.remediator.plan("set-note", {"text": "x"})
        question = asyncio.Event()

        async def never(_preview: Preview) -> bool:
            question.set()
            await asyncio.Event().wait()
            return True

        task = asyncio.ensure_future(world.remediator.run(plan, never))
        await question.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert world.log.transitions() == ["proposed"]
    assert note.store.writes == []


async def test_ctrl_c_during_verification_is_in_the_audit(note: SetNote, world: World) -> None:
    r = world.remediator
    plan = await r.plan("set-note", {"text": "rollout paused"})
    note.store.hold_verify = asyncio.Event()  # verification waits, as for a slow rollout
    task = asyncio.ensure_future(r.run(plan, answer(True, [])))
    await asyncio.wait_for(note.store.verifying.wait(), 10)
    task.cancel()  # what asyncio.run does with the main task on Ctrl-C
    with pytest.raises(asyncio.CancelledError):
        await task
    assert world.log.transitions()[-3:] == ["started", "succeeded", "verified"]
    last = world.log.lines[-1]
    assert last["outcome"]["ok"] is False and last["outcome"]["interrupted"] is True
    assert note.store.writes == [("main", "rollout paused")]  # the change was made


async def test_the_proposed_record_keeps_the_notes_the_person_was_shown(
    note: SetNote, world: World
) -> None:
    plan = await world.remediator.plan("set-note", {"text": "x"})
    plan = dataclasses.replace(plan, notes=("the board is read by 3 people", "last set by bob"))
    asked: list[Preview] = []
    await world.remediator.run(plan, answer(False, asked))
    proposed, declined = world.log.lines
    shown = render_preview(asked[0]).splitlines()
    assert [line.removeprefix("  note:    ") for line in shown if line.startswith("  note:")] == [
        "the board is read by 3 people", "last set by bob",
    ]  # fmt: skip
    assert proposed["detail"]["notes"] == list(asked[0].plan.notes) == list(plan.notes)
    assert "notes" not in (declined.get("detail") or {})
