"""Reading a Textual app under a Pilot, for tests that drive the real app (tests/tui and the
drill's end-to-end tests). Waiting on it is tests/harness/waiting.py's `until`."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.widgets import Static


def static_text(app: App[Any], selector: str) -> str:
    """The text the `Static` widget `selector` of the current screen shows."""
    return str(app.screen.query_one(selector, Static).render())
