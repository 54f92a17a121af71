"""Issue 13, acceptance 1: adding a remediation is one new module plus one registry line.

`set-note` is defined in tests/ (tests/remediation/note_action.py: its parameters model and
its five steps) and registered by one line, `registry.register(SetNote(store))` (the `note`
fixture). Nothing else is edited, and every layer that names actions has it: the executor
runs it through the audited lifecycle (plan → dry run → confirm → execute → verify, with fake
clients: tests/remediation/test_executor.py), `oncall remediate` lists and plans it, and the
audit log and `ActionName` know its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from oncall.audit.records import AuditError, check_fields
from oncall.cli.main import build_parser, main
from oncall.model import action_params
from oncall.remediation import registry
from oncall.remediation.executor import Remediator
from oncall.settings import Settings
from tests.remediation.fakes import World, make_world
from tests.remediation.note_action import SetNote

RECORD = {"action_id": "a1", "transition": "proposed", "action": "set-note", "target": {}}


def test_the_registry_line_is_all_the_layers_need(note: SetNote) -> None:
    assert registry.action_named("set-note") is note
    assert action_params.ACTION_PARAMS["set-note"] is note.params
    assert "set-note" in get_args(action_params.ActionName)
    check_fields(RECORD)  # the audit log takes a record of it
    listing = build_parser().parse_args(["audit", "list", "--action", "set-note"])
    assert listing.action == "set-note"


def test_without_its_line_no_layer_knows_it() -> None:
    assert "set-note" not in action_params.ACTION_PARAMS
    assert "set-note" not in get_args(action_params.ActionName)
    with pytest.raises(AuditError, match="action must be one of"):
        check_fields(RECORD)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["remediate", "set-note", "hello"])


def test_registering_a_taken_name_is_refused(note: SetNote) -> None:
    with pytest.raises(ValueError, match="'set-note' is registered already"):
        registry.register(note)


def test_oncall_remediate_lists_and_plans_it(
    note: SetNote,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    world: World = make_world()

    def from_settings(_settings: Settings, **_kwargs: object) -> Remediator:
        return world.remediator

    monkeypatch.setattr(Remediator, "from_settings", from_settings)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ONCALL_CONFIG", raising=False)
    with pytest.raises(SystemExit):
        main(["remediate", "--help"])
    assert "set-note" in capsys.readouterr().out
    args = build_parser().parse_args(["remediate", "set-note", "paused", "--board", "ops"])
    assert (args.action, args.text, args.board) == ("set-note", "paused", "ops")

    assert main(["remediate", "set-note", "paused", "--dry-run"]) == 1
    out = capsys.readouterr().out
    assert "set-note Note main\n  before:  all quiet\n  after:   paused\n" in out
    assert "--dry-run: nothing was changed" in out
    assert world.log.transitions() == ["proposed", "declined"]
    assert {r["action"] for r in world.log.lines} == {"set-note"}
    assert note.store.writes == []
