"""The silence modal (`s`) and the preview it leads to, with a stand-in runner: the form is
pre-filled from the alert's firing instance, Enter on the comment hands the three fields to
the `silence` action, and its preview (matchers, start and end, comment, author, the alerts it
would match) opens in the confirm modal. Snapshots of both; `a` proposes `acknowledge`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Input

from oncall.model.write_path import Plan, Preview, Target
from oncall.tui.app import OncallApp
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.silence import SilenceScreen, matchers_of, prefill
from tests.harness.waiting import until
from tests.tui.fakes import P99, board_statuses
from tests.tui.test_confirm import OK_GUARDS, FakeRemediations, make_app

SHOWN = '{alertname="LLMHighP99Latency", model="qwen"}'


def silence_preview() -> Preview:
    """What the `silence` action previews for one instance: one alert matched."""
    plan = Plan(
        action="silence",
        params={"matchers": SHOWN, "duration": "2h", "comment": "rolling out the fix"},
        target=Target("Silence", SHOWN),
        before="1 alert match now",
        after=f"silenced {SHOWN} from 2026-01-01T00:00:00Z to 2026-01-01T02:00:00Z (2h) by "
        "oncall-operator: rolling out the fix",
        request={"method": "POST", "path": "/api/v2/silences", "body": {"matchers": []}},
        dangerous=False,
        confirm_word="yes",
        notes=(f'matches {SHOWN[:-1]}, severity="page"}} active',),
    )
    dry_run = {"matches": 1, "alerts": [f'{SHOWN[:-1]}, severity="page"}} active']}
    return Preview(plan, dry_run, OK_GUARDS)


def steady(app: App[Any]) -> None:
    for box in app.screen.query(Input):
        box.cursor_blink = False


async def open_form(pilot: Pilot[Any]) -> SilenceScreen:
    app = pilot.app
    assert isinstance(app, OncallApp)
    await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
    await pilot.press("s")
    await until(pilot, lambda: isinstance(app.screen, SilenceScreen), "the silence modal")
    await pilot.pause()
    steady(app)
    assert isinstance(app.screen, SilenceScreen)
    return app.screen


def form_up(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await open_form(pilot)
        await pilot.press(*keys)
        app = pilot.app
        if keys and keys[-1] == "enter":
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the preview")
        await pilot.pause()
        steady(app)

    return run_before


def test_prefill_is_the_firing_instance_or_the_whole_alert() -> None:
    statuses = {s.rule.name: s for s in board_statuses()}
    status = statuses[P99]
    assert prefill(P99, status, None).startswith(f'{{alertname="{P99}"')
    assert matchers_of({"pod": 'a"b', "alertname": "X"}) == '{alertname="X", pod="a\\"b"}'


async def test_enter_on_the_comment_proposes_the_silence() -> None:
    runner = FakeRemediations(silence_preview())
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        form = await open_form(pilot)
        prefilled = form.query_one("#silence-matchers", Input).value
        await pilot.press(*"rolling out", "enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the preview")
        [(proposal, alert, _)] = runner.calls
        assert proposal.action == "silence"
        assert proposal.params == {"matchers": prefilled, "duration": "2h",
                                   "comment": "rolling out"}  # fmt: skip
        assert alert.name == P99
        await pilot.press("escape")  # No: nothing runs
        await until(pilot, lambda: runner.answers == [False], "the answer")


async def test_escape_cancels_and_a_proposes_acknowledge() -> None:
    runner = FakeRemediations(silence_preview())
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_form(pilot)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.board, "the board again")
        assert runner.calls == []
        await pilot.press("a")
        await until(pilot, lambda: len(runner.calls) == 1, "the acknowledgement")
        assert (runner.calls[0][0].action, runner.calls[0][0].params) == (
            "acknowledge", {"alert": P99},
        )  # fmt: skip


@pytest.mark.parametrize("size", [(100, 30), (80, 24)], ids=["100x30", "80x24"])
def test_snapshot_silence_form(snap_compare: Callable[..., bool], size: tuple[int, int]) -> None:
    app = make_app(FakeRemediations(silence_preview()))
    assert snap_compare(app, terminal_size=size, run_before=form_up(*"rolling out the fix"))


def test_snapshot_silence_preview(snap_compare: Callable[..., bool]) -> None:
    app = make_app(FakeRemediations(silence_preview()))
    run_before = form_up(*"rolling out the fix", "enter")
    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)
