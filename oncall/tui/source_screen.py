"""The screens of what a source answers, in a table: the audit log, the incidents, a timeline.

Each reads its source in a worker (`workers.ask_in_worker`) when mounted and on `r`, and
renders the answer message; esc goes back. Their table, title, status and notes are styled
by class in oncall.tcss (`screen-table`, `screen-line`, `screen-notes`).
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable

from oncall.settings import Settings

S = TypeVar("S")


def reload_and_back(screen: str) -> list[Binding]:
    """`r` reads again, esc goes back: ids `SCREEN.reload`, `SCREEN.back` (the `keys` setting)."""
    return [
        Binding("r", "reload", "Reload", id=f"{screen}.reload"),
        Binding("escape", "back", "Back", id=f"{screen}.back"),
    ]


class SourceScreen(Screen[None], Generic[S]):
    """A screen whose table (`TABLE`, its id) shows what its source answers; `settings`: its
    context's (the banner)."""

    TABLE: ClassVar[str]

    def __init__(self, settings: Settings, source: S) -> None:
        super().__init__()
        self.settings = settings
        self.source = source

    def on_mount(self) -> None:
        self.query_one(f"#{self.TABLE}", DataTable).focus()
        self.action_reload()

    def action_reload(self) -> None:
        """Ask the source again (`ask_in_worker`); the answer comes back as a message."""
        raise NotImplementedError

    def action_back(self) -> None:
        self.dismiss()
