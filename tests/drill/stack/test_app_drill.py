"""The app against the drill, as an on-call engineer uses it (issue 7's walk-through).

A scenario trips AIServiceUnavailable → the board shows it firing with its checklist findings
before anyone opens it → open it → the checklist has the failing step → pick the proposal →
the modal shows the dry run → type the target's name → verification completes → `:audit`
shows the records. Real clients, real backends; only the terminal is Textual's headless one.
The board's state is polled (bounded): a refresh happens every `alerts.refresh`.
"""

from __future__ import annotations

from pathlib import Path

import redis
from textual.widgets import Input

from oncall.tui.audit_screen import AuditScreen
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.format import SPARK_LEVELS
from oncall.tui.incident import IncidentScreen
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import app_on_faults, app_settings, records
from tests.harness.pilot import static_text
from tests.harness.waiting import until

ALERT = "AIServiceUnavailable"


async def test_from_a_tripped_alert_to_a_verified_remediation(drill: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    settings = app_settings(drill, audit)
    key = settings.degradation.redis_key
    try:
        async with app_on_faults(drill, settings, "gateway-unavailable") as (app, pilot):
            # Firing, and its checklist ran by itself: findings on the board, nobody opened it.
            def findings_on_board() -> bool:
                status = app.book.statuses.get(ALERT)
                run = app.book.runs.get(ALERT)
                return bool(status and status.state == "firing" and run and not run.running
                            and "fail" in run.findings())  # fmt: skip

            await until(pilot, findings_on_board, "the alert firing with its findings", within=90)
            assert app.book.ordered()[0].rule.name == ALERT  # firing first
            # The last hour from Prometheus' range queries: a sparkline and the threshold.
            sparkline = lambda: app.board.history_of(ALERT, app.clock())  # noqa: E731
            await until(pilot, lambda: bool(sparkline()), "the sparkline", within=90)
            keys = [key for key, _ in app.board.columns]  # the drill has an Alertmanager column
            cell = lambda key: dict(zip(keys, app.board.rows()[0][1], strict=True))[key][0]  # noqa: E731
            # Held by the drill's Alertmanager once Prometheus has sent it (every 2 s).
            await until(
                pilot,
                lambda: cell("routing") == "1 active",
                "Alertmanager to hold it",
                within=90,
                seen=lambda: (cell("routing"), app.board.rows()[0]),
            )
            cells = dict(zip(keys, app.board.rows()[0][1], strict=True))
            assert cells["value"][0].endswith("> 1%")  # the ratio in the unit its rule compares in
            assert set(cells["history"][0]) <= set(SPARK_LEVELS + " ")
            # The cursor stays on the alert it was on; the firing one is now the top row.
            await pilot.press(*["up"] * len(app.book.statuses))
            assert app.board.selected_alert() == ALERT
            await pilot.press("enter")
            await until(
                pilot,
                lambda: isinstance(app.screen, IncidentScreen),
                "the incident screen",
                within=90,
            )
            run = app.book.runs[ALERT]
            statuses = {s.id: s.status for s in run.ordered_results()}
            assert statuses["unavailable_ratio"] == "fail"
            assert statuses["still_undegraded"] == "fail"
            await until(
                pilot,
                lambda: "degrade" in static_text(app, "#proposals"),
                "the proposal",
                within=90,
            )
            incident = app.screen
            assert isinstance(incident, IncidentScreen)
            number = 1 + [p.id for p in incident.proposals()].index("degrade")
            await pilot.press(str(number))
            await until(
                pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm modal", within=90
            )
            preview = static_text(app, "#confirm-preview")
            assert "dry run" in preview and "level 0" in preview and "level 1" in preview
            words = app.screen.query("#confirm-word")
            if words:  # a dangerous action: the target's name, typed, then enter
                words.first(Input).value = key
                await pilot.pause()
                await pilot.press("enter")
            else:  # level 1 is not dangerous: Yes is enough
                await pilot.press("y")
            await until(
                pilot,
                lambda: "verified" in static_text(app, "#confirm-progress"),
                "verification",
                within=60,
            )
            await pilot.press("escape")  # any key closes the finished modal
            await until(
                pilot,
                lambda: isinstance(app.screen, IncidentScreen),
                "back on the incident",
                within=90,
            )
            await pilot.press("escape")
            await pilot.press("colon")
            await pilot.pause()
            await pilot.press(*"audit", "enter")
            await until(
                pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen", within=90
            )
            screen = app.screen
            assert isinstance(screen, AuditScreen)
            await until(pilot, lambda: screen.loaded, "the audit records and chain", within=90)
            assert screen.page is not None
            shown = [(row.transition, row.action) for row in screen.page.rows]
            assert ("verified", "set-degradation-level") in shown
            assert screen.chain is not None and screen.chain.ok and not screen.chain.incomplete
            assert "chain intact" in static_text(app, "#audit-chain")
    finally:
        url = drill.state["urls"]["redis"]
        with redis.Redis.from_url(url, decode_responses=True) as client:
            client.set(key, "0")
    transitions = [r["transition"] for r in records(audit)]
    assert transitions == ["proposed", "approved", "started", "succeeded", "verified"]
    assert records(audit)[0]["alert"]["name"] == ALERT
