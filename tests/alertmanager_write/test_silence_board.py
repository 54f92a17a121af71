"""Acceptance 5 of issue 14, from the board (a Pilot test): a real Prometheus evaluating rules
and sending to the real Alertmanager, the real Redis, the drill's Kubernetes API.

`s` on a firing alert opens the silence modal; its preview lists the alerts Alertmanager would
silence; Yes creates the silence with the operator (SelfSubjectReview's user) as `createdBy`;
the board shows the instance silenced; an acknowledgement made by another process (`oncall
ack` on a terminal) shows on this board; `oncall silence expire ID` ends the silence; every
step is in the audit log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import yaml
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from oncall.settings.loader import load_settings
from oncall.tui.app import OncallApp
from oncall.tui.confirm import ConfirmScreen
from oncall.tui.silence import SilenceScreen
from tests.alertmanager.conftest import Routed
from tests.alertmanager_write.conftest import OPERATOR, World
from tests.harness.terminal import run_on_terminal
from tests.harness.waiting import until

ALERT = "AmP99High"


def _config(world: World, routed: Routed) -> Path:
    config = yaml.safe_load(world.config.read_text())
    config.update({"prometheus": {"url": routed.prometheus.url},
                   "alerts": {"packs": [], "refresh": "1s"}})  # fmt: skip
    world.config.write_text(yaml.safe_dump(config))
    return world.config


def _transitions(world: World, action: str) -> list[str]:
    return [r["transition"] for r in world.records() if r["action"] == action]


async def slowly(pilot: Pilot[None], predicate: Callable[[], bool], what: str) -> None:
    """`until`, with time for the first action's imports (the executor, the Kubernetes
    client: seconds on a loaded machine) and its round trips to three servers."""
    await until(pilot, predicate, what, within=SLOW_S, interval=0.05)


SLOW_S = 90.0
LIFECYCLE = ["proposed", "approved", "started", "succeeded", "verified"]


async def test_silence_and_ack_from_the_board(world: World, routed: Routed) -> None:
    world.case = routed.label  # World.silences() picks this test's by the rules' label
    settings = load_settings(config=_config(world, routed)).settings
    app = OncallApp(settings)
    async with app.run_test(size=(120, 30)) as pilot:

        def cell() -> str:
            keys = [key for key, _ in app.board.columns]
            rows = dict(app.board.rows())
            return rows[ALERT][keys.index("routing")][0] if ALERT in rows else ""

        await until(pilot, lambda: cell() == "2 active", "both instances active")
        table = app.board.query_one("#alerts", DataTable)
        table.move_cursor(row=[k for k, _ in app.board.rows()].index(ALERT))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SilenceScreen), "the silence modal")
        form = app.screen
        matchers = form.query_one("#silence-matchers", Input)
        assert matchers.value == (
            f'{{alertname="{ALERT}", namespace="ai", severity="page", test="{routed.label}"}}'
        )  # two instances fire: the whole alert, from the rule's labels
        matchers.value = matchers.value[:-1] + ', model="qwen"}'  # one instance of the two
        await pilot.press(*"qwen fix")
        await pilot.press("enter")
        await slowly(
            pilot,
            lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")),
            "the preview",
        )
        modal = app.screen
        assert isinstance(modal, ConfirmScreen)
        preview = str(modal.query_one("#confirm-preview", Static).render())
        assert "1 alert match now" in preview
        assert f'matches {{alertname="{ALERT}", model="qwen"' in preview
        assert "llama" not in preview
        assert f"by {OPERATOR}: qwen fix" in preview
        await pilot.press("y")
        await slowly(pilot, lambda: modal.result is not None, "the silence's result")
        assert modal.result is not None and modal.result.status == "verified", modal.result
        [made] = [s for s in world.silences() if s["status"]["state"] == "active"]
        assert (made["createdBy"], made["comment"]) == (OPERATOR, "qwen fix")
        await pilot.press("escape")
        await until(pilot, lambda: cell() == "1 silenced, 1 active", "the instance silenced")

        acked = await asyncio.to_thread(
            run_on_terminal, world.args("ack", ALERT, "--note", "on it"), [("to confirm", "yes")]
        )
        assert acked.code == 0, acked.output
        await until(pilot, lambda: cell().startswith(f"ack {OPERATOR} · "), "the ack shown")

        expired = await asyncio.to_thread(
            run_on_terminal, world.args("silence", "expire", made["id"]), [("to confirm", "yes")]
        )
        assert expired.code == 0, expired.output
        await until(pilot, lambda: cell() == f"ack {OPERATOR} · 2 active", "the silence ended")

    assert _transitions(world, "silence") == LIFECYCLE
    assert _transitions(world, "acknowledge") == LIFECYCLE
    assert _transitions(world, "silence-expire") == LIFECYCLE
    silenced = next(r for r in world.records() if r["transition"] == "succeeded")
    assert silenced["outcome"]["silence_id"] == made["id"]
    assert silenced["actor"]["kube_user"] == OPERATOR
