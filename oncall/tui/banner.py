"""The context line at the top of every screen, and the read-only banner under it.

A production context looks unmistakably different: a full-width error-coloured bar that says
PRODUCTION in words, so it stands out with NO_COLOR too.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from oncall.settings import Settings


class ContextBanner(Static):
    """'oncall · context drill' — or '▲ PRODUCTION ▲ prod-eu' on a red bar."""

    def __init__(self, settings: Settings) -> None:
        context = settings.context
        if context.production:
            text = f"▲ PRODUCTION ▲  context {context.name}  ▲ PRODUCTION ▲"
        else:
            text = f"oncall · context {context.name}"
        super().__init__(text, markup=False, classes="production" if context.production else "")


class ReadOnlyBanner(Static):
    """Shown when `read_only` is set: nothing will be changed from this session."""

    def __init__(self) -> None:
        super().__init__(
            "READ-ONLY — remediations are refused (read_only setting)",
            markup=False,
        )


def banners(settings: Settings) -> ComposeResult:
    """The banners a screen composes first."""
    yield ContextBanner(settings)
    if settings.read_only:
        yield ReadOnlyBanner()
