"""`:` commands, the command palette, `:context`, and the keymap setting, driven with Pilot."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from textual.binding import Binding
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Static

from oncall.settings import Settings
from oncall.tui.app import OncallApp
from oncall.tui.audit_screen import AuditScreen
from oncall.tui.board import BoardScreen
from oncall.tui.commands import (
    COMMANDS,
    CommandLineScreen,
    ContextScreen,
    binding_ids,
    find_command,
    oncall_binding_owners,
    split_keymap,
)
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.help import HelpScreen
from oncall.tui.incident import IncidentScreen
from tests.harness.waiting import until
from tests.tui.fakes import P99
from tests.tui.test_audit_screen import FakeAudit, audit_app


def app_with(**changes: Any) -> OncallApp:
    return audit_app(FakeAudit(), settings=Settings.model_validate(changes))


def notes(app: OncallApp) -> list[str]:
    return [note.message for note in app._notifications]


async def command(pilot: Pilot[Any], text: str) -> None:
    """Type `:text` and enter, as a user does."""
    app = pilot.app
    await pilot.press("colon")
    await until(pilot, lambda: isinstance(app.screen, CommandLineScreen), "the command line")
    await pilot.press(*text, "enter")
    await until(pilot, lambda: not isinstance(app.screen, CommandLineScreen), "the command")
    await pilot.pause()


@asynccontextmanager
async def on_the_board(app: OncallApp) -> AsyncIterator[Pilot[Any]]:
    """`app` running at 100x30, once its board shows a selected alert."""
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.board.selected_alert() is not None, "the board")
        yield pilot


async def test_audit_then_alerts_switch_views() -> None:
    app = app_with()
    async with on_the_board(app) as pilot:
        await command(pilot, "audit")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen")
        await command(pilot, "alerts")
        await until(pilot, lambda: app.screen is app.board, "the board")
        assert len(app.screen_stack) == 1


async def test_audit_from_an_incident_replaces_it_and_alerts_goes_home() -> None:
    app = app_with()
    async with on_the_board(app) as pilot:
        app.open_incident(P99)
        await until(pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident")
        await command(pilot, "audit")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen")
        assert [type(s) for s in app.screen_stack] == [BoardScreen, AuditScreen]
        await command(pilot, "alerts")
        await until(pilot, lambda: app.screen is app.board, "the board")


async def test_an_unknown_command_says_so_and_changes_nothing() -> None:
    app = app_with()
    async with on_the_board(app) as pilot:
        await command(pilot, "pods")
        await until(pilot, lambda: bool(notes(app)), "a notification")
        assert app.screen is app.board
        hint = "try :alerts :audit :context :incidents :help :q"
        assert notes(app) == [f"unknown command :pods — {hint}"]


async def test_esc_cancels_the_command_line() -> None:
    app = app_with()
    async with on_the_board(app) as pilot:
        await pilot.press("colon", "a", "escape")
        await until(pilot, lambda: app.screen is app.board, "the board")
        assert notes(app) == []


async def test_context_shows_the_environment_and_esc_closes_it() -> None:
    app = app_with(
        context={"name": "prod-eu", "production": True},
        prometheus={"url": "https://ops:hunter2@prom.example:9090"},
        kubernetes={"context": "eu-1", "namespace": "ai"},
    )
    async with on_the_board(app) as pilot:
        await command(pilot, "context")
        await until(pilot, lambda: isinstance(app.screen, ContextScreen), "the context box")
        text = str(app.screen.query_one("#context-box Static", Static).render())
        assert "Context prod-eu" in text
        assert "▲ yes — PRODUCTION" in text
        assert "https://ops:********@prom.example:9090" in text
        assert "hunter2" not in text
        assert "context eu-1 · namespace ai" in text
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.board, "the board")


async def test_help_and_quit_commands() -> None:
    app = app_with()
    async with on_the_board(app) as pilot:
        await command(pilot, "help")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.board, "the board")
        await command(pilot, "q")
        await until(pilot, lambda: not app.is_running, "the app to exit")


async def test_the_palette_lists_the_commands_and_runs_them() -> None:
    app = app_with()
    async with on_the_board(app) as pilot:
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        palette = app.screen
        results = palette.query_one(CommandList)

        def shown() -> list[str]:
            options = [results.get_option_at_index(i) for i in range(results.option_count)]
            return [str(option.prompt) for option in options]

        await until(
            pilot,
            lambda: all(any(c.title in p for p in shown()) for c in COMMANDS),
            "every command discovered",
        )
        await pilot.press(*"audit")
        await until(pilot, lambda: any(":audit" in p for p in shown()), "the audit command")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen")


async def test_a_keymap_moves_quit_to_another_key() -> None:
    app = app_with(keys={"app.quit": "z"})
    async with on_the_board(app) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert app.is_running
        assert app.screen is app.board
        await pilot.press("z")
        await until(pilot, lambda: not app.is_running, "the app to exit")


async def test_a_keymap_moves_the_command_line() -> None:
    app = app_with(keys={"app.command": "ctrl+k"})
    async with on_the_board(app) as pilot:
        await pilot.press("ctrl+k")
        await until(pilot, lambda: isinstance(app.screen, CommandLineScreen), "the prompt")


async def test_unknown_binding_ids_in_the_keymap_are_reported_not_fatal() -> None:
    app = app_with(keys={"oncall.quit": "ctrl+q", "app.help": "f1"})
    async with on_the_board(app) as pilot:
        await until(pilot, lambda: bool(notes(app)), "a notification")
        assert "no binding has the id oncall.quit" in notes(app)[0]
        await pilot.press("f1")  # the known id is applied all the same
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")


async def test_help_shows_the_keys_as_remapped() -> None:
    app = app_with(keys={"app.quit": "z", "board.filter": "ctrl+f,f3", "app.help": "f1"})
    async with on_the_board(app) as pilot:
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        lines = str(app.screen.query_one(Static).render()).splitlines()
        by_id = {line.split()[-1]: line.split()[0] for line in lines if line.count(".") == 1}
        assert by_id["app.quit"] == "z"
        assert by_id["board.filter"] == "^f"  # the first of two keys, as Textual writes it
        assert by_id["app.help"] == "f1"
        assert by_id["board.open"] == "⏎"  # not remapped: its own key (enter)


def test_find_command_takes_colons_case_and_aliases() -> None:
    assert find_command(":audit") is not None
    assert find_command(" :Audit ") == find_command("audit")
    found = find_command("quit")
    assert found is not None
    assert found.action == "quit"
    assert find_command(":nope") is None


def test_every_binding_has_a_unique_id_the_keymap_knows() -> None:
    owners = oncall_binding_owners()
    mine = {OncallApp, BoardScreen, IncidentScreen, AuditScreen, HelpScreen, ConfirmScreen}
    assert mine | {CommandLineScreen, ContextScreen} <= set(owners)
    seen: list[str] = []
    for owner in owners:
        for binding in vars(owner).get("BINDINGS", ()):
            assert isinstance(binding, Binding)
            assert binding.id, f"{owner.__name__}: {binding.key} has no id"
            seen.append(binding.id)
    assert len(seen) == len(set(seen))
    assert set(seen) == binding_ids(owners)


def test_split_keymap() -> None:
    keymap, unknown = split_keymap({"app.quit": "z", "x.y": "a", "a.b": "c"}, {"app.quit"})
    assert keymap == {"app.quit": "z"}
    assert unknown == ["a.b", "x.y"]


def test_the_keymap_knows_screens_the_app_has_not_imported_yet() -> None:
    # The app imports the incident, confirm and audit screens when first needed; the keymap
    # must know their ids before that. A fresh interpreter, since this one imported them all.
    code = (
        "import sys\n"
        "from oncall.tui.commands import binding_ids, oncall_binding_owners\n"
        "from oncall.tui.app import OncallApp\n"
        "assert 'oncall.tui.confirm' not in sys.modules\n"
        "print(sorted(binding_ids([OncallApp, *oncall_binding_owners()])))\n"
    )
    argv = [sys.executable, "-c", code]
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    ids = ast.literal_eval(done.stdout)
    for wanted in ("confirm.details", "confirm.no", "incident.rerun", "audit.filter", "app.quit"):
        assert wanted in ids
