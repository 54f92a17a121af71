"""The board: every loaded alert, firing first, with its checklist's findings next to it.

The screen renders from the app's `AlertBook` (attributes down) and asks the app for things by
message (messages up): open an alert, re-run its checklist, refresh now. A refresh updates only
the cells that changed; the table is rebuilt only when the order of the rows changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from oncall.model.alerts import RuleStatus
from oncall.model.matchers import MatcherError, Selection, parse_selection, status_matches
from oncall.redaction import redact, terminal_safe
from oncall.settings import Settings
from oncall.tui import board_incidents, contexts_view
from oncall.tui.banner import ContextBanner, banners
from oncall.tui.board_table import CellBatchTable, CellChange
from oncall.tui.format import (
    STATE_COLOUR,
    STATE_SYMBOL,
    STEP_COLOUR,
    alert_value,
    duration,
    short_age,
    shown_state,
    sparkline,
    when,
)
from oncall.tui.messages import (
    AcknowledgeAlert,
    OpenIncident,
    RefreshAlerts,
    RerunChecklist,
    SilenceAlert,
)
from oncall.tui.paint import styled
from oncall.tui.state import AlertBook, ChecklistRun, RunFailure
from oncall.tui.tables import cursor_key, leave_filter, new_table

if TYPE_CHECKING:
    # Only an annotation here: importing it at start-up built its eight dataclasses before the
    # first frame.
    from oncall.model.alertmanager import RuleRouting

#: (column key, header); the most telling columns first, so 80 columns show them.
COLUMNS = (
    ("state", "State"),
    ("alert", "Alert"),
    ("when", "When"),
    ("findings", "Findings"),
    ("value", "Value"),
    ("history", "Last hour"),
    ("evaluated", "Evaluated"),
    ("source", "Source"),
    ("note", "Note"),
)

#: With `alertmanager.url`: how Alertmanager handles the firing instances, after Findings.
ROUTING_COLUMN = ("routing", "Alertmanager")


def columns(settings: Settings) -> tuple[tuple[str, str], ...]:
    """The board's columns: the routing column only when an Alertmanager is configured (at
    the top level or in any context: each context asks its own)."""
    urls = [settings.alertmanager.url]
    urls += [entry.alertmanager.url for entry in settings.contexts.values()]
    if all(url is None for url in urls):
        return COLUMNS
    at = [key for key, _ in COLUMNS].index("findings") + 1
    return (*COLUMNS[:at], ROUTING_COLUMN, *COLUMNS[at:])


def routing_cell(routing: RuleRouting | None) -> tuple[str, str | None]:
    """'2 silenced, 1 active' in the muted colour when nothing of it is active, 'unknown:
    timeout' as a warning; an acknowledgement ('ack alice') first (`RuleRouting.ack`)."""
    if routing is None:
        return "", None
    text = routing.text()
    if routing.ack is not None or routing.ack_error is not None:
        who = routing.ack.by if routing.ack is not None else "unknown"
        text = f"ack {who}" + (f" · {text}" if text else "")
    if routing.unknown:
        return text, "warning"
    quiet = routing.total and not routing.active and not routing.other
    return text, "foreground-muted" if quiet else None


#: The sparkline: the last hour, one character per five minutes.
HISTORY_SPAN_S = 3600.0
HISTORY_WIDTH = 12

#: A cell as data: its text, the theme colour it is shown in, and whether it is bold.
Cell = tuple[str, str | None, bool]


def note(status: RuleStatus, now: float) -> str:
    """Staleness and errors: 'stale 2m: prometheus at …: refused'."""
    if status.stale_since is not None:
        return f"stale {short_age(now - status.stale_since)}: {status.error or 'no answer'}"
    if status.silent and status.liveness is not None:
        return f"cannot fire: {status.liveness.text}"
    return status.error or ""


def _warns(status: RuleStatus) -> bool:
    """The note is a warning: a stale state, or a rule whose evaluation failed (its state
    is still Prometheus' own, so the state cell keeps its colour)."""
    return status.stale_since is not None or status.health == "err" or status.silent


def at_firing_cell(verdict: dict[str, object]) -> tuple[str, str | None]:
    """'at firing: 2 fail', coloured by the worst step of that verdict."""
    from oncall.model.verdicts import step_counts, verdict_findings

    counts = step_counts(verdict)
    worst = next((s for s in ("fail", "error", "unknown", "warn") if counts.get(s)), "ok")
    return f"at firing: {verdict_findings(verdict)}", STEP_COLOUR.get(worst)


#: The findings colour of a run that ended without results, by why.
FAILURE_COLOUR: dict[RunFailure, str | None] = {
    "no runbook": "error",
    "error": "error",
    "runbook invalid": None,
}


def findings_colour(run: ChecklistRun) -> str | None:
    """The theme colour of a run's findings: from its state and worst step, not its words."""
    if run.running:
        return "primary"
    failure = run.error_short
    if failure is not None and not run.results:
        return FAILURE_COLOUR[failure]
    worst = run.worst()
    if worst in ("fail", "error") or failure == "error":
        return "error"
    if worst in ("unknown", "warn"):
        return "warning"
    return "success" if failure is None else None


class BoardScreen(Screen[None]):
    """The golden alerts of the loaded packs, live."""

    HELP_TITLE: ClassVar[str] = "board"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", id="board.open"),
        Binding("slash", "filter", "Filter", key_display="/", id="board.filter"),
        Binding("r", "rerun", "Re-run", id="board.rerun"),
        # Off the footer (it keeps its 80 columns); listed by `?`.
        Binding("s", "silence", "Silence", show=False, id="board.silence"),
        Binding("a", "acknowledge", "Acknowledge", show=False, id="board.acknowledge"),
        Binding("escape", "back", "Clear filter", show=False, id="board.back"),
        Binding("space", "expand", "Expand incident", show=False, id="board.expand"),
    ]

    def __init__(self, settings: Settings, book: AlertBook, clock: Callable[[], float]) -> None:
        super().__init__()
        self.settings = settings
        self.book = book
        self.clock = clock
        self.filter = ""
        self._selection = Selection()
        self._filter_error: str | None = None
        self._keys: list[str] = []
        self._cells: dict[str, tuple[Cell, ...]] = {}
        self._composed = False  # `is_mounted` is still false while on_mount runs
        #: With several contexts: Context after State; `view` the one `:context NAME` shows.
        self.columns = contexts_view.with_context_column(columns(settings), settings)
        self._routing = any(key == ROUTING_COLUMN[0] for key, _ in self.columns)
        self._contexts = any(key == "context" for key, _ in self.columns)
        self.view: str | None = None
        #: The incident rows shown expanded to their alerts (oncall.tui.board_incidents).
        self.expanded: set[str] = set()

    def compose(self) -> ComposeResult:
        yield from banners(self.settings)
        yield new_table("alerts", self.columns, CellBatchTable)
        yield Static("waiting for the first refresh…", id="board-status", markup=False)
        yield Input(placeholder='filter: words, or severity="page" team=~"infer.*"', id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self._composed = True
        self.show_header()
        self.show()

    def on_unmount(self) -> None:
        # The app exiting: a refresh loop's late answer must not repaint a removed table.
        self._composed = False

    def set_view(self, view: str | None) -> None:
        """`:context NAME` (None: every context): the rows and the header of that view."""
        self.view = view
        self.show_header()
        self.show()

    def show_header(self) -> None:
        if contexts_view.board_contexts(self.settings):
            text, production = contexts_view.header_text(self.settings, self.view)
            banner = self.query_one(ContextBanner)
            banner.update(text)
            banner.set_class(production, "production")

    # -- rendering -------------------------------------------------------------------------

    def cells(self, status: RuleStatus, now: float) -> tuple[Cell, ...]:
        state = shown_state(status)
        run = self.book.runs.get(status.key)
        findings = run.findings() if run is not None else ""
        colour = findings_colour(run) if run is not None else None
        verdict = self.book.at_firing.get(status.key)
        if verdict is not None and (run is None or run.running):
            # Until the live run has finished: what the checklist found when the alert fired.
            findings, colour = at_firing_cell(verdict)
        evaluated = status.last_evaluation
        routing: tuple[Cell, ...] = ()
        if self._routing:
            routing = ((*routing_cell(status.routing), False),)
        context = (contexts_view.context_cell(self.settings, status),)
        return (
            (f"{STATE_SYMBOL[state]} {state}", STATE_COLOUR[state], state == "firing"),
            *(context if self._contexts else ()),
            (status.rule.name, None, state == "firing"),
            (when(status, now), None, False),
            (findings, colour, False),
            *routing,
            (alert_value(status.value, status.rule.threshold, status.rule.unit), None, False),
            (self.history_of(status.key, now), STATE_COLOUR[state], False),
            (f"{duration(now - evaluated)} ago" if evaluated is not None else "", None, False),
            (status.source, None, False),
            (note(status, now), "warning" if _warns(status) else None, False),
        )

    def history_of(self, alert: str, now: float) -> str:
        points = self.book.history.get(alert, ())
        return sparkline(points, now - HISTORY_SPAN_S, now, HISTORY_WIDTH)

    def matches(self, status: RuleStatus) -> bool:
        """The `/` filter: label matchers (`severity="page"`, `team=~"infer.*"`) and words
        (name, state, severity, group, summary); a filter that cannot be read matches none."""
        if self._filter_error is not None:
            return False
        if self.view is not None and status.context != self.view:
            return False
        return status_matches(self._selection, status)

    def rows(self) -> list[tuple[str, tuple[Cell, ...]]]:
        """The rows shown now, in order, as data (the tests read these)."""
        now = self.clock()
        shown = [s for s in self.book.ordered() if self.matches(s)]
        rows = board_incidents.arrange(
            shown,
            self.book.incidents,
            self.expanded,
            filtering=bool(self.filter),
            every=set(self.book.statuses),
        )
        out = []
        for key, status, incident in rows:
            if status is not None:
                cells = self.cells(status, now)
                out.append((key, cells if incident is None else self._member(cells)))
            elif incident is not None:
                members = board_incidents.rules_of(incident, shown)
                open_ = bool(self.filter) or incident.id in self.expanded
                cells = board_incidents.incident_cells(
                    incident, members, self.columns, now, expanded=open_
                )
                out.append((key, cells))
        return out

    def _member(self, cells: tuple[Cell, ...]) -> tuple[Cell, ...]:
        return board_incidents.as_member(cells, self.columns)

    def show(self) -> None:
        """Bring the table and the status line up to date with the book."""
        if not self._composed:
            return
        table = self.query_one("#alerts", CellBatchTable)
        rows = self.rows()
        keys = [key for key, _ in rows]
        if keys != self._keys:
            selected = cursor_key(table)  # an incident row's key too
            table.clear()
            for key, cells in rows:
                table.add_row(*(self._text(c) for c in cells), key=key)
            if selected in keys:
                table.move_cursor(row=keys.index(selected), animate=False)
        else:
            self._update_cells(table, rows)
        self._keys, self._cells = keys, dict(rows)
        # One line high whatever it says (oncall.tcss): no layout of the whole screen for it,
        # once a second with the ages (what a key press would wait behind).
        self.query_one("#board-status", Static).update(self.status_line(), layout=False)

    def _update_cells(
        self, table: CellBatchTable, rows: list[tuple[str, tuple[Cell, ...]]]
    ) -> None:
        """The cells that changed, in place, each column fitted to its cells once; one batch,
        so that the table renders again only those cells (oncall.tui.board_table).

        DataTable measures a whole column again for each cell it is asked to fit that is
        narrower than the column: asked for every changed cell, a board of 200 rules whose
        ages tick each second measured ~100,000 cells a second and saturated the event loop
        (refreshes timed out). Only the widest changed cell of each column asks: the column
        comes out as wide as asking for each would make it, for one measure of the column.
        """
        changed: list[tuple[str, str, Text]] = []
        widest: dict[str, tuple[int, int]] = {}  # column: (width, index into changed)
        for key, cells in rows:
            old = self._cells.get(key, ())
            for (column, _), cell, before in zip(self.columns, cells, old, strict=False):
                if cell != before:
                    # As DataTable measures a Text: its widest line.
                    width = max((cell_len(line) for line in cell[0].splitlines()), default=0)
                    if column not in widest or width > widest[column][0]:
                        widest[column] = (width, len(changed))
                    changed.append((key, column, self._text(cell)))
        fit = {index for _, index in widest.values()}
        batch: list[CellChange] = [
            (key, column, text, index in fit) for index, (key, column, text) in enumerate(changed)
        ]
        table.update_cells(batch)

    def status_line(self) -> str:
        book = self.book
        if book.refreshed_at is None:
            text = (
                f"alert refresh failed: {book.refresh_error}"
                if book.refresh_error
                else ("waiting for the first refresh…")
            )
        else:
            counts = book.counts()
            parts = [f"{len(book.statuses)} alerts"]
            shown = ("firing", "pending", "unknown", "silent")
            parts += [f"{counts[s]} {s}" for s in shown if counts.get(s)]
            parts.append(f"refreshed {duration(self.clock() - book.refreshed_at)} ago")
            if book.refresh_error:
                parts.append(f"last refresh failed: {book.refresh_error}")
            if warning := book.warning_line():
                # The server's words: a secret they echo masked, an escape sequence disarmed.
                parts.append(terminal_safe(redact(warning)))
            text = " · ".join(parts)
        if not self.filter:
            return text
        if self._filter_error is not None:
            return f"{text} · filter {self.filter!r}: {self._filter_error}"
        if book.statuses and not self._keys:  # the rows just shown
            return f"{text} · no alert matches filter {self.filter!r}"
        return f"{text} · filter {self.filter!r}"

    def _text(self, cell: Cell) -> Text:
        text, colour, bold = cell
        return styled(self.app, text, colour, bold=bold)

    def selected_alert(self) -> str | None:
        """The highlighted alert's key; None on an incident row (its keys act on alerts)."""
        key = cursor_key(self.query_one("#alerts", DataTable))
        return None if board_incidents.incident_of(key) is not None else key

    # -- actions ---------------------------------------------------------------------------

    def action_open(self) -> None:
        self._open(cursor_key(self.query_one("#alerts", DataTable)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if isinstance(event.row_key.value, str):
            self._open(event.row_key.value)

    def _open(self, key: str | None) -> None:
        """`enter`: an alert's incident screen; on an incident row, expand or fold it."""
        if board_incidents.incident_of(key) is not None:
            self.action_expand()
        elif key is not None:
            self.post_message(OpenIncident(key))

    def action_expand(self) -> None:
        """`space`: show (or fold) the alerts of the highlighted incident row."""
        found = board_incidents.incident_of(cursor_key(self.query_one("#alerts", DataTable)))
        if found is not None:
            self.expanded ^= {found}
            self.show()

    def action_rerun(self) -> None:
        self.post_message(RefreshAlerts())
        alert = self.selected_alert()
        if alert is not None:
            self.post_message(RerunChecklist(alert))

    def action_silence(self) -> None:
        """`s`: the silence modal of the highlighted alert (oncall.tui.silence)."""
        alert = self.selected_alert()
        if alert is not None:
            self.post_message(SilenceAlert(alert))

    def action_acknowledge(self) -> None:
        """`a`: acknowledge the highlighted alert team-wide ("I am on it")."""
        alert = self.selected_alert()
        if alert is not None:
            self.post_message(AcknowledgeAlert(alert))

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("-shown")
        self.query_one("#alerts", DataTable).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter = event.value.strip()
        try:
            self._selection, self._filter_error = parse_selection(self.filter), None
        except MatcherError as exc:
            self._filter_error = str(exc)
        self.show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        leave_filter(event, self.filter, self.query_one("#alerts", DataTable))
