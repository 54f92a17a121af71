"""`:incidents` and an incident's timeline, driven with Pilot against a real redis-server and
Prometheus (the app's own `IncidentView`) and a real audit log, then with the log tampered."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import redis
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from oncall.settings import Settings
from oncall.tui.app import OncallApp
from oncall.tui.incidents_screen import IncidentsScreen
from oncall.tui.timeline_screen import TimelineScreen
from tests.harness.servers import RunningServer
from tests.harness.waiting import until
from tests.incidents.inputs import incident, write_log
from tests.incidents.test_incident_cli import put
from tests.tui.fakes import FakeAlerts, FakeChecklists, FakeClock, board_statuses


def rows(screen: Any, table_id: str) -> list[list[str]]:
    table: DataTable[Text] = screen.query_one(table_id, DataTable)
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def open_timeline(pilot: Pilot[Any]) -> TimelineScreen:
    app = pilot.app
    await pilot.press("colon", *"incidents", "enter")
    await until(pilot, lambda: isinstance(app.screen, IncidentsScreen), "the incidents screen")
    listing = app.screen
    assert isinstance(listing, IncidentsScreen)
    await until(pilot, lambda: bool(rows(listing, "#incidents-list")), "the incident listed")
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, TimelineScreen), "the timeline")
    screen = app.screen
    assert isinstance(screen, TimelineScreen)
    await until(pilot, lambda: screen.draft is not None or screen.error is not None,
                "the timeline read", within=30)  # fmt: skip
    return screen


async def test_incidents_then_the_timeline_and_a_tampered_record(
    tmp_path: Path, redis_srv: RunningServer, prometheus_srv: RunningServer
) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    one = incident(time.time())
    await asyncio.to_thread(put, redis_srv.url, one)
    log = write_log(tmp_path / "audit.jsonl", one.id)
    settings = Settings.model_validate({
        "redis": {"url": redis_srv.url}, "prometheus": {"url": prometheus_srv.url},
        "audit": {"path": str(log.path), "redis_stream": None},
    })  # fmt: skip
    app = OncallApp(settings, alerts_source=FakeAlerts(board_statuses()),
                    checklist_runner=FakeChecklists(), clock=FakeClock())  # fmt: skip
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_timeline(pilot)
        events = rows(screen, "#timeline-events")
        texts = [row[2] for row in events]
        assert any("set-max-num-seqs Deployment ai/vllm: verified" in t for t in texts), texts
        note = next(row for row in events if row[1] == "note")
        record = next(r for r in log.records() if r["action"] == "incident-note")
        assert note[3] == record["id"]  # the record id beside the line
        chain = str(screen.query_one("#timeline-chain", Static).render())
        assert "local audit chain intact" in chain
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, IncidentsScreen), "back to the list")

        lines = log.path.read_text().splitlines()
        edited = json.loads(lines[5])
        edited["detail"]["text"] = "nothing happened"
        lines[5] = json.dumps(edited)
        log.path.write_text("\n".join(lines) + "\n")
        await pilot.press("escape")
        screen = await open_timeline(pilot)
        note = next(row for row in rows(screen, "#timeline-events") if row[1] == "note")
        assert note[2] == "note: nothing happened" and note[3] == f"{record['id']} ⚠"
        chain = str(screen.query_one("#timeline-chain", Static).render())
        assert "FAILED verification" in chain
