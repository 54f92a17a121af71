"""Waiting on a Textual app under a Pilot, for tests that drive the real app (tests/tui and the
drill's end-to-end tests): bounded in time, polling only because the app's state has no event
a test could await."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Static


async def until(
    pilot: Pilot[Any],
    what: str,
    ok: Callable[[], bool],
    within: float = 90,
    interval: float = 0.2,
    *,
    seen: Callable[[], object] | None = None,
) -> None:
    """Let the app run until `ok()` holds; fail naming `what` (and what was `seen` last, when
    given) after `within` seconds."""
    deadline = time.monotonic() + within
    while not ok():
        if time.monotonic() > deadline:
            last = "" if seen is None else f"; saw {seen()!r}"
            raise AssertionError(f"gave up after {within:g}s waiting for {what}{last}")
        await pilot.pause(interval)


def static_text(app: App[Any], selector: str) -> str:
    """The text the `Static` widget `selector` of the current screen shows."""
    return str(app.screen.query_one(selector, Static).render())
