"""SVG snapshots of each screen state that matters, at 100x30 and at the 80x24 minimum.

Every time on screen comes from a `FakeClock`, so the pictures are the same on every run.
Accept a deliberate change with `pytest tests/tui --snapshot-update` and review the SVGs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable

from oncall.tui.app import OncallApp
from tests.harness.waiting import until
from tests.tui.fakes import P99, FakeChecklists, FakeClock, board_app, p99_script
from tests.tui.snapshot_sizes import SIZES, Compare

RunBefore = Callable[[Pilot[Any]], Awaitable[None]]


def p99_board(clock: FakeClock, *gates: asyncio.Event, **changes: Any) -> OncallApp:
    """The board with its last hour, P99's checklist waiting at `gates`."""
    checklists = FakeChecklists({P99: p99_script(*gates)})
    return board_app(checklists, history=True, clock=clock, **changes)


def board_settled(app: OncallApp) -> bool:
    run = app.book.runs.get(P99)
    settled = run is not None and not run.running and bool(app.book.history)
    return settled and app.board.selected_alert() is not None


async def settle_board(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, OncallApp)
    await until(pilot, lambda: board_settled(app), "the board with the P99 findings")


def open_p99(clock: FakeClock, *, finished: bool, age: float) -> RunBefore:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, OncallApp)
        await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
        await pilot.press("enter")
        run = app.book.runs[P99]
        if finished:
            await until(pilot, lambda: not run.running, "the end of the run")
        else:
            await until(pilot, lambda: "deployment" in run.results, "the first result")
        clock.advance(age)
        app.repaint()
        # A cell's new width is applied on the table's next idle: wait for it, or a loaded
        # machine photographs "running 12" cut to the width "running 0s" had.
        await until(pilot, lambda: steps_laid_out(app), "the steps table's new widths")

    return run_before


def steps_laid_out(app: OncallApp) -> bool:
    """Every column of the incident's steps table is as wide as its widest cell."""
    table: DataTable[Text] = app.screen.query_one("#steps", DataTable)
    return all(
        column.content_width >= max((cell.cell_len for cell in table.get_column(key)), default=0)
        for key, column in table.columns.items()
    )


@pytest.mark.parametrize("size", SIZES)
def test_board_with_inactive_pending_and_firing_alerts(
    snap_compare: Compare, size: tuple[int, int]
) -> None:
    app = p99_board(FakeClock())
    assert snap_compare(app, terminal_size=size, run_before=settle_board)


@pytest.mark.parametrize("size", SIZES)
def test_incident_mid_run(snap_compare: Compare, size: tuple[int, int]) -> None:
    clock = FakeClock()
    app = p99_board(clock, asyncio.Event())  # stops before the GPU step's answer
    run_before = open_p99(clock, finished=False, age=12)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_incident_finished(snap_compare: Compare, size: tuple[int, int]) -> None:
    clock = FakeClock()
    app = p99_board(clock)
    run_before = open_p99(clock, finished=True, age=42)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_read_only_banner(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = p99_board(FakeClock(), read_only=True, context={"name": "staging"})
    assert snap_compare(app, terminal_size=size, run_before=settle_board)


@pytest.mark.parametrize("size", SIZES)
def test_production_context(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = p99_board(FakeClock(), context={"name": "prod-eu", "production": True})
    assert snap_compare(app, terminal_size=size, run_before=settle_board)


@pytest.mark.parametrize("size", SIZES)
def test_no_color(
    snap_compare: Compare, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = p99_board(FakeClock(), context={"name": "prod-eu", "production": True})
    assert app.no_color
    assert snap_compare(app, terminal_size=size, run_before=settle_board)
