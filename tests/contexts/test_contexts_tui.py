"""The board across contexts, `:context NAME`, and the production confirm modal (fakes at the
service boundary; the two-stack module drives the same screens against real backends)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Static

from oncall.model.write_path import Cluster
from oncall.service.contexts import ContextAlerts, ContextChecklists
from oncall.settings import Settings
from oncall.tui.app import OncallApp
from oncall.tui.banner import ContextBanner
from tests.harness.waiting import until
from tests.tui.chart_fakes import FakeCharts
from tests.tui.fakes import (
    P99,
    FakeAlerts,
    FakeChecklists,
    FakeClock,
    board_statuses,
    p99_script,
    status,
)
from tests.tui.test_confirm import OK_GUARDS, FakeRemediations, seqs_preview, up

Compare = Callable[..., bool]

SETTINGS = Settings.model_validate({"contexts": {"eu": {}, "us": {"production": True}, "ap": {}}})


def us_statuses() -> list[Any]:
    """us: the same rules, P99 inactive, one other firing."""
    return [
        status("AIServiceUnavailable", "firing", value=0.05, firing_for=40),
        status(P99, "inactive"),
        status("LLMOutOfMemory", "inactive"),
    ]


class BrokenAlerts(FakeAlerts):
    async def refresh(self) -> list[Any]:
        raise RuntimeError("rule files unreadable")


def contexts_app() -> tuple[OncallApp, FakeChecklists]:
    eu_runs = FakeChecklists({P99: p99_script()})
    clock = FakeClock()
    app = OncallApp(
        SETTINGS,
        alerts_source={
            "eu": ContextAlerts("eu", FakeAlerts(board_statuses())),
            "us": ContextAlerts("us", FakeAlerts(us_statuses())),
            "ap": ContextAlerts("ap", BrokenAlerts()),
        },
        checklist_runner=ContextChecklists(
            {"eu": eu_runs, "us": FakeChecklists(), "ap": FakeChecklists()}
        ),
        clock=clock,
    )
    app.chart_source = FakeCharts(clock)
    return app, eu_runs


def settled(app: OncallApp) -> bool:
    run = app.book.runs.get(f"eu/{P99}")
    return bool(run and not run.running and "ap" in app.book.context_errors)


async def test_every_context_on_one_board_firing_first_with_its_context() -> None:
    app, eu_runs = contexts_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: settled(app), "every context refreshed")
        rows = app.board.rows()
        keys = [key for key, _ in rows]
        assert set(keys[:2]) == {f"eu/{P99}", "us/AIServiceUnavailable"}  # firing, both contexts
        context = {key: row[1] for key, row in rows}  # the Context column
        assert context[f"eu/{P99}"][0] == "eu"
        assert context["us/AIServiceUnavailable"] == ("us", "error", False)  # production
        # The checklist ran by itself with the eu runner, under the alert's own name.
        assert eu_runs.alerts == [P99]
        # A context whose refresh fails says so; the others' states stay.
        assert "ap: RuntimeError: rule files unreadable" in app.board.status_line()
        banner = str(app.board.query_one(ContextBanner).render())
        assert "all contexts: eu, us, ap" in banner and "PRODUCTION: us" in banner


async def test_context_name_shows_one_context_and_the_header_names_it() -> None:
    app, _ = contexts_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: settled(app), "every context refreshed")
        await app.run_command(":context us")
        assert {key.split("/")[0] for key, _ in app.board.rows()} == {"us"}
        banner = app.board.query_one(ContextBanner)
        assert "PRODUCTION" in str(banner.render()) and banner.has_class("production")
        await app.run_command(":context nowhere")  # said, nothing changes
        assert app.board.view == "us"
        await app.run_command(":context all")
        assert {key.split("/")[0] for key, _ in app.board.rows()} == {"eu", "us"}
        await pilot.press("colon")
        await pilot.pause()
        assert "context eu" in app.screen.suggestions  # type: ignore[attr-defined]


def test_snapshot_all_contexts_board(snap_compare: Compare) -> None:
    app, _ = contexts_app()

    async def run_before(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: settled(app), "every context refreshed")

    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)


def production_app() -> OncallApp:
    """Context us (production) selected; its plan stamped with us's cluster."""
    preview = seqs_preview(*OK_GUARDS)
    cluster = Cluster("us", "kind-us", "https://127.0.0.1:7443", production=True)
    plan = dataclasses.replace(preview.plan, cluster=cluster, confirm_word="us/vllm")
    clock = FakeClock()
    app = OncallApp(
        SETTINGS.for_context("us"),
        alerts_source=FakeAlerts(board_statuses()),
        checklist_runner=FakeChecklists({P99: p99_script()}),
        remediation_runner=FakeRemediations(dataclasses.replace(preview, plan=plan)),
        clock=clock,
    )
    app.chart_source = FakeCharts(clock)
    return app


def test_snapshot_production_context_confirm_modal(snap_compare: Compare) -> None:
    assert snap_compare(production_app(), terminal_size=(100, 30), run_before=up(*"us/v"))


@pytest.mark.parametrize("word", ["vllm", "us/vllm"])
async def test_production_needs_the_context_in_the_typed_word(word: str) -> None:
    app = production_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await up(*word)(pilot)
        screen = app.screen
        preview = str(screen.query_one("#confirm-preview", Static).render())
        assert "in context us (production) · kube context kind-us" in preview
        assert "us/vllm" in str(screen.query_one("#confirm-prompt", Static).render())
        assert screen.query_one("#yes", Button).disabled is (word != "us/vllm")


async def test_silence_on_a_context_row_matches_the_rule_name_not_the_board_key() -> None:
    """The board knows `us/AIServiceUnavailable`; Alertmanager knows `AIServiceUnavailable`:
    `s` pre-fills the rule's own name (the context goes with the runner, not the matcher)."""
    from textual.widgets import DataTable, Input

    from oncall.tui.silence import SilenceScreen

    app, _ = contexts_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: settled(app), "every context refreshed")
        table = app.board.query_one("#alerts", DataTable)
        keys = [key for key, _ in app.board.rows()]
        table.move_cursor(row=keys.index("us/AIServiceUnavailable"))
        await pilot.pause()
        assert app.board.selected_alert() == "us/AIServiceUnavailable"
        # No single instance to pre-fill from: the matchers come from the rule itself.
        key = "us/AIServiceUnavailable"
        app.book.statuses[key] = dataclasses.replace(app.book.statuses[key], instances=())
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SilenceScreen), "the silence modal")
        matchers = app.screen.query_one("#silence-matchers", Input).value
        assert 'alertname="AIServiceUnavailable"' in matchers, matchers
        assert "us/" not in matchers, matchers
