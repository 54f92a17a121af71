"""The revert watch on the screen: its lines arrive after the result (the service hands the watch
to a task), in the modal while it is open, as a notification once it is closed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from oncall.model.write_path import Confirm, Progress, RemediationResult
from oncall.service.remediation import REVERT_WATCH, RemediationRequest
from tests.harness.waiting import until
from tests.tui.test_confirm import (
    OK_GUARDS,
    FakeRemediations,
    make_app,
    modal,
    open_modal,
    seqs_preview,
    text,
)

WATCHING = REVERT_WATCH + "watching ai/vllm for a revert by VLLMRuntime ai/vllm for 5m"
REVERTED = REVERT_WATCH + "REVERTED: /spec/template/spec/containers/0/args/3: '64' -> '256'"


@dataclass
class WatchingRemediations(FakeRemediations):
    """Verified, then (as `hand_off_revert_watch` does) the watch's lines later, each after
    its gate opens."""

    gates: list[asyncio.Event] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def run(
        self, request: RemediationRequest, confirm: Confirm, progress: Progress
    ) -> RemediationResult:
        result = await super().run(request, confirm, progress)

        async def later() -> None:
            for gate, line in zip(self.gates, (WATCHING, REVERTED), strict=True):
                await gate.wait()
                progress(line)

        self.tasks.append(asyncio.ensure_future(later()))
        return result


async def test_the_revert_shows_in_the_modal_then_as_a_notification_once_it_closed() -> None:
    gates = [asyncio.Event(), asyncio.Event()]
    runner = WatchingRemediations(seqs_preview(*OK_GUARDS), gates=gates)
    app = make_app(runner)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_modal(pilot)
        await pilot.press("v", "l", "l", "m", "enter")
        await until(pilot, lambda: modal(app).phase == "done", "the result, before any watch line")
        gates[0].set()
        await until(pilot, lambda: "watching ai/vllm" in text(screen, "#confirm-progress"), "line")
        await pilot.press("x")
        await until(pilot, lambda: app.screen is not screen, "the modal closed")
        gates[1].set()

        def notified() -> bool:
            return any("REVERTED" in n.message for n in app._notifications)

        await until(pilot, notified, "the revert as a notification")
        (shown,) = [n for n in app._notifications if "REVERTED" in n.message]
        assert shown.severity == "error"
        assert "'64' -> '256'" in shown.message
