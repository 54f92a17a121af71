"""The incident screen's charts under Pilot: one request per zoom change and none per repaint,
the zoom keys bounded at 15m and 24h, and a bounded follow after a verified remediation."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from oncall.tui.app import OncallApp
from oncall.tui.chart_panel import FOLLOW_EVERY_S, FOLLOW_FOR_S, AlertChart
from tests.harness.waiting import until
from tests.tui.chart_fakes import FakeCharts
from tests.tui.fakes import (
    P99,
    FakeAlerts,
    FakeChecklists,
    FakeClock,
    board_statuses,
    make_app,
    p99_script,
)


def app_and_charts() -> tuple[OncallApp, FakeCharts, FakeClock]:
    clock = FakeClock()
    app = make_app(FakeAlerts(board_statuses()), FakeChecklists({P99: p99_script()}), clock=clock)
    assert isinstance(app.chart_source, FakeCharts)
    return app, app.chart_source, clock


async def open_chart(pilot: Pilot[Any], app: OncallApp) -> AlertChart:
    """Open P99's incident from the board; its chart, once the first series is drawn."""
    await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
    await pilot.press("enter")
    chart = app.screen.query_one(AlertChart)
    await until(pilot, lambda: chart.view.data is not None, "the first chart")
    return chart


async def test_zoom_asks_once_per_window_and_repaints_ask_nothing() -> None:
    app, charts, _ = app_and_charts()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = await open_chart(pilot, app)
        for _ in range(5):
            app.repaint(P99)
            await pilot.pause()
        assert charts.alert_calls == [(P99, 3600.0)]
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
        await until(pilot, lambda: len(charts.alert_calls) == 3, "two zooms out")
        await pilot.press("left_square_bracket")
        await until(pilot, lambda: len(charts.alert_calls) == 4, "one zoom in")
        await pilot.pause()
        # 24h was the end: the third ] rang the bell, asked nothing
        assert [w for _, w in charts.alert_calls] == [3600.0, 21600.0, 86400.0, 21600.0]
        assert chart.window == "6h"
        await until(pilot, lambda: "last 6h" in chart.view.note, "the note")


async def test_follow_refreshes_on_a_bounded_schedule() -> None:
    app, charts, clock = app_and_charts()
    async with app.run_test(size=(100, 30)) as pilot:
        chart = await open_chart(pilot, app)
        chart.follow()
        await until(pilot, lambda: len(charts.alert_calls) == 2, "the refresh at once")
        assert chart.follow_until == clock() + FOLLOW_FOR_S
        assert "following the remediation" in chart.note()
        clock.advance(FOLLOW_EVERY_S)
        chart._tick()  # what the interval timer calls every FOLLOW_EVERY_S
        await until(pilot, lambda: len(charts.alert_calls) == 3, "a follow refresh")
        clock.advance(FOLLOW_FOR_S)
        chart._tick()
        await pilot.pause()
        assert len(charts.alert_calls) == 3  # over: no more
        assert "following" not in chart.note()
