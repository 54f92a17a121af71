"""The incident screen's chart against the drill (issue 17): `kv-cache-pressure` trips
LLMHighP99Latency → open it → the chart shows the P99 crossing its threshold, with the
firing period from Prometheus' ALERTS → confirm the proposed `set-max-num-seqs` → after
verification the chart follows: the audit's action is a marker on it and new points come in.
Real clients, real Prometheus and audit log; only the terminal is Textual's headless one.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

from textual.widgets import Input

from oncall.backends.prometheus import PrometheusClient
from oncall.service.alerts import load_packs
from oncall.service.charts import value_expr
from oncall.tui.app import OncallApp
from oncall.tui.chart_panel import AlertChart
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.incident import IncidentScreen
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import app_settings, drill_settings, records, remediate
from tests.harness.pilot import static_text, until
from tests.harness.processes import eventually

ALERT = "LLMHighP99Latency"


async def healthy_history(drill: Drill) -> bool:
    """Four 15 s points of the P99 under its threshold: the picture has a 'before'."""
    rule = next(r for r in load_packs(drill_settings(drill)).rules if r.name == ALERT)
    now = time.time()
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:
        series = await prom.query_range(value_expr(rule), start=now - 120, end=now, step=15)
    points = [v for s in series for _, v in s.points if math.isfinite(v)]
    return len(points) >= 4 and max(points) <= 1.2


async def test_the_chart_shows_the_crossing_and_follows_the_remediation(
    drill: Drill, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    settings = app_settings(drill, audit)
    await eventually(
        lambda: healthy_history(drill), within=90, what="a minute of healthy P99 in Prometheus"
    )
    app = OncallApp(settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await asyncio.to_thread(drill.cli, "inject", "kv-cache-pressure")
        try:

            def firing() -> bool:
                status = app.book.statuses.get(ALERT)
                return bool(status and status.state == "firing")

            await until(pilot, "the alert firing", firing)
            app.open_incident(ALERT)
            await until(pilot, "the incident", lambda: isinstance(app.screen, IncidentScreen))
            await until(pilot, "the chart widget", lambda: bool(app.screen.query(AlertChart)))
            chart = app.screen.query_one(AlertChart)
            await until(pilot, "the chart", lambda: chart.view.data is not None)
            await pilot.press("left_square_bracket")  # zoom in: 15m, a point every 15 s
            await until(
                pilot,
                "the 15m chart",
                lambda: (
                    chart.requests == 2
                    and chart.view.data is not None
                    and chart.view.data.end - chart.view.data.start == 900
                ),
            )
            data = chart.view.data
            assert data is not None and data.error is None, data
            assert data.threshold == (">", 1.2)
            values = [v for _, v in data.points]
            # The crossing: under the threshold before the fault, over it after.
            assert min(values) <= 1.2 < max(values), values
            assert any(state == "firing" for *_, state in data.periods), data.periods
            assert chart.requests == 2  # opening, one zoom
            # The remediation the kv_cache step proposes: halve --max-num-seqs.
            incident = app.screen
            assert isinstance(incident, IncidentScreen)

            def proposed() -> bool:
                return "lower-max-num-seqs-kv" in [p.id for p in incident.proposals()]

            # The checklist re-runs (auto-run) until its kv_cache step fails and proposes it.
            await until(pilot, "the kv_cache step's proposal", proposed, within=90)
            ids = [p.id for p in incident.proposals()]
            await pilot.press(str(1 + ids.index("lower-max-num-seqs-kv")))
            await until(pilot, "the confirm modal", lambda: isinstance(app.screen, ConfirmScreen))
            words = app.screen.query("#confirm-word")
            if words:  # dangerous: the target's name, typed
                words.first(Input).value = "vllm"
                await pilot.pause()
                await pilot.press("enter")
            else:
                await pilot.press("y")
            await until(
                pilot,
                "verification",
                lambda: "verified" in static_text(app, "#confirm-progress"),
                within=90,
            )
            verified_at = time.time()
            await pilot.press("escape")
            await until(pilot, "the incident", lambda: isinstance(app.screen, IncidentScreen))
            # The chart follows: refreshed at once with the action's marker on it, then again.
            await until(
                pilot, "the marker", lambda: bool(chart.view.data and chart.view.data.markers)
            )
            marked = chart.view.data
            assert marked is not None
            assert [m.label for m in marked.markers] == ["set-max-num-seqs verified"]
            assert "following the remediation" in chart.note()
            first_end = marked.end
            await until(
                pilot,
                "a follow refresh with newer points",
                lambda: bool(chart.view.data and chart.view.data.end > first_end + 10),
                within=40,
            )
            after = chart.view.data
            assert after is not None
            later = [v for ts, v in after.points if ts >= verified_at - 15]
            assert later, "no point after the remediation"
            print(f"P99 after the remediation: {[round(v, 3) for v in later]}")
        finally:
            await asyncio.to_thread(drill.cli, "clear")
            # `clear` leaves the Deployment as the remediation made it: put --max-num-seqs
            # back, so the drill tests after this one (one shared drill) start from 256.
            back = await asyncio.to_thread(
                remediate, drill, tmp_path / "restore-audit.jsonl", "set-max-num-seqs", "vllm",
                "256", answers=[("to confirm", "vllm")],
            )  # fmt: skip
            assert back.code == 0, back.output
    transitions = [r["transition"] for r in records(audit)]
    assert transitions[-1] == "verified"
