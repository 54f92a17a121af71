"""Issue 30, acceptance 1: the drill's real Alertmanager → the drill's real `oncall serve`.

Inject kv-cache-pressure: the verdict of LLMHighP99Latency is stored within (slowest step +
1 s) of serve receiving Alertmanager's notification (serve's own timestamps, and its
/metrics), with `kv_cache` failing; the chat sink got one message for that firing naming the
failing step. Then `drill clear`: the app opened afterwards shows the at-firing verdict (board
and incident screen: then / now) beside a live run where `kv_cache` passes.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.widgets import DataTable

from oncall.backends.prometheus import PrometheusClient
from oncall.service.verdicts import VerdictReader
from oncall.settings import Settings
from oncall.tui.app import OncallApp
from oncall.tui.incident import IncidentScreen
from oncall.tui.messages import OpenIncident
from oncall_drill.always_on import NOTIFICATIONS
from oncall_drill.notify_sink import read_messages
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import app_settings
from tests.harness.pilot import static_text
from tests.harness.waiting import eventually, until, wait_until

ALERT = "LLMHighP99Latency"


def _verdicts(settings: Settings) -> list[dict[str, Any]]:
    """The stored verdicts of ALERT, read with a reader of its own (in the caller's thread)."""

    async def read() -> list[dict[str, Any]]:
        reader = VerdictReader.from_settings(settings)
        try:
            return await reader.list(alert=ALERT)
        finally:
            await reader.aclose()

    return asyncio.run(read())


async def _quiet(prom: PrometheusClient) -> bool:
    """Prometheus holds ALERT neither pending nor firing: an injection now starts a new firing.

    An earlier test's firing of the same alert (the scenarios, the vLLM pack) may still be on
    when this test starts; Alertmanager sends no new notification for a firing it already has,
    so the test would wait for a verdict that never comes."""
    return not await prom.query(f'ALERTS{{alertname="{ALERT}"}}')


# The chain it waits on (scrapes, `for`, Alertmanager's group wait, the checklist, a live run in
# the app) takes ~40 s on an idle machine and more than the default 120 s on a loaded CI runner.
@pytest.mark.timeout(360)
async def test_the_verdict_at_firing_through_the_real_alertmanager(
    drill: Drill, tmp_path: Path
) -> None:
    settings = app_settings(drill, tmp_path / "audit.jsonl")
    serve_url = f"http://127.0.0.1:{drill.state['ports']['serve']}"
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:
        await eventually(lambda: _quiet(prom), within=90, what=f"no {ALERT} before the injection")
    injected = time.time()
    await asyncio.to_thread(drill.cli, "inject", "kv-cache-pressure")
    found: list[dict[str, Any]] = []

    def stored() -> bool:
        fresh = [v for v in _verdicts(settings) if v["ran_at"] >= injected]
        found[:] = fresh
        return bool(fresh)

    try:
        await asyncio.to_thread(wait_until, stored, within=120, what="the verdict of " + ALERT)
        verdict = found[-1]  # the first firing after the injection
        steps = {s["id"]: s for s in verdict["steps"]}
        assert steps["kv_cache"]["status"] == "fail", steps["kv_cache"]
        slowest = max(s["duration_s"] for s in verdict["steps"])
        assert verdict["stored_at"] - verdict["received_at"] <= slowest + 1.0
        answer = await asyncio.to_thread(httpx.get, f"{serve_url}/metrics", timeout=5)
        metrics = answer.text
        assert "oncall_serve_receive_to_stored_seconds_count" in metrics
        # One message for this firing in the chat sink, naming the failing step.
        head = f"{ALERT} fired at {verdict['starts_at']}"

        def messages() -> list[str]:
            sink = read_messages(drill.directory / NOTIFICATIONS)
            texts = [str(m["body"]["text"]) for m in sink]  # type: ignore[index]
            return [t for t in texts if t.startswith(head)]

        await asyncio.to_thread(wait_until, lambda: bool(messages()), within=30, what="the chat")
        [text] = messages()
        assert "kv_cache" in text
    finally:
        await asyncio.to_thread(drill.cli, "clear")

    # Opened after the clear: the verdict at firing beside a live run where kv_cache passes.
    app = OncallApp(settings)
    async with app.run_test(size=(140, 45)) as pilot:

        def then_and_now() -> bool:
            run = app.book.runs.get(ALERT)
            if ALERT not in app.book.at_firing or run is None or run.running:
                return False
            live = {r.id: r.status for r in run.ordered_results()}
            if live.get("kv_cache") != "ok":
                app.start_checklist(ALERT)  # the cache drains in seconds: run it again
                return False
            return True

        await until(
            pilot,
            then_and_now,
            "the at-firing verdict and a live run that passes",
            within=120,
            interval=1.0,
        )
        then = app.book.at_firing[ALERT]
        assert {s["id"]: s["status"] for s in then["steps"]}["kv_cache"] == "fail"
        app.post_message(OpenIncident(ALERT))  # what enter on its row sends
        await until(
            pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident screen", within=90
        )
        meta = static_text(app, "#incident-meta")
        assert "then (at firing" in meta and "now:" in meta
        # The kv_cache step's evidence: now (passing) and at firing (failing), both shown.
        table = app.screen.query_one("#steps", DataTable)
        await until(pilot, lambda: "kv_cache" in table.rows, "the steps", within=90)
        table.move_cursor(row=table.get_row_index("kv_cache"))
        await until(
            pilot,
            lambda: "at firing: ✗ fail" in static_text(app, "#evidence"),
            "the at-firing evidence",
            within=90,
        )
