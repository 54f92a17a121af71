"""A test-only remediation, `set-note`: it sets a note in a store the test holds.

It is what adding a remediation takes: one module like this (an `Action` with its five steps
and its parameters model) and one line, `registry.register(SetNote(store))` (the `note`
fixture, tests/remediation/conftest.py). A shipped one sits in oncall/remediation/actions/ and
keeps its parameters model in oncall/model/action_params.py, next to its one line in
`ACTION_PARAMS` (the layer runbooks and the audit log read). The tests drive it through the
real executor, the CLI and the audit (tests/remediation/test_adding_an_action.py).
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from oncall.errors import BackendError
from oncall.model.action_params import ActionParams
from oncall.model.write_path import GuardVerdict, Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say, TargetChanged
from oncall.remediation.clients import Clients

#: The precondition: the note still reads what it read when planning.
NOTE = "note"


class NoteParams(ActionParams):
    """Set a board's note (a test-only action)."""

    text: str = Field(min_length=1, description="The new note.")
    board: str | None = Field(None, description="Which board; default: main.")


@dataclass
class NoteStore:
    """The backend of the test action: notes by board, and what the action did to them."""

    notes: dict[str, str] = field(default_factory=dict)
    #: Raised by the next write, once.
    fail_next: BackendError | TargetChanged | None = None
    writes: list[tuple[str, str]] = field(default_factory=list)
    #: The threads the action's steps ran on.
    threads: set[int] = field(default_factory=set)
    #: When set, verification waits for it to open (and says so through `verifying`).
    hold_verify: asyncio.Event | None = None
    verifying: asyncio.Event = field(default_factory=asyncio.Event)


def _checks(text: str) -> tuple[GuardVerdict, ...]:
    """The action's own verdict: a note may not shout."""
    if text.isupper():
        return (GuardVerdict("note", False, f"{text!r} is all capitals", {"text": text}),)
    return (GuardVerdict("note", True, "not shouting", {}),)


class SetNote(Action[NoteParams]):
    name = "set-note"
    params = NoteParams

    def __init__(self, store: NoteStore) -> None:
        self.store = store

    def _seen(self) -> None:
        self.store.threads.add(threading.get_ident())

    async def plan(self, params: NoteParams, clients: Clients) -> Plan:
        self._seen()
        board = params.board or "main"
        before = self.store.notes.get(board)
        if before == params.text:
            raise PlanError(f"the note of {board} is already {params.text!r}")
        return Plan(
            action=self.name,
            params=params.model_dump(exclude_none=True),
            target=Target("Note", board),
            before=before,
            after=params.text,
            request={"set": board, "text": params.text},
            dangerous=False,
            confirm_word="yes",
            undo=None if before is None else {"text": before, "board": board},
            preconditions=(Precondition(NOTE, before),),
            checks=_checks(params.text),
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        self._seen()
        return {"current": self.store.notes.get(plan.target.name)}

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        self._seen()
        expected = plan.expected(NOTE)
        now = self.store.notes.get(plan.target.name)
        if expected is not None and now == expected.expected:
            return None
        return f"the note changed to {now!r} meanwhile"

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        self._seen()
        if self.store.fail_next is not None:
            error, self.store.fail_next = self.store.fail_next, None
            raise error
        text = str(plan.params["text"])
        self.store.notes[plan.target.name] = text
        self.store.writes.append((plan.target.name, text))
        return {"set": plan.target.name}

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        self._seen()
        self.store.verifying.set()
        if self.store.hold_verify is not None:
            await self.store.hold_verify.wait()
        say(f"reading back the note of {plan.target.name}")
        now = self.store.notes.get(plan.target.name)
        return now == plan.params["text"], f"the note reads {now!r}"
