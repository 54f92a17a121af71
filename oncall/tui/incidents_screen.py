"""`:incidents` — the team's incidents, newest first; enter opens one's timeline.

The list and each timeline come from an `IncidentSource` (`oncall.service.incident_view`,
docs/architecture.md §3): a worker asks it and posts the answer back as a message, the screen
only renders. `r` reads again, esc leaves. A store that cannot be read says so on the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from oncall.model.incidents import Incident
from oncall.service.incident_view import IncidentSource, iso
from oncall.settings import Settings
from oncall.tui.banner import banners
from oncall.tui.source_screen import SourceScreen, reload_and_back
from oncall.tui.tables import cursor_key, new_table
from oncall.tui.terminal_safe import safe_text
from oncall.tui.workers import ask_in_worker

COLUMNS = (("id", "INCIDENT"), ("state", "STATE"), ("opened", "OPENED (UTC)"),
           ("alerts", "ALERTS"), ("cause", "CAUSE"))  # fmt: skip


@dataclass
class IncidentsListed(Message):
    incidents: list[Incident] | None
    error: str | None = None


def _clock(ts: float) -> str:
    return iso(ts).replace("T", " ").removesuffix("Z")


class IncidentsScreen(SourceScreen[IncidentSource]):
    """Every incident of the team: id, open or closed, when it opened, its alerts, its cause."""

    HELP_TITLE: ClassVar[str] = "incidents"
    TABLE: ClassVar[str] = "incidents-list"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Timeline", id="incidents.open"),
        *reload_and_back("incidents"),
    ]

    def __init__(self, settings: Settings, source: IncidentSource) -> None:
        super().__init__(settings, source)
        self.incidents: list[Incident] | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield from banners(self.settings)
        yield Static(
            "incidents · reading…", id="incidents-title", classes="screen-line", markup=False
        )
        yield new_table(self.TABLE, COLUMNS, classes="screen-table")
        yield Static("", id="incidents-status", classes="screen-line", markup=False)
        yield Footer()

    def action_reload(self) -> None:
        ask_in_worker(self, "incidents", self.source.recent, IncidentsListed)

    def on_incidents_listed(self, message: IncidentsListed) -> None:
        self.incidents, self.error = message.incidents, message.error
        table: DataTable[Text] = self.query_one("#incidents-list", DataTable)
        table.clear()
        for inc in self.incidents or []:
            state = "ongoing" if inc.ongoing else "closed"
            cause = inc.explanation or (inc.members[0].alert if inc.members else "")
            cells = (inc.id, state, _clock(inc.opened_at), str(len(inc.members)), cause)
            table.add_row(*(Text(safe_text(c)) for c in cells), key=inc.id)
        title = self.query_one("#incidents-title", Static)
        title.update(f"incidents · {len(self.incidents or [])}")
        status = self.query_one("#incidents-status", Static)
        if self.error is not None:
            status.update(f"cannot read the incidents: {self.error}")
        elif not self.incidents:
            status.update("no incidents")
        else:
            status.update("enter: the timeline · r: read again")

    def _open(self, key: str | None) -> None:
        incident = next((i for i in self.incidents or [] if i.id == key), None)
        if incident is not None:
            from oncall.tui.timeline_screen import TimelineScreen

            self.app.push_screen(TimelineScreen(self.settings, self.source, incident))

    def action_open(self) -> None:
        self._open(cursor_key(self.query_one("#incidents-list", DataTable)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._open(event.row_key.value if isinstance(event.row_key.value, str) else None)
