"""Part 2 of `tui.py`: key press to repaint on the board while every backend hangs.

Each press is timed from handing the key to Pilot until Textual hands the driver the frame
that shows the moved cursor (tui_child.FrameLog); the baseline is a bare DataTable app. The
table counts the presses over SLOW_S too; with `--why`, what ran during each of them is
printed after it (tui_stalls.py: collections, long callbacks, threads held off the lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scripts.bench.tui_backends import SilentListeners, write_config
from scripts.bench.tui_child import FrameLog, is_frame, timed_oncall
from scripts.bench.tui_common import HEIGHT, RUN_DEADLINE_S, WIDTH
from scripts.bench.tui_stalls import Press, StallRecorder

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.pilot import Pilot
    from textual.screen import Screen
    from textual.widgets import DataTable


#: A press slower than this is counted (the budget is 50 ms; docs/PERFORMANCE.md).
SLOW_S = 0.030


def _cursor_at(cursor: Callable[[], int], row: int) -> Callable[[], bool]:
    return lambda: cursor() == row


async def press_loop(
    pilot: Pilot[Any],
    log: FrameLog,
    cursor: Callable[[], int],
    n: int,
    presses: list[Press] | None = None,
) -> tuple[list[float], int]:
    """Press down/up n times; seconds from each press to the frame showing the moved cursor.

    With `presses`, each answered press is added to it (times and CPU, for `--why`)."""
    latencies: list[float] = []
    missed = 0
    loop = asyncio.get_running_loop()
    for i in range(n):
        key, row = ("down", 1) if i % 2 == 0 else ("up", 0)
        future: asyncio.Future[float] = loop.create_future()
        log.waiter = (_cursor_at(cursor, row), future)
        started, cpu, loop_cpu = time.perf_counter(), time.process_time(), time.thread_time()
        press = asyncio.ensure_future(pilot.press(key))
        try:
            shown = await asyncio.wait_for(future, timeout=2.0)
        except TimeoutError:
            missed += 1
        else:
            latencies.append(shown - started)
            if presses is not None:
                spent = (time.process_time() - cpu, time.thread_time() - loop_cpu)
                presses.append(Press(started, shown, *spent))
        await press
        log.waiter = None
    return latencies, missed


@contextlib.asynccontextmanager
async def board_after_incident(
    config: Path,
    log: FrameLog,
    *,
    ready: Callable[[Any], bool],
    pick: Callable[[Any], int] = lambda _app: 0,
    prepare: Callable[[Any], None] = lambda _app: None,
) -> AsyncIterator[tuple[Any, Pilot[Any], DataTable[Any]]]:
    """The app under `run_test` once `ready(app)`: the alert at row `pick(app)` opened (its
    checklist starts, every probe hangs), back on the board, the cursor on row 0.

    `prepare(app)` runs before the app starts (to wrap its sources)."""
    from textual.widgets import DataTable

    from oncall.settings.loader import load_settings

    app = timed_oncall(load_settings(config=config, environ={}).settings, log, exit_when_live=False)
    prepare(app)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        deadline = time.monotonic() + RUN_DEADLINE_S
        while not ready(app) and time.monotonic() < deadline:
            await pilot.pause(0.1)
        if not ready(app):
            raise SystemExit("keys: the board did not get its rows from the backends")
        table: DataTable[Any] = app.board.query_one("#alerts", DataTable)
        table.move_cursor(row=pick(app), animate=False)
        await pilot.pause()
        await pilot.press("enter")  # the incident: its checklist starts, every probe hangs
        await pilot.pause(0.2)
        await pilot.press("escape")
        if app.screen is not app.board:
            raise SystemExit(f"keys: expected the board, got {app.screen!r}")
        table.move_cursor(row=0, animate=False)
        await pilot.pause()
        yield app, pilot, table


async def keys_oncall(
    config: Path, presses: int, timeline: list[Press] | None = None
) -> tuple[list[float], int, int]:
    log = FrameLog()
    board = board_after_incident(config, log, ready=lambda app: len(app.book.statuses) >= 2)
    async with board as (_app, pilot, table):
        cursor = lambda: table.cursor_row  # noqa: E731
        latencies, missed = await press_loop(pilot, log, cursor, presses, timeline)
        return latencies, missed, table.row_count


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


def part_keys(directory: Path, presses: int, why: bool = False) -> None:
    """Part 2; with `why`, what ran during each press over SLOW_S (tui_stalls.py) too."""
    timeline: list[Press] = []
    recorder = StallRecorder()
    with SilentListeners(4) as silent:
        prometheus, dead = silent.backends()
        config = write_config(directory / "hung.yaml", prometheus, dead, directory)
        started = time.monotonic()
        with recorder.installed() if why else contextlib.nullcontext(recorder):
            oncall, missed, rows = asyncio.run(keys_oncall(config, presses, timeline))
        elapsed = time.monotonic() - started
        held = silent.accepted
    bare, bare_missed = asyncio.run(keys_bare(rows, presses))
    print(
        f"key press to repaint, every backend hanging: {presses} presses (down/up) on the "
        f"board, {rows} rows, {WIDTH}x{HEIGHT}; {held} connections held unanswered over "
        f"{elapsed:.0f} s"
    )
    print(
        f"{'':34} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99 x base':>11} {'missed':>7} "
        f"{'> 30 ms':>8}"
    )
    base = p99(bare)
    for name, values, lost in (
        ("baseline: bare app + DataTable", bare, bare_missed),
        ("oncall board, backends hung", oncall, missed),
    ):
        print(
            f"{name:34} {statistics.median(values) * 1000:7.1f} {p99(values) * 1000:7.1f} "
            f"{max(values) * 1000:7.1f} {p99(values) / base:11.2f} {lost:7d} "
            f"{sum(v > SLOW_S for v in values):8d}"
        )
    # CPU time: what the app's own work cost each press, whatever else the machine ran.
    loop_cpu = [p.loop_cpu * 1000 for p in timeline]
    process_cpu = max(p.process_cpu for p in timeline) * 1000
    print(
        f"oncall, CPU per press: loop thread p99 {p99(loop_cpu):.1f} ms, max {max(loop_cpu):.1f}"
        f" ms; process max {process_cpu:.1f} ms; presses with loop CPU over {SLOW_S * 1000:g}"
        f" ms: {sum(c > SLOW_S * 1000 for c in loop_cpu)}"
    )
    print()
    if why:
        recorder.explain(timeline, SLOW_S)
        print()
