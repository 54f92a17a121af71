"""Part 2 of `tui.py`: key press to repaint on the board while every backend hangs.

Each press is timed from handing the key to Pilot until Textual hands the driver the frame
that shows the moved cursor (tui_child.FrameLog); the baseline is a bare DataTable app.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.bench.tui_backends import SilentListeners, write_config
from scripts.bench.tui_child import FrameLog, is_frame, timed_oncall
from scripts.bench.tui_common import HEIGHT, RUN_DEADLINE_S, WIDTH

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.pilot import Pilot
    from textual.screen import Screen


def _cursor_at(cursor: Callable[[], int], row: int) -> Callable[[], bool]:
    return lambda: cursor() == row


async def press_loop(
    pilot: Pilot[Any],
    log: FrameLog,
    cursor: Callable[[], int],
    n: int,
) -> tuple[list[float], int]:
    """Press down/up n times; seconds from each press to the frame showing the moved cursor."""
    latencies: list[float] = []
    missed = 0
    loop = asyncio.get_running_loop()
    for i in range(n):
        key, row = ("down", 1) if i % 2 == 0 else ("up", 0)
        future: asyncio.Future[float] = loop.create_future()
        log.waiter = (_cursor_at(cursor, row), future)
        started = time.perf_counter()
        press = asyncio.ensure_future(pilot.press(key))
        try:
            latencies.append(await asyncio.wait_for(future, timeout=2.0) - started)
        except TimeoutError:
            missed += 1
        await press
        log.waiter = None
    return latencies, missed


async def keys_oncall(config: Path, presses: int) -> tuple[list[float], int, int]:
    from textual.widgets import DataTable

    from oncall.settings.loader import load_settings

    log = FrameLog()
    app = timed_oncall(load_settings(config=config, environ={}).settings, log, exit_when_live=False)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while len(app.book.statuses) < 2 and time.monotonic() < deadline:
            await pilot.pause(0.1)
        if len(app.book.statuses) < 2:
            raise SystemExit("keys: the board got no rows from the hung backends")
        await pilot.press("enter")  # the incident: its checklist starts, every probe hangs
        await pilot.pause(0.2)
        await pilot.press("escape")
        if app.screen is not app.board:
            raise SystemExit(f"keys: expected the board, got {app.screen!r}")
        table = app.board.query_one("#alerts", DataTable)
        table.move_cursor(row=0, animate=False)
        await pilot.pause()
        latencies, missed = await press_loop(pilot, log, lambda: table.cursor_row, presses)
        rows = table.row_count
    return latencies, missed, rows


async def keys_bare(rows: int, presses: int) -> tuple[list[float], int]:
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    log = FrameLog()

    class BareTable(App[None]):
        def compose(self) -> ComposeResult:
            table: DataTable[str] = DataTable(cursor_type="row")
            table.add_columns("State", "Alert", "When", "Findings")
            for i in range(rows):
                table.add_row("○ inactive", f"Alert{i}", "", "")
            yield table

        def _display(self, screen: Screen[Any], renderable: RenderableType | None) -> None:
            super()._display(screen, renderable)
            if is_frame(self, renderable):
                log.frame(live=False)

    app = BareTable()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(DataTable)
        await pilot.pause()
        return await press_loop(pilot, log, lambda: table.cursor_row, presses)


def p99(values: list[float]) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[98]
        if len(values) > 1
        else (values[0] if values else float("nan"))
    )


def part_keys(directory: Path, presses: int) -> None:
    with SilentListeners(4) as silent:
        dead = {
            "redis": silent.url(1, "redis") + "/0",
            "vllm": silent.url(2),
            "kubernetes": silent.url(3),
        }
        config = write_config(directory / "hung.yaml", silent.url(0), dead, directory)
        started = time.monotonic()
        oncall, missed, rows = asyncio.run(keys_oncall(config, presses))
        elapsed = time.monotonic() - started
        held = silent.accepted
    bare, bare_missed = asyncio.run(keys_bare(rows, presses))
    print(
        f"key press to repaint, every backend hanging: {presses} presses (down/up) on the "
        f"board, {rows} rows, {WIDTH}x{HEIGHT}; {held} connections held unanswered over "
        f"{elapsed:.0f} s"
    )
    print(f"{'':34} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99 x base':>11} {'missed':>7}")
    base = p99(bare)
    for name, values, lost in (
        ("baseline: bare app + DataTable", bare, bare_missed),
        ("oncall board, backends hung", oncall, missed),
    ):
        print(
            f"{name:34} {statistics.median(values) * 1000:7.1f} {p99(values) * 1000:7.1f} "
            f"{max(values) * 1000:7.1f} {p99(values) / base:11.2f} {lost:7d}"
        )
    print()
