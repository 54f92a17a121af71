"""The incident screen: steps streaming in, evidence, proposals, re-run, a hung checklist."""

from __future__ import annotations

import asyncio

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from oncall.model.checklist_events import ChecklistPlanned
from oncall.tui.app import OncallApp
from oncall.tui.board import BoardScreen
from oncall.tui.help import HelpScreen
from oncall.tui.incident import IncidentScreen
from tests.harness.waiting import until
from tests.tui.fakes import (
    P99,
    P99_STEPS,
    T0,
    FakeAlerts,
    FakeChecklists,
    FakeClock,
    board_app,
    make_app,
    p99_script,
    shown,
    started,
    status,
)


def incident(app: OncallApp) -> IncidentScreen:
    screen = app.screen
    assert isinstance(screen, IncidentScreen)
    return screen


def step_rows(app: OncallApp) -> dict[str, list[str]]:
    table: DataTable[Text] = incident(app).query_one("#steps", DataTable)
    rows = {}
    for i in range(table.row_count):
        cells = [cell.plain for cell in table.get_row_at(i)]
        rows[cells[1]] = cells
    return rows


def text_of(app: OncallApp, selector: str) -> str:
    return str(incident(app).query_one(selector, Static).render())


async def open_p99(app: OncallApp, pilot: Pilot[None]) -> None:
    await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
    await pilot.press("enter")
    assert incident(app).alert == P99


async def test_steps_stream_in_with_evidence_and_proposals() -> None:
    gates = asyncio.Event(), asyncio.Event(), asyncio.Event()
    checklists = FakeChecklists({P99: p99_script(*gates)})
    clock = FakeClock()
    app = board_app(checklists, clock=clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await open_p99(app, pilot)
        await until(pilot, lambda: len(step_rows(app)) == 4, "the planned steps")
        rows = step_rows(app)
        assert rows["gpu_memory"][0] == "◌ running"
        assert rows["deployment"][0] == "✓ ok"
        assert rows["deployment"][2:] == ["0.18s", "2/2 ready, --max-num-seqs 256"]
        assert rows["token_rate"][0] == "· queued"
        assert "1/4 steps" in text_of(app, "#incident-meta")
        assert "probe not answered yet" in text_of(app, "#evidence")

        gates[0].set()
        await until(pilot, lambda: step_rows(app)["gpu_memory"][0] == "✗ fail", "gpu result")
        evidence = text_of(app, "#evidence")
        assert "GPU memory used (busiest): 0.972 ratio  (threshold 0.95 ratio)" in evidence
        assert "$ nvidia-smi --query-gpu=memory.used,memory.total --format=csv" in evidence
        assert "Lower --max-num-seqs to 64" in text_of(app, "#proposals")

        gates[1].set()
        await until(pilot, lambda: step_rows(app)["token_rate"][0] == "? unknown", "unknown")
        assert step_rows(app)["kv_cache"][0] == "· queued"
        gates[2].set()
        await until(pilot, lambda: "results" in text_of(app, "#incident-meta"), "the end")
        assert "results 0s old · 2 fail · 1 unknown" in text_of(app, "#incident-meta")
        clock.advance(42)
        app.repaint()
        assert "results 42s old" in text_of(app, "#incident-meta")

        await pilot.press("down", "down")  # the evidence pane follows the highlighted step
        assert "Every running sequence generates" in text_of(app, "#evidence")
        assert "prometheus at http://127.0.0.1:9090: timeout" in text_of(app, "#evidence")

        await pilot.press("escape")
        assert app.screen is app.board
        assert checklists.alerts == [P99]  # opening an alert that ran already runs nothing


async def test_opening_an_alert_that_never_ran_starts_its_checklist() -> None:
    checklists = FakeChecklists()
    app = make_app(FakeAlerts([status("AIServiceUnavailable", "pending", fires_in=30)]), checklists)
    async with app.run_test() as pilot:
        await until(pilot, lambda: app.board.selected_alert() is not None, "the board")
        assert checklists.calls == []
        await pilot.press("enter")
        await until(pilot, lambda: checklists.calls == [("AIServiceUnavailable", "pending")], "run")
        await until(pilot, lambda: "all ok" in text_of(app, "#incident-meta"), "its findings")


async def test_a_hung_checklist_leaves_the_keys_answered_and_shows_the_step_running() -> None:
    never = asyncio.Event()
    step, title = P99_STEPS[0]
    planned = ChecklistPlanned("runbooks/LLMHighP99Latency.yaml", P99_STEPS)
    checklists = FakeChecklists({P99: [planned, started(step, title, at=T0), never]})
    clock = FakeClock()
    app = board_app(checklists, clock=clock)
    async with app.run_test() as pilot:
        async with asyncio.timeout(30):  # a blocked event loop fails here, not by hanging
            await open_p99(app, pilot)
            await until(pilot, lambda: step in step_rows(app), "the step")
            clock.advance(12)
            app.repaint()
            assert step_rows(app)[step][:3] == ["◌ running", step, "running 12s"]
            assert "checklist running 12s · 0/4 steps" in text_of(app, "#incident-meta")
            table = incident(app).query_one("#steps", DataTable)
            await until(pilot, lambda: any("running 12s" in line for line in shown(table)), "12s")
            clock.advance(1)  # the next tick: a cached cell left in place would still say 12s
            app.repaint()
            await until(pilot, lambda: any("running 13s" in line for line in shown(table)), "13s")
            assert not any("running 12s" in line for line in shown(table))
            await pilot.press("down", "up", "question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape", "escape")
            assert isinstance(app.screen, BoardScreen)
            await pilot.press("down", "up", "slash", "x", "escape", "enter")
            assert incident(app).alert == P99
        assert checklists.ended == []  # still hung, never restarted
        assert len(checklists.calls) == 1


async def test_rerun_replaces_a_hung_run() -> None:
    never = asyncio.Event()
    step, title = P99_STEPS[0]
    checklists = FakeChecklists({P99: [started(step, title), never]})
    app = make_app(FakeAlerts([status(P99, "firing")]), checklists)
    async with app.run_test() as pilot:
        await open_p99(app, pilot)
        await until(pilot, lambda: step in step_rows(app), "the hung step")
        checklists.scripts[P99] = [started(step, title)]
        await pilot.press("r")
        await until(pilot, lambda: checklists.ended == [P99, P99], "the old run cancelled")
        await until(pilot, lambda: "results" in text_of(app, "#incident-meta"), "new run ended")
        assert len(checklists.calls) == 2


async def test_a_checklist_that_raises_says_so() -> None:
    planned = ChecklistPlanned("runbooks/x.yaml", P99_STEPS)
    broken = FakeChecklists({P99: [planned, RuntimeError("probe registry exploded")]})
    app = make_app(FakeAlerts([status(P99, "firing")]), broken)
    async with app.run_test() as pilot:
        await open_p99(app, pilot)
        await until(pilot, lambda: not app.book.runs[P99].running, "the end")
        assert app.book.runs[P99].error == "RuntimeError: probe registry exploded"
        meta = text_of(app, "#incident-meta")
        assert meta == "checklist stopped 0s ago: RuntimeError: probe registry exploded"
        assert app.board.rows()[0][1][3][0] == "error"


async def test_a_runner_that_never_yields_shows_the_run_waiting_and_esc_still_works() -> None:
    checklists = FakeChecklists({P99: [asyncio.Event()]})  # a gate nobody opens
    clock = FakeClock()
    app = make_app(FakeAlerts([status(P99, "firing")]), checklists, clock=clock)
    async with app.run_test() as pilot:
        async with asyncio.timeout(30):
            await open_p99(app, pilot)
            clock.advance(7)
            app.repaint()
            meta = text_of(app, "#incident-meta")
            assert meta == "checklist running 7s · waiting for the runbook"
            assert text_of(app, "#evidence") == "waiting for the checklist to start…"
            await pilot.press("escape")
            assert app.board.rows()[0][1][3][0] == "running…"
