"""Warnings beside Prometheus' answers (Thanos with a store down: the states may be partial)
are on the board's status line, as `oncall alerts` prints them as notes: each context's first,
with how many more, masked like every text the app shows, and gone once an answer has none."""

from __future__ import annotations

from oncall.tui.app import OncallApp
from oncall.tui.state import AlertBook
from tests.harness.pilot import static_text
from tests.harness.waiting import until
from tests.tui.fakes import P99, FakeAlerts, make_app, status

STORE_DOWN = 'partial response: store "eu-2" did not answer: context deadline exceeded'


def status_line(app: OncallApp) -> str:
    return static_text(app, "#board-status")


async def test_the_status_line_says_what_prometheus_warned_of_until_it_stops() -> None:
    alerts = FakeAlerts([status(P99, "firing", value=2.0)])
    alerts.warned = (STORE_DOWN, "another store timed out")
    app = make_app(alerts)
    async with app.run_test() as pilot:
        await until(pilot, lambda: "prometheus warns" in status_line(app), "the warning")
        line = status_line(app)
        assert f"prometheus warns: {STORE_DOWN} (+1 more)" in line
        assert line.startswith("1 alerts · 1 firing")  # the states are shown all the same
        alerts.warned = ()
        before = alerts.calls
        app.refresh_alerts_now()
        await until(pilot, lambda: alerts.calls > before, "a refresh")
        await until(pilot, lambda: "prometheus warns" not in status_line(app), "no warning")


async def test_a_credential_a_warning_echoes_is_masked_on_the_screen() -> None:
    """A hostile or careless proxy may put the request's Authorization header in its words."""
    alerts = FakeAlerts([status(P99, "inactive")])
    alerts.warned = ("upstream said: Authorization: Bearer s3cr3t-t0ken-value refused",)
    app = make_app(alerts)
    async with app.run_test() as pilot:
        await until(pilot, lambda: "prometheus warns" in status_line(app), "the warning")
        line = status_line(app)
        assert "s3cr3t-t0ken-value" not in line
        assert "********" in line


def test_each_contexts_warnings_are_its_own() -> None:
    book = AlertBook()
    book.warned(("eu store down",), context="eu")
    book.warned(("us store down", "us slow"), context="us")
    assert book.warning_line() == "prometheus warns: eu: eu store down; us: us store down (+1 more)"
    book.warned((), context="eu")  # eu's next answer had none: only us is left
    assert book.warning_line() == "prometheus warns: us: us store down (+1 more)"
    book.warned((), context="us")
    assert book.warning_line() is None
    book.warned(("one context",))
    assert book.warning_line() == "prometheus warns: one context"
