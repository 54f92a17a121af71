"""The service's door for the app, `LiveRemediations`, over the real executor with fakes: the
remediation runs on the caller's loop, and going away cancels a question but not an action."""

from __future__ import annotations

import asyncio
import threading

import pytest

from oncall.model.checklist_events import Proposal
from oncall.model.write_path import Preview, RemediationResult
from oncall.remediation.executor import Remediator
from oncall.service.remediation import AlertContext, LiveRemediations, RemediationRequest
from oncall.settings import Settings
from tests.remediation.fakes import World, make_world
from tests.remediation.note_action import SetNote

NOTE = Proposal("pause", "set-note", "Say the rollout is paused", {"text": "paused"}, "step")


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> World:
    made = make_world()

    def from_settings(settings: Settings, **kwargs: object) -> Remediator:
        assert kwargs["alert"] == {
            "name": "NoteAlert", "state": "unknown", "value": None, "labels": {},
            "annotations": {},
        }  # fmt: skip
        return made.remediator

    monkeypatch.setattr(Remediator, "from_settings", from_settings)
    return made


async def test_a_proposal_runs_on_the_callers_loop(note: SetNote, world: World) -> None:
    shown: list[Preview] = []
    lines: list[str] = []

    async def yes(preview: Preview) -> bool:
        shown.append(preview)
        return True

    result = await LiveRemediations(Settings()).run(
        RemediationRequest(NOTE, AlertContext("NoteAlert")), yes, lines.append
    )
    action_id = world.log.lines[0]["action_id"]
    assert result == RemediationResult(
        "verified", "the note reads 'paused'", action_id,
        undo_command=f"oncall remediate rollback {action_id}",
    )  # fmt: skip
    assert [p.plan.after for p in shown] == ["paused"]
    assert lines == ["executed; verifying", "reading back the note of main"]
    assert note.store.threads == {threading.get_ident()}
    assert threading.get_ident() not in world.log.threads
    assert world.leases.closed  # the door closes the clients it opened


async def test_going_away_while_asked_withdraws_the_question(note: SetNote, world: World) -> None:
    asked = asyncio.Event()

    async def never(_preview: Preview) -> bool:
        asked.set()
        await asyncio.Event().wait()
        return True

    run = asyncio.ensure_future(
        LiveRemediations(Settings()).run(
            RemediationRequest(NOTE, AlertContext("NoteAlert")), never, print
        )
    )
    await asked.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert world.log.transitions() == ["proposed"]
    assert note.store.writes == []


async def test_going_away_after_yes_lets_the_action_reach_its_verdict(
    note: SetNote, world: World
) -> None:
    note.store.hold_verify = asyncio.Event()

    async def yes(_preview: Preview) -> bool:
        return True

    run = asyncio.ensure_future(
        LiveRemediations(Settings()).run(
            RemediationRequest(NOTE, AlertContext("NoteAlert")), yes, print
        )
    )
    await note.store.verifying.wait()
    run.cancel()
    await asyncio.sleep(0)  # let the cancellation arrive before the action may go on
    assert not run.done()
    note.store.hold_verify.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert world.log.transitions()[-2:] == ["succeeded", "verified"]
    assert note.store.notes["main"] == "paused"
