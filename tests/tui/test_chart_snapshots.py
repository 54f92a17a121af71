"""SVG snapshots of the incident screen's charts: a firing alert's chart with its threshold,
pending/firing shading and an action marker, and a step's PromQL evidence chart; at 100x30,
at 80x24 and with NO_COLOR (the sparkline, at both sizes), and the full evidence chart at
100x40. Fixed series (`FakeCharts`) and a `FakeClock`.

The evidence pane holds the step's text above its charts; below 40 rows the chart is under
the fold, so the snapshots scroll to it as an operator would, with the keyboard (tab to the
pane, end).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from oncall.model.checklist_events import EvidenceValue
from oncall.tui.app import OncallApp
from oncall.tui.chart import ChartView
from oncall.tui.chart_panel import AlertChart, EvidenceCharts
from tests.harness.waiting import until
from tests.tui.chart_fakes import FakeCharts
from tests.tui.fakes import (
    P99,
    FakeAlerts,
    FakeChecklists,
    FakeClock,
    Script,
    board_history,
    board_statuses,
    make_app,
    p99_events,
    result,
)
from tests.tui.snapshot_sizes import SIZES, Compare

KV = EvidenceValue("KV-cache usage (fullest pod)", 0.97, 0.9, "ratio", None, "facts.kv_cache_usage")


def chart_script() -> Script:
    """The P99 run, with the kv_cache step's evidence as the runbook gives it (vllm.rates)."""
    ev = p99_events()
    kv = result(
        "kv_cache",
        "KV cache not full, no preemptions",
        "fail",
        "KV cache 97% used, 14 waiting",
        probe="vllm.rates",
        evidence=(KV,),
        duration=0.61,
    )
    kv = type(kv)(**{**kv.__dict__, "params": {"window": "1m"}})
    names = ("planned", "deployment.started", "deployment.result", "kv_cache.started")
    return [*(ev[n] for n in names), kv]


def chart_app(clock: FakeClock) -> OncallApp:
    checklists = FakeChecklists({P99: chart_script()})
    return make_app(FakeAlerts(board_statuses(), board_history()), checklists, clock=clock)


def charts_of(app: OncallApp) -> FakeCharts:
    assert isinstance(app.chart_source, FakeCharts)
    return app.chart_source


def open_with_charts(step: str | None) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app = pilot.app
        assert isinstance(app, OncallApp)
        await until(pilot, lambda: app.board.selected_alert() == P99, "the board")
        await pilot.press("enter")
        await until(pilot, lambda: not app.book.runs[P99].running, "the end of the run")
        view = app.screen.query_one(AlertChart).view
        await until(pilot, lambda: view.data is not None, "the alert's chart")
        if step is not None:
            await pilot.press("down", "down", "down")  # gpu_memory → kv_cache
            evidence = app.screen.query_one(EvidenceCharts)
            await until(
                pilot,
                lambda: any(v.data is not None for v in evidence.query(ChartView)),
                "the evidence chart",
            )
            await pilot.press("tab")  # the steps table → the evidence pane
            assert app.focused is not None and app.focused.id == "evidence-pane", app.focused
            await pilot.press("end")
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_alert_chart(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = chart_app(FakeClock())
    assert snap_compare(app, terminal_size=size, run_before=open_with_charts(None))
    assert charts_of(app).alert_calls == [(P99, 3600.0)]  # repaints asked nothing more


@pytest.mark.parametrize("size", [*SIZES, pytest.param((100, 40), id="100x40")])
def test_evidence_chart(snap_compare: Compare, size: tuple[int, int]) -> None:
    app = chart_app(FakeClock())
    assert snap_compare(app, terminal_size=size, run_before=open_with_charts("kv_cache"))
    queries = [q for q, _ in charts_of(app).query_calls]
    assert queries == ["max(vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)"]


@pytest.mark.parametrize("size", SIZES)
def test_no_color(
    snap_compare: Compare, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = chart_app(FakeClock())
    assert app.no_color
    assert snap_compare(app, terminal_size=size, run_before=open_with_charts("kv_cache"))
