"""`:audit` — the audit log for a reviewer: records newest first, one record's details, and
whether the hash chain is intact, cross-checked against the team Stream as `oncall audit verify`
does (or, plainly, that only the local chain could be checked).

The records and the verification come from an `AuditSource` (a worker reads the file in a
thread and posts the result back as a message); the screen only renders. `/` filters by words
and `since:1h`, enter opens the highlighted record as indented JSON, `r` reads the log again,
esc closes the details, then the filter, then the screen. What each part says is
oncall/tui/audit_render.py: the chain's state in a colour and with a symbol, so it reads the
same with NO_COLOR.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Footer, Input, Static

from oncall.errors import OncallError
from oncall.redaction import json_terminal_safe
from oncall.service.audit_view import AuditPage, AuditSource, ChainStatus, parse_query
from oncall.settings import Settings
from oncall.tui.audit_render import COLUMNS, chain_text, record_cells, status_text
from oncall.tui.banner import banners
from oncall.tui.source_screen import SourceScreen, reload_and_back
from oncall.tui.tables import cursor_key, leave_filter, new_table
from oncall.tui.terminal_safe import safe_text
from oncall.tui.workers import ask_in_worker


@dataclass
class AuditListed(Message):
    """The records for the filter of `generation`, or why they could not be read."""

    generation: int
    page: AuditPage | None
    error: str | None = None


@dataclass
class AuditVerified(Message):
    """The chain's verification, or why it could not be done."""

    chain: ChainStatus | None
    error: str | None = None


@dataclass
class AuditDetails(Message):
    """One record as text (None: it is no longer in the log)."""

    key: str
    text: str | None
    error: str | None = None


class AuditScreen(SourceScreen[AuditSource]):
    """The audit log: who did what, when, on which alert, with what outcome; and its chain."""

    HELP_TITLE: ClassVar[str] = "audit"
    TABLE: ClassVar[str] = "audit-records"

    DEFAULT_CSS = """
    #audit-details-pane {
        display: none;
        height: 1fr;
        border-top: solid $border-blurred;
        padding: 0 1;
    }
    #audit-filter {
        display: none;
        height: 1;
        border: none;
        padding: 0 1;
    }
    #audit-details-pane.-shown, #audit-filter.-shown {
        display: block;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "details", "Details", id="audit.details"),
        Binding("slash", "filter", "Filter", key_display="/", id="audit.filter"),
        *reload_and_back("audit"),
    ]

    def __init__(self, settings: Settings, source: AuditSource, clock: Callable[[], float]) -> None:
        super().__init__(settings, source)
        self.clock = clock
        self.filter = ""
        self.query_error: str | None = None
        self.page: AuditPage | None = None
        self.list_error: str | None = None
        self.chain: ChainStatus | None = None
        self.chain_error: str | None = None
        self.details_key: str | None = None
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield from banners(self.settings)
        yield Static("audit log · reading…", id="audit-title", classes="screen-line", markup=False)
        yield new_table(self.TABLE, COLUMNS, classes="screen-table")
        with VerticalScroll(id="audit-details-pane"):
            yield Static(id="audit-details", markup=False)
        yield Static(
            "… verifying the chain", id="audit-chain", classes="screen-notes", markup=False
        )
        yield Static("", id="audit-status", classes="screen-line", markup=False)
        yield Input(placeholder="filter: words, since:1h", id="audit-filter")
        yield Footer()

    @property
    def loaded(self) -> bool:
        """Both the records and the verification have answered (the tests wait for this)."""
        listed = self.page is not None or self.list_error is not None
        return listed and (self.chain is not None or self.chain_error is not None)

    # -- workers: they only post messages ---------------------------------------------------

    def action_reload(self) -> None:
        """`r`: read the records (for the current filter) and verify the chain, both anew."""
        self.list_records()
        self.chain, self.chain_error = None, None
        ask_in_worker(self, "audit-verify", self.source.verify, AuditVerified)
        self.show_chain()

    def list_records(self) -> None:
        try:
            query = parse_query(self.filter, datetime.fromtimestamp(self.clock(), UTC))
        except OncallError as exc:
            self.query_error = str(exc)
            self.show_status()
            return
        self.query_error = None
        self._generation += 1
        generation = self._generation
        ask_in_worker(
            self,
            "audit-list",
            lambda: self.source.records(query),
            lambda page, error: AuditListed(generation, page, error),
        )

    # -- message handlers -------------------------------------------------------------------

    def on_audit_listed(self, message: AuditListed) -> None:
        if message.generation != self._generation:
            return  # the answer to a filter typed over since
        self.page, self.list_error = message.page, message.error
        self.show_rows()
        self.show_status()

    def on_audit_verified(self, message: AuditVerified) -> None:
        self.chain, self.chain_error = message.chain, message.error
        self.show_chain()

    def on_audit_details(self, message: AuditDetails) -> None:
        if message.key != self.details_key:
            return
        if message.error is not None:
            body = f"cannot read this record: {message.error}"
        elif message.text is None:
            body = "this record is no longer in the log (press r to read it again)"
        else:
            body = message.text
        # The record's JSON with its C1 controls as JSON escapes, as `oncall audit show`
        # prints it (the same JSON); anything else a terminal acts on as "?".
        self.query_one("#audit-details", Static).update(safe_text(json_terminal_safe(body)))

    # -- rendering --------------------------------------------------------------------------

    def show_rows(self) -> None:
        table: DataTable[Text] = self.query_one("#audit-records", DataTable)
        selected = self.selected_key()
        table.clear()
        rows = self.page.rows if self.page is not None else ()
        for row in rows:
            table.add_row(*record_cells(self.app, row), key=row.key)
        keys = [row.key for row in rows]
        if selected in keys:
            table.move_cursor(row=keys.index(selected), animate=False)
        if self.page is not None:
            self.query_one("#audit-title", Static).update(f"audit log · {self.page.path}")

    def show_chain(self) -> None:
        line = self.query_one("#audit-chain", Static)
        line.update(chain_text(self.app, self.chain, self.chain_error))

    def show_status(self) -> None:
        line = status_text(self.page, self.list_error, self.filter, self.query_error)
        self.query_one("#audit-status", Static).update(line)

    def selected_key(self) -> str | None:
        return cursor_key(self.query_one("#audit-records", DataTable))

    # -- actions ----------------------------------------------------------------------------

    def open_details(self, key: str) -> None:
        self.details_key = key
        self.query_one("#audit-details", Static).update("reading…")
        self.query_one("#audit-details-pane").add_class("-shown")
        ask_in_worker(
            self,
            "audit-details",
            lambda: self.source.details(key),
            lambda text, error: AuditDetails(key, text, error),
        )

    def action_details(self) -> None:
        key = self.selected_key()
        if key is not None:
            self.open_details(key)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if isinstance(event.row_key.value, str):
            self.open_details(event.row_key.value)

    def action_filter(self) -> None:
        box = self.query_one("#audit-filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_back(self) -> None:
        """esc: close the details, else clear the filter, else leave the screen."""
        pane = self.query_one("#audit-details-pane")
        box = self.query_one("#audit-filter", Input)
        if pane.has_class("-shown"):
            pane.remove_class("-shown")
            self.details_key = None
        elif box.has_class("-shown") or self.filter:
            box.value = ""
            box.remove_class("-shown")
        else:
            self.dismiss()
            return
        self.query_one("#audit-records", DataTable).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter = event.value.strip()
        self.list_records()
        self.show_status()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        leave_filter(event, self.filter, self.query_one("#audit-records", DataTable))
