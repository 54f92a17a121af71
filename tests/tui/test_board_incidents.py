"""The board's incident rows, with the team's incidents in a real redis-server: one row with
the count and the shared cause, `space`/`enter` expand it to its alerts, the filter and the
alert keys still reach every alert."""

from __future__ import annotations

import time

import redis
from rich.text import Text
from textual.widgets import DataTable

from oncall.backends.incidents import IncidentStore
from oncall.backends.redis import RedisClient
from oncall.model.incidents import Cause, Incident, Member, incident_id
from oncall.tui.app import OncallApp
from tests.harness.servers import RunningServer
from tests.harness.waiting import until
from tests.tui.fakes import P99, FakeAlerts, board_statuses, make_app

WHY = "grouped: kv_cache fails on Deployment ai/vllm in 2 of 2 checklists"


def rows(app: OncallApp) -> list[list[str]]:
    table: DataTable[Text] = app.board.query_one("#alerts", DataTable)
    return [[cell.plain for cell in table.get_row_at(i)] for i in range(table.row_count)]


async def seeded(url: str) -> Incident:
    """The incident another app (or serve) stored: P99 and AIServiceUnavailable, one cause."""
    now = time.time()
    first = Member("", P99, {}, now - 100)  # labels without alertname, as the app's
    other = Member("", "AIServiceUnavailable", {}, now - 90)
    incident = Incident(
        incident_id(first), now - 100, (first, other),
        Cause("kv_cache", "Deployment ai/vllm", 2, 2), WHY,
    )  # fmt: skip
    store = IncidentStore(RedisClient(url, timeout=2))
    try:
        await store.put(incident)
    finally:
        await store.aclose()
    return incident


async def test_an_incident_is_one_row_that_expands_to_its_alerts(
    redis_srv: RunningServer,
) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    incident = await seeded(redis_srv.url)
    app = make_app(FakeAlerts(board_statuses()), redis={"url": redis_srv.url})
    async with app.run_test(size=(140, 30)) as pilot:
        await until(pilot, lambda: any(WHY in r for r in rows(app)), "the incident row")
        shown = rows(app)
        assert [r[1] for r in shown[:1]] == ["▸ 2 alerts · 2 rules"]
        assert shown[0][0] == "● firing" and shown[0][3] == WHY
        assert shown[0][-1] == f"incident {incident.id}"
        names = [r[1] for r in shown]
        assert P99 not in names and "AIServiceUnavailable" not in names  # folded
        assert "VectorSearchP999High" in names  # the others as before
        # The alert keys act on alerts, not on the incident row.
        await pilot.press("s")
        assert app.screen is app.board
        await pilot.press("space")
        await until(pilot, lambda: len(rows(app)) == len(shown) + 2, "the incident expanded")
        expanded = [r[1] for r in rows(app)]
        assert expanded[:3] == ["▾ 2 alerts · 2 rules", f"  └ {P99}", "  └ AIServiceUnavailable"]
        await pilot.press("enter")  # on the incident row: folds it again
        await until(pilot, lambda: len(rows(app)) == len(shown), "the incident folded")
        # The filter reaches a grouped alert: shown under its incident row.
        await pilot.press("slash", *"AIServiceUnavailable", "enter")
        await until(
            pilot, lambda: [r[1] for r in rows(app)][1:] == ["  └ AIServiceUnavailable"],
            "the filtered alert under its incident",
        )  # fmt: skip
