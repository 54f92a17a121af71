"""The board, driven with Pilot against fakes at the service boundary."""

from __future__ import annotations

import asyncio
import gc
import warnings
from dataclasses import replace
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.render import measure
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from oncall.model.alerts import AlertStateName, RuleStatus
from oncall.service.sources import NoRunbook
from oncall.tui.app import OncallApp
from oncall.tui.banner import ContextBanner, ReadOnlyBanner
from oncall.tui.board import BoardScreen
from oncall.tui.help import HelpScreen
from oncall.tui.messages import HistoryRefreshed
from tests.harness.waiting import until
from tests.tui.fakes import (
    P99,
    T0,
    FakeAlerts,
    FakeChecklists,
    FakeClock,
    board_app,
    board_history,
    board_statuses,
    make_app,
    p99_script,
    status,
)


def board_rows(app: OncallApp) -> list[list[str]]:
    """The board's table as the user reads it: plain text, row by row."""
    table: DataTable[Text] = app.board.query_one("#alerts", DataTable)
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


def top(app: OncallApp) -> Screen[object]:
    return app.screen


async def refreshed(pilot: Pilot[None], app: OncallApp, alerts: FakeAlerts) -> None:
    before = alerts.calls
    app.refresh_alerts_now()
    await until(pilot, lambda: alerts.calls > before, "a refresh")


def findings_of(app: OncallApp, alert: str) -> str | None:
    """The findings column of `alert`'s row; None before the first refresh put it there."""
    return next((row[3] for row in board_rows(app) if row[1] == alert), None)


async def test_board_lists_firing_then_pending_then_the_rest() -> None:
    app = board_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 5, "the first refresh")
        rows = board_rows(app)
        assert [(r[0], r[1]) for r in rows] == [
            ("● firing", P99),
            ("◐ pending", "AIServiceUnavailable"),
            ("○ inactive", "VectorSearchP999High"),
            ("? unknown", "PromptRejectionRateHigh"),
            ("○ inactive", "LLMOutOfMemory"),
        ]
        assert rows[0][2] == "firing for 3m02s"
        assert rows[0][4] == "1.84 s > 1.2 s"  # the value against its rule's threshold, in seconds
        assert rows[1][2:5] == ["fires in 1m12s", "", "3.1% > 1%"]  # a ratio, as a percentage
        assert rows[2][4] == "> 0.2 s"  # inactive: no value, the threshold alone
        unknown = rows[3]
        assert unknown[2] == "stale 2m"
        assert unknown[6] == "2m20s ago"
        assert unknown[8] == "stale 2m: prometheus at http://127.0.0.1:9090: refused"
        status_line = str(app.board.query_one("#board-status", Static).render())
        assert "5 alerts · 1 firing · 1 pending · 1 unknown" in status_line


async def test_a_rule_whose_evaluation_failed_keeps_its_state_and_warns_with_the_error() -> None:
    text = "evaluation failed: many-to-many matching not allowed"
    broken = replace(status("BrokenJoin", "inactive", error=text), health="err", last_error=text)
    app = make_app(FakeAlerts([broken]))
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 1, "the first refresh")
        row = board_rows(app)[0]
        assert (row[0], row[1]) == ("○ inactive", "BrokenJoin")
        assert row[-1] == text
        cells = app.board.cells(broken, T0)
        assert (cells[0][1], cells[-1][1]) == ("success", "warning")  # the state: as inactive


async def test_the_last_hour_column_draws_each_alerts_history_as_a_sparkline() -> None:
    alerts = FakeAlerts(board_statuses(), board_history())
    app = make_app(alerts)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: alerts.history_calls == 1, "the history asked for")
        await until(pilot, lambda: bool(board_rows(app) and board_rows(app)[0][5]), "the sparkline")
        by_alert = {row[1]: row[5] for row in board_rows(app)}
        # P99 climbs over the last 20 minutes (board_history); five-minute slots, oldest left.
        assert by_alert[P99] == "▁▁▁▁▁▁▁▁▂▄▆█"
        # AIServiceUnavailable has no points before the last quarter of an hour: a gap.
        assert by_alert["AIServiceUnavailable"] == "         ▁▅█"
        assert by_alert["VectorSearchP999High"] == ""  # no history at all


async def test_at_80_columns_right_scrolls_the_board_to_the_columns_beyond() -> None:
    app = board_app(history=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: bool(app.book.history) and bool(board_rows(app)), "rows")
        table: DataTable[Text] = app.board.query_one("#alerts", DataTable)
        assert table.scroll_x == 0 and table.max_scroll_x > 0  # "Last hour" is off screen
        await pilot.press("right", "right", "right", "right", "right", "right")
        await until(pilot, lambda: table.scroll_x > 0, "the table scrolled right")
        assert app.board.selected_alert() == P99  # the row cursor did not move


async def test_history_is_asked_for_after_a_refresh_at_most_every_15_seconds() -> None:
    alerts = FakeAlerts([status(P99, "firing")], {P99: [(T0 - 60, 1.0), (T0 - 30, 2.0)]})
    clock = FakeClock()
    app = make_app(alerts, clock=clock)
    async with app.run_test() as pilot:
        await until(pilot, lambda: alerts.history_calls == 1, "the first history")
        for _ in range(3):
            await refreshed(pilot, app, alerts)
        await pilot.pause()
        assert alerts.history_calls == 1
        clock.advance(15)
        await refreshed(pilot, app, alerts)
        await until(pilot, lambda: alerts.history_calls == 2, "the second history")


async def test_a_failing_history_leaves_the_board_working() -> None:
    class NoHistory(FakeAlerts):
        async def history(self) -> dict[str, list[tuple[float, float]]]:
            self.history_calls += 1
            raise RuntimeError("range query refused")

    alerts = NoHistory([status(P99, "firing", value=2.0)])
    app = make_app(alerts)
    async with app.run_test() as pilot:
        await until(pilot, lambda: alerts.history_calls == 1, "the history asked for")
        await refreshed(pilot, app, alerts)
        row = board_rows(app)[0]
        assert row[1] == P99 and row[4] == "2 s > 1.2 s" and row[5] == ""


async def test_a_repaint_after_the_app_began_shutting_down_does_nothing() -> None:
    # The ages timer may fire while the screens are taken apart at exit.
    app = board_app()
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 5, "the board")
    assert not app.is_running
    app.repaint()  # no widget left to update: nothing happens, nothing raises


async def test_a_history_answer_after_the_app_began_shutting_down_does_nothing() -> None:
    # A range query answered while the app exits posts its message to screens taken apart.
    app = board_app()
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 5, "the board")
    assert not app.is_running
    app.on_history_refreshed(HistoryRefreshed({}))  # nothing happens, nothing raises


async def test_rows_follow_state_changes_and_the_cursor_stays_on_its_alert() -> None:
    alerts = FakeAlerts([status("A", "inactive"), status("B", "inactive")])
    app = make_app(alerts)
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 2, "the first refresh")
        await pilot.press("down")
        assert app.board.selected_alert() == "B"
        alerts.statuses = [status("A", "inactive"), status("B", "pending", fires_in=30)]
        app.refresh_alerts_now()
        await until(pilot, lambda: board_rows(app)[0][1] == "B", "B moves up")
        assert app.board.selected_alert() == "B"


async def test_no_color_keeps_every_state_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = board_app()
    assert app.no_color
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 5, "the first refresh")
        symbols = {row[0] for row in board_rows(app)}
        assert symbols == {"● firing", "◐ pending", "○ inactive", "? unknown"}


async def test_a_firing_alerts_checklist_starts_by_itself_and_the_board_shows_findings() -> None:
    gate = asyncio.Event()
    checklists = FakeChecklists({P99: p99_script(gate)})
    app = board_app(checklists)
    async with app.run_test() as pilot:
        await until(pilot, lambda: checklists.alerts == [P99], "the checklist starting")
        await until(pilot, lambda: findings_of(app, P99) == "running…", "running… on the board")
        assert isinstance(app.screen, type(app.board))  # nobody opened it
        gate.set()
        await until(
            pilot, lambda: findings_of(app, P99) == "2 fail · 1 unknown", "findings on the board"
        )
        # Only the firing alert ran, once, with its state handed to the runner.
        assert checklists.calls == [(P99, "firing")]
        assert findings_of(app, "AIServiceUnavailable") == ""


async def test_the_auto_run_setting_starts_checklists_of_pending_alerts_or_none() -> None:
    statuses = [status(P99, "pending", fires_in=30), status("AIServiceUnavailable", "firing")]
    checklists = FakeChecklists()
    app = make_app(FakeAlerts(statuses), checklists, runbooks={"auto_run": "pending"})
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(checklists.calls) == 2, "both checklists")
        assert sorted(checklists.calls) == [("AIServiceUnavailable", "firing"), (P99, "pending")]
    alerts = FakeAlerts(statuses)
    checklists = FakeChecklists()
    app = make_app(alerts, checklists, runbooks={"auto_run": "off"})
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 2, "the board")
        await refreshed(pilot, app, alerts)
        assert checklists.calls == []


async def test_the_checklist_runner_warms_up_once_after_the_first_alert_states() -> None:
    alerts = FakeAlerts([status(P99, "inactive")], {P99: [(T0 - 60, 1.0)]})
    checklists = FakeChecklists()
    clock = FakeClock()
    app = make_app(alerts, checklists, clock=clock)
    async with app.run_test() as pilot:
        await until(pilot, lambda: checklists.warm_ups == 1, "the warm-up")
        assert alerts.calls >= 1  # not before the states were asked for
        # Later refreshes and history answers do not warm up again (each warm-up freezes
        # every object the collector tracks: again and again, that would be a leak).
        for _ in range(3):
            clock.advance(15)
            asked = alerts.history_calls
            await refreshed(pilot, app, alerts)

            def answered(before: int = asked) -> bool:
                return alerts.history_calls > before

            await until(pilot, answered, "a history answer")
        await pilot.pause()
        assert checklists.warm_ups == 1
        assert checklists.calls == []  # warming up runs nothing


async def test_a_checklist_runs_again_when_the_alert_fires_again_a_minute_later() -> None:
    alerts = FakeAlerts([status(P99, "firing")])
    checklists = FakeChecklists()
    clock = FakeClock()
    app = make_app(alerts, checklists, clock=clock)
    async with app.run_test() as pilot:
        await until(pilot, lambda: findings_of(app, P99) == "all ok", "the first run")
        states: tuple[AlertStateName, ...] = ("pending", "firing")
        for state in states:
            alerts.statuses = [status(P99, state)]
            await refreshed(pilot, app, alerts)
            await pilot.pause()
        assert len(checklists.calls) == 1  # flapping within the minute: no second run
        clock.advance(60)
        app.refresh_alerts_now()
        await until(pilot, lambda: len(checklists.calls) == 2, "the run after a minute")


async def test_a_missing_runbook_shows_on_the_board() -> None:
    checklists = FakeChecklists({P99: [NoRunbook(f"no runbook for alert {P99!r}")]})
    app = make_app(FakeAlerts([status(P99, "firing")]), checklists)
    async with app.run_test() as pilot:
        await until(pilot, lambda: findings_of(app, P99) == "no runbook", "no runbook")


async def test_filter_narrows_the_board_and_esc_clears_it() -> None:
    app = board_app()
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 5, "the first refresh")
        await pilot.press("slash", "l", "l", "m")
        assert [r[1] for r in board_rows(app)] == [P99, "LLMOutOfMemory"]
        await pilot.press("enter")
        assert isinstance(app.focused, DataTable)
        assert len(board_rows(app)) == 2
        await pilot.press("escape")
        assert len(board_rows(app)) == 5


async def test_help_lists_the_keys_with_their_ids() -> None:
    app = board_app()
    async with app.run_test() as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(Static).render())
        for binding_id in ("board.open", "board.filter", "board.rerun", "app.quit", "app.help"):
            assert binding_id in text
        await pilot.press("escape")
        assert isinstance(top(app), BoardScreen)


async def test_banners_name_the_context_and_read_only() -> None:
    app = make_app(FakeAlerts(), context={"name": "prod-eu", "production": True}, read_only=True)
    async with app.run_test():
        banner = app.board.query_one(ContextBanner)
        assert "PRODUCTION" in str(banner.render())
        assert banner.has_class("production")
        assert "READ-ONLY" in str(app.board.query_one(ReadOnlyBanner).render())
    plain = make_app(FakeAlerts(), context={"name": "drill"})
    async with plain.run_test():
        assert "context drill" in str(plain.board.query_one(ContextBanner).render())
        assert not plain.board.query(ReadOnlyBanner)


async def test_a_failing_refresh_is_shown_and_retried() -> None:
    class Broken(FakeAlerts):
        async def refresh(self) -> list[RuleStatus]:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("rule files moved")
            return await super().refresh()

    alerts = Broken([status(P99, "inactive")])
    app = make_app(alerts)
    async with app.run_test() as pilot:
        status_text = lambda: str(app.board.query_one("#board-status", Static).render())  # noqa: E731
        await until(pilot, lambda: "rule files moved" in status_text(), "the error shown")
        app.refresh_alerts_now()
        await until(pilot, lambda: len(board_rows(app)) == 1, "the retry")
    assert alerts.closed


async def test_r_on_the_board_reruns_the_highlighted_alert_and_refreshes_now() -> None:
    alerts = FakeAlerts([status("A", "pending", fires_in=30), status("B", "inactive")])
    checklists = FakeChecklists()
    app = make_app(alerts, checklists)
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 2, "the first refresh")
        calls = alerts.calls
        await pilot.press("down", "r")
        await until(pilot, lambda: checklists.alerts == ["B"], "B's checklist")
        await until(pilot, lambda: alerts.calls > calls, "a refresh now")
        await until(pilot, lambda: findings_of(app, "B") == "all ok", "B's findings")


async def test_a_run_replaced_before_it_started_leaves_no_coroutine_never_awaited() -> None:
    """An alert's checklist started twice in one loop step (an auto run, then `r`): the first
    worker is cancelled before its task ever ran, and no coroutine of it is dropped unawaited
    (Python's RuntimeWarning would be printed over the terminal)."""
    checklists = FakeChecklists()
    app = make_app(FakeAlerts([status("B", "inactive")]), checklists)
    async with app.run_test() as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 1, "the first refresh")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            app.start_checklist("B")
            app.start_checklist("B")
            await until(pilot, lambda: findings_of(app, "B") == "all ok", "B's findings")
            await until(
                pilot, lambda: not any(w.group == "checklist:B" for w in app.workers), "ended"
            )
            gc.collect()
        assert checklists.alerts == ["B"]  # the second run alone ran
        assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


async def test_a_repaint_fits_each_changed_column_with_one_measure_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every row's age changes each second: the table measures a changed column once per
    repaint (DataTable measures the whole column for each cell it is asked to fit that is
    narrower than it: 200 rules measured ~40,000 cells a column each second), and the
    columns still fit their cells, a narrower widest cell too."""
    measured = 0

    def counted(*args: Any, **kwargs: Any) -> int:
        nonlocal measured
        measured += 1
        return measure(*args, **kwargs)

    # Where DataTable looks it up when it fits a column to its cells.
    monkeypatch.setattr("textual.widgets._data_table.measure", counted)
    rows, wide = 120, "a long error that makes the note column wide"
    names = [f"Rule{i:03}" for i in range(rows)]
    alerts = FakeAlerts(
        [status(n, "inactive", error=wide if n == names[0] else "short") for n in names]
    )
    clock = FakeClock()
    app = make_app(alerts, clock=clock)
    async with app.run_test(size=(200, 30)) as pilot:
        await until(pilot, lambda: len(board_rows(app)) == rows, "the first refresh")
        table: DataTable[Text] = app.board.query_one("#alerts", DataTable)

        def widths(note: int) -> bool:  # fitted when the table was idle
            columns = table.columns
            evaluated = columns[ColumnKey("evaluated")].content_width == len("Evaluated")
            return columns[ColumnKey("note")].content_width == note and evaluated

        await until(pilot, lambda: widths(len(wide)), "the columns fitted to the rows")
        alerts.statuses = [status(n, "inactive", error="short") for n in names]
        clock.advance(10)
        await pilot.pause()
        measured = 0
        await refreshed(pilot, app, alerts)
        await until(pilot, lambda: board_rows(app)[0][8] == "short", "the narrower note")
        await until(pilot, lambda: widths(len("short")), "the note column narrower")
        assert measured <= 4 * rows  # a column or two measured once, not once a cell


async def test_the_filter_takes_label_matchers_and_says_when_nothing_matches() -> None:
    app = board_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: len(board_rows(app)) == 5, "the first refresh")
        await pilot.press("slash", *'severity="chat"')
        assert {r[1] for r in board_rows(app)} == {
            "VectorSearchP999High",
            "PromptRejectionRateHigh",
        }
        box = app.board.query_one("#filter")
        box.value = 'alertname=~"LLM.*" inactive'  # type: ignore[attr-defined]
        await pilot.pause()
        assert [r[1] for r in board_rows(app)] == ["LLMOutOfMemory"]
        box.value = 'team="none"'  # type: ignore[attr-defined]
        await pilot.pause()
        assert board_rows(app) == []
        status_text = str(app.board.query_one("#board-status", Static).render())
        assert "no alert matches filter 'team=\"none\"'" in status_text
        box.value = "severity=chat"  # type: ignore[attr-defined]
        await pilot.pause()
        assert board_rows(app) == []
        assert "needs quotes" in str(app.board.query_one("#board-status", Static).render())
