"""Every backend hung (loopback listeners that accept and never answer), real clients: the app
keeps answering keys, alerts show as unknown with the reason, and the incident's steps show as
running with their age until their timeouts make them unknown."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import yaml
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable

from oncall.settings.loader import load_settings
from oncall.tui.app import OncallApp
from oncall.tui.audit_screen import AuditScreen
from oncall.tui.board import BoardScreen
from oncall.tui.help import HelpScreen
from oncall.tui.incident import IncidentScreen
from tests.harness.faults import silent_listener
from tests.harness.waiting import until

ALERT = "LLMHighP99Latency"


@contextlib.contextmanager
def hung_settings(tmp_path: Path) -> Iterator[Path]:
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(silent_listener())
        url = f"http://127.0.0.1:{port}"
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "hung",
            "clusters": [{"name": "hung", "cluster": {"server": url}}],
            "users": [{"name": "hung", "user": {"token": "t"}}],
            "contexts": [{"name": "hung", "context": {"cluster": "hung", "user": "hung"}}],
        }))  # fmt: skip
        config = tmp_path / "oncall.yaml"
        config.write_text(yaml.safe_dump({
            "prometheus": {"url": url, "timeout": "1s"},
            "kubernetes": {"kubeconfig": str(kubeconfig), "namespace": "ai", "timeout": "20s"},
            "redis": {"url": f"redis://127.0.0.1:{port}/0", "timeout": "20s"},
            "vllm": {"urls": [url], "timeout": "20s"},
            "gpu": {"source": "dcgm"},
            "alerts": {"refresh": "1s"},
            "audit": {"path": str(tmp_path / "audit.jsonl")},
        }))  # fmt: skip
        yield config


async def answered(pilot: Pilot[None], app: OncallApp, key: str, screen: type) -> bool:
    """Press key; true once the screen it leads to is on top. The bound (5 s) only tells a
    key that waits on a hung probe (20 s timeouts) from one answered at once: how fast keys
    are answered is measured by scripts/bench/tui.py, not asserted here."""
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, screen), f"{key} answered", within=5)
    return True


async def test_every_backend_hung_navigation_works_and_steps_show_their_age(
    tmp_path: Path,
) -> None:
    with hung_settings(tmp_path) as config:
        settings = load_settings(config=config).settings
        app = OncallApp(settings)
        async with app.run_test(size=(100, 30)) as pilot:
            # Prometheus never answers: after its 1 s timeout every alert is unknown, with why.
            await until(
                pilot,
                lambda: (
                    bool(app.book.statuses)
                    and all(s.state == "unknown" for s in app.book.statuses.values())
                ),
                "the alerts unknown",
                within=30,
            )
            assert "timeout" in (app.book.statuses[ALERT].error or "")
            assert await answered(pilot, app, "question_mark", HelpScreen)
            assert await answered(pilot, app, "escape", BoardScreen)
            await until(
                pilot,
                lambda: app.board.selected_alert() == ALERT,
                "the cursor on the alert",
                within=30,
            )
            await pilot.press("enter")  # no checklist ran (nothing fires): opening starts it
            await until(
                pilot, lambda: isinstance(app.screen, IncidentScreen), "the incident", within=30
            )
            screen = app.screen
            assert isinstance(screen, IncidentScreen)

            def running_ages() -> list[str]:
                table: DataTable[Text] = screen.query_one("#steps", DataTable)
                cells = [[c.plain for c in table.get_row_at(i)] for i in range(table.row_count)]
                return [c for row in cells for c in row if c.startswith("running ")]

            def aged() -> bool:
                return any(a.endswith(("2s", "3s", "4s")) for a in running_ages())

            await until(pilot, aged, "steps running with an age of 2 s or more", within=30)
            # Keys are still answered while every probe hangs.
            assert await answered(pilot, app, "escape", BoardScreen)
            await pilot.press("colon")
            await pilot.press(*"audit", "enter")
            await until(
                pilot, lambda: isinstance(app.screen, AuditScreen), "the audit screen", within=5
            )
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, BoardScreen), "the board", within=5)
            # Then each step's own timeout (the probe's, 5 s for kube: not the 20 s client
            # timeout) ends it as unknown, naming its backend; nothing hangs past that.
            run = app.book.runs[ALERT]
            await until(
                pilot, lambda: not run.running, "the run ended by its steps' timeouts", within=30
            )
            ran = [r for r in run.results.values() if r.status != "skipped"]
            assert {r.probe for r in ran} >= {"kube.pods", "kube.deployment"}
            assert [(r.id, r.status) for r in ran if r.status != "unknown"] == []
            kube = [r for r in ran if r.probe.startswith("kube.")]
            assert all("no answer within" in (r.reason or "") for r in kube), kube
            await pilot.press("q")
