"""An incident's timeline: its alerts' transitions, the at-firing verdicts, notes, acks,
silences and actions with their audit record ids, and the audit chain's verdict on them.

Opened from `:incidents` with enter. What it shows is the postmortem draft's timeline
(`oncall incident show ID` prints the same); a record the chain's verification cannot vouch
for is marked ⚠. `r` reads again, esc goes back to the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from oncall.model.incidents import Incident
from oncall.service.incident_view import Draft, IncidentSource, iso, ordered
from oncall.settings import Settings
from oncall.tui.banner import banners
from oncall.tui.source_screen import SourceScreen, reload_and_back
from oncall.tui.tables import new_table
from oncall.tui.terminal_safe import safe_text
from oncall.tui.workers import ask_in_worker

COLUMNS = (("time", "TIME (UTC)"), ("kind", "WHAT"), ("text", "EVENT"), ("record", "RECORD"))
_CHAIN = {
    "intact": "✓ audit chain intact",
    "local-only": "✓ local audit chain intact, not anchored",
    "failed": "✗ audit chain FAILED verification: records marked ⚠ are not vouched for",
    "unavailable": "? audit log not verified",
}


@dataclass
class TimelineRead(Message):
    draft: Draft | None
    error: str | None = None


class TimelineScreen(SourceScreen[IncidentSource]):
    """One incident's timeline, oldest first."""

    HELP_TITLE: ClassVar[str] = "timeline"
    TABLE: ClassVar[str] = "timeline-events"
    BINDINGS: ClassVar[list[BindingType]] = [*reload_and_back("timeline")]

    def __init__(self, settings: Settings, source: IncidentSource, incident: Incident) -> None:
        super().__init__(settings, source)
        self.incident = incident
        self.draft: Draft | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield from banners(self.settings)
        closed = self.incident.closed_at
        state = "ongoing" if closed is None else f"closed {iso(closed)}"
        meta = f"{self.incident.id} · {state} · {self.incident.explanation}"
        yield Static(safe_text(meta), id="timeline-meta", classes="screen-notes", markup=False)
        yield new_table(self.TABLE, COLUMNS, classes="screen-table")
        chain = "… reading the timeline"
        yield Static(chain, id="timeline-chain", classes="screen-notes", markup=False)
        yield Footer()

    def action_reload(self) -> None:
        ask_in_worker(self, "timeline", lambda: self.source.draft(self.incident), TimelineRead)

    def on_timeline_read(self, message: TimelineRead) -> None:
        self.draft, self.error = message.draft, message.error
        table: DataTable[Text] = self.query_one("#timeline-events", DataTable)
        table.clear()
        chain = self.query_one("#timeline-chain", Static)
        if self.draft is None:
            chain.update(f"cannot read the timeline: {self.error}")
            return
        for n, event in enumerate(ordered(self.draft.events)):
            record = event.record + (" ⚠" if event.vouched is False else "")
            cells = (iso(event.ts)[11:19], event.kind, event.text, record)
            table.add_row(*(Text(safe_text(c)) for c in cells), key=str(n))
        lines = [_CHAIN.get(self.draft.chain.status, self.draft.chain.status)]
        lines += [f"incomplete: {gap}" for gap in self.draft.gaps]
        chain.update(safe_text("\n".join(lines)))
