"""`OncallApp`: the terminal app — board of golden alerts → incident screen of one alert.

All I/O runs in workers: one loop refreshes the alert states every `alerts.refresh` seconds,
and each checklist run is a worker of its own (group `checklist:<alert>`, so a re-run replaces
the run before it). Workers (oncall.tui.workers) only post messages; the handlers here
change the `AlertBook` and tell the screens to repaint, on the event loop, so a hung backend
never holds up a key press. Help, the `:` commands and the keymap: oncall.tui.app_commands.

The I/O is injected at the service boundary: `alerts_source` and `checklist_runner` default to
the live ones of `oncall.service.sources`; tests and drills pass their own. `clock` gives the
"now" of every age on screen, so snapshots are the same on every run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.command import Provider
from textual.filter import LineFilter
from textual.screen import Screen

from oncall.model.alerts import split_key
from oncall.runtime import TICK_S, CollectorPacing, collector_on
from oncall.service.contexts import live_alert_sources, live_checklists
from oncall.service.sources import (
    AlertsSource,
    ChecklistRunner,
)
from oncall.settings import Settings
from oncall.tui import contexts_view
from oncall.tui.app_commands import ScreenActions
from oncall.tui.board import BoardScreen
from oncall.tui.incident_feed import IncidentFeed
from oncall.tui.messages import (
    AlertsFailed,
    AlertsRefreshed,
    ChecklistEnded,
    ChecklistProgress,
    HistoryRefreshed,
    IncidentsGrouped,
    OpenIncident,
    RefreshAlerts,
    RerunChecklist,
    VerdictsFound,
)
from oncall.tui.state import AUTO_RUN_STATES, AlertBook
from oncall.tui.terminal_safe import TerminalSafe
from oncall.tui.workers import alerts_loop, checklist_run, histories

if TYPE_CHECKING:
    from textual.worker import Worker

    from oncall.service.audit_view import AuditSource
    from oncall.service.charts import ChartSource
    from oncall.service.incidents import IncidentsView
    from oncall.service.remediation import RemediationRunner
    from oncall.service.verdicts import AtFiringVerdicts
    from oncall.tui.commands import OncallCommands
    from oncall.tui.incident import IncidentScreen

#: How often ages on screen ("running 12s", "results 42s old") are repainted.
AGES_EVERY_S = 1.0
#: How often the app asks its source for the sparklines' history. The engine's own limit is
#: per rule and longer (`alerts.engine.HISTORY_QUERY_EVERY_S`, 60 s): most asks cost no request,
#: and a rule whose query failed is tried again sooner.
HISTORY_ASK_EVERY_S = 15.0
#: Closing a backend client at exit must not hang the exit when the backend hangs.
CLOSE_TIMEOUT_S = 2.0


def _oncall_commands() -> type[OncallCommands]:
    from oncall.tui.commands import OncallCommands

    return OncallCommands


class OncallApp(ScreenActions):
    """Golden alerts, their checklists, and (later) confirmed remediations."""

    CSS_PATH = "oncall.tcss"
    TITLE = "oncall"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="app.help"),
        Binding("colon", "command_line", "Command", key_display=":", show=False, id="app.command"),
    ]
    # The palette's provider, the `:` prompt and the help screen (oncall.tui.commands, .help)
    # are imported when first opened, or by `_warm_up` after the first alert states: the
    # first frame shows only the board. Textual calls a provider's factory when the palette
    # opens (`App.COMMANDS` takes callables).
    COMMANDS: ClassVar[set[type[Provider] | Callable[[], type[Provider]]]] = {
        *App.COMMANDS,
        _oncall_commands,
    }

    def __init__(
        self,
        settings: Settings,
        *,
        alerts_source: AlertsSource | Mapping[str, AlertsSource] | None = None,
        checklist_runner: ChecklistRunner | None = None,
        audit_source: AuditSource | None = None,
        remediation_runner: RemediationRunner | None = None,
        verdict_source: AtFiringVerdicts | None = None,
        incident_source: IncidentsView | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.settings = settings
        # One source per context (`contexts:`), each refreshed by its own loop; "" alone
        # with one context. Tests hand in one source, or one per context.
        if alerts_source is None:
            self.alerts_sources = live_alert_sources(settings)
        elif isinstance(alerts_source, Mapping):
            self.alerts_sources = dict(alerts_source)
        else:
            self.alerts_sources = {"": alerts_source}
        self.alerts_source = next(iter(self.alerts_sources.values()))
        self.checklists = checklist_runner or live_checklists(settings)
        self._audit_source = audit_source
        self._remediation_runner = remediation_runner
        #: `oncall serve`'s at-firing verdicts (made on first use: the first frame needs none).
        self._verdict_source = verdict_source
        self._verdicts_running = False
        #: The grouping of firing alerts into the team's incidents, after each refresh.
        self.incident_feed = IncidentFeed(settings, incident_source)
        self.clock = clock
        self.book = AlertBook(
            auto_run_states=AUTO_RUN_STATES[settings.runbooks.auto_run],
            auto_run_every_s=settings.runbooks.auto_run_every,
        )
        self.board = BoardScreen(settings, self.book, clock)
        self._wakes = {context: asyncio.Event() for context in self.alerts_sources}
        self.keymap: dict[str, str] = {}  # the `keys` setting's ids that some binding has
        self._history_asked_at: float | None = None
        self._history_running = False
        self._warmed = False
        #: Full garbage collections at idle moments, not during a key press (collector.py).
        self.collector = CollectorPacing()
        #: The incident screen's charts (tests hand in fakes); None: each screen opens its own.
        self.chart_source: ChartSource | None = None
        self._terminal_safe = TerminalSafe()

    def get_line_filters(self) -> Sequence[LineFilter]:
        # The one terminal-safety rule: every line drawn, whatever widget drew it and whatever
        # backend gave its text, loses its control characters here (oncall.tui.terminal_safe).
        return [*super().get_line_filters(), self._terminal_safe]

    def get_default_screen(self) -> Screen[None]:
        return self.board

    def on_mount(self) -> None:
        self.apply_keymap()
        self.call_after_refresh(self._after_first_frame)

    def _after_first_frame(self) -> None:
        # `oncall` starts with the garbage collector off (oncall.cli.main): on again now. A
        # no-op where it was never off (tests, embedding).
        collector_on()
        self.collector.install()
        self.set_interval(TICK_S, self.collector.tick, name="collector")
        # The first refresh imports httpx and parses the rule files in a thread; started
        # before the first frame it would take the interpreter lock from it.
        for context, source in self.alerts_sources.items():
            # One loop per context: a context whose backends hang holds up only its own.
            self.run_worker(
                alerts_loop(
                    self.post_message,
                    source,
                    context=context,
                    interval=self.settings.alerts.refresh,
                    wake=self._wakes[context],
                    clock=self.clock,
                ),
                name=f"alerts {context}".rstrip(),
                group=f"alerts:{context}",
                exclusive=True,
                exit_on_error=False,
                description=f"refresh the alert states {context}".rstrip(),
            )
        self.set_interval(AGES_EVERY_S, self._tick, name="ages")

    def _warm_up_once(self) -> None:
        """After the first answer about the alerts: import what opening one will need."""
        if self._warmed:
            return
        self._warmed = True
        self.run_worker(
            asyncio.to_thread(_warm_up, self.checklists),
            name="warm-up",
            exit_on_error=False,
            description="import the incident and audit screens and the checklist machinery",
        )

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.InputEvent):
            self.collector.input()
        await super().on_event(event)

    async def on_unmount(self) -> None:
        self.collector.uninstall()
        closers = [source.aclose for source in self.alerts_sources.values()]
        closers.append(self.incident_feed.aclose)
        if self._verdict_source is not None:
            closers.append(self._verdict_source.aclose)
        for closer in (*closers, self.checklists.aclose):
            with contextlib.suppress(Exception):
                async with asyncio.timeout(CLOSE_TIMEOUT_S):
                    await closer()

    # -- workers: they only post messages (oncall.tui.workers) ---------------------------

    async def _history(self) -> None:
        try:
            found = await histories(self.alerts_sources.values())
        finally:
            self._history_running = False
        self.post_message(HistoryRefreshed(found))

    def _ask_verdicts(self, now: float) -> None:
        """One read of at-firing verdicts at a time, for firing alerts that have none yet."""
        if self._verdicts_running:
            return
        wanted = self.book.verdicts_wanted(now)
        if not wanted:
            return
        if self._verdict_source is None:
            from oncall.service.verdicts import AtFiringVerdicts

            self._verdict_source = AtFiringVerdicts(self.settings)
        items = [(key, *split_key(key)) for key in wanted]
        self._verdicts_running = True
        self.run_worker(
            self._verdicts(self._verdict_source, items),
            name="verdicts",
            group="verdicts",
            exit_on_error=False,
            description="read the verdicts oncall serve stored at firing",
        )

    async def _verdicts(self, source: AtFiringVerdicts, items: list[tuple[str, str, str]]) -> None:
        try:
            found = await source.find(items)
        finally:
            self._verdicts_running = False
        if found:
            self.post_message(VerdictsFound(found))

    # -- what the screens and the user ask for -------------------------------------------

    def refresh_alerts_now(self) -> None:
        """Wake the refresh loops: states now rather than at the next interval."""
        for wake in self._wakes.values():
            wake.set()

    def start_checklist(self, alert: str, *, auto: bool = False) -> None:
        """Start a run of `alert`'s checklist; a run still going for it is cancelled."""
        run = self.book.start_run(alert, self.clock(), auto=auto)
        status = self.book.statuses.get(alert)
        # The worker makes the coroutine when it runs: a run replaced in the same loop step
        # (an auto run, then `r`) is cancelled before it starts, and a coroutine made here
        # would be dropped never awaited (Python's RuntimeWarning, over the terminal).
        # (Typed: from a callable alone mypy infers no result type for Textual's WorkType.)
        _worker: Worker[None] = self.run_worker(
            functools.partial(
                checklist_run, self.post_message, self.checklists, alert, run.generation, status
            ),
            name=f"checklist {alert}",
            group=f"checklist:{alert}",
            exclusive=True,
            exit_on_error=False,
            description=f"run the checklist of {alert}",
        )
        self.repaint(alert)

    def open_incident(self, alert: str) -> None:
        """The incident screen of `alert`; its checklist starts now if it never ran."""
        from oncall.tui.incident import IncidentScreen

        if alert not in self.book.runs:
            self.start_checklist(alert)
        # Its banner, settings and remediations are its context's (`contexts:`).
        settings = contexts_view.settings_of(self.settings, split_key(alert)[0])
        self.push_screen(
            IncidentScreen(
                alert, settings, self.book, self.clock, remediations=self.remediation_runner
            )
        )

    def repaint(self, alert: str | None = None) -> None:
        """Show the book's state on the board and on the incident screen on top, if any."""
        if not self.is_running:
            return  # shutting down: the screens' widgets are being taken apart (a late tick)
        self.board.show()
        top = self.screen
        if top is self.board:
            return
        if isinstance(top, _incident_screen()) and (alert is None or top.alert == alert):
            top.show()

    def _start_due(self) -> None:
        for alert in self.book.due(self.clock()):
            self.start_checklist(alert, auto=True)

    def _tick(self) -> None:
        self._start_due()
        self.repaint()

    # -- message handlers ------------------------------------------------------------------

    def on_alerts_refreshed(self, message: AlertsRefreshed) -> None:
        book = self.book
        book.update(message.statuses, message.at, context=message.context)
        book.warned(message.warnings, context=message.context)
        self._start_due()
        self.repaint()
        self._ask_history(message.at)
        self._ask_verdicts(message.at)
        self.incident_feed.ask(self, book, self.post_message)
        self._warm_up_once()

    def _ask_history(self, now: float) -> None:
        """One history request at a time, at most every HISTORY_ASK_EVERY_S, after a refresh."""
        asked = self._history_asked_at
        if self._history_running or (asked is not None and now - asked < HISTORY_ASK_EVERY_S):
            return
        self._history_asked_at, self._history_running = now, True
        self.run_worker(
            self._history(),
            name="history",
            group="history",
            exit_on_error=False,
            description="fetch the alerts' recent values",
        )

    def on_history_refreshed(self, message: HistoryRefreshed) -> None:
        self.book.history = message.history
        self.repaint()  # through repaint's guard: an answer may arrive while the app exits

    def on_verdicts_found(self, message: VerdictsFound) -> None:
        self.book.at_firing.update(message.verdicts)
        self.repaint()

    def on_incidents_grouped(self, message: IncidentsGrouped) -> None:
        self.book.incidents = message.incidents
        self.repaint()

    def on_alerts_failed(self, message: AlertsFailed) -> None:
        if message.context is None:
            self.book.refresh_error = message.error
        else:
            self.book.context_failed(message.context, message.error)
        self.repaint()
        self._warm_up_once()

    def on_checklist_progress(self, message: ChecklistProgress) -> None:
        run = self.book.current(message.alert, message.generation)
        if run is not None:
            run.apply(message.event)
            self.repaint(message.alert)

    def on_checklist_ended(self, message: ChecklistEnded) -> None:
        run = self.book.current(message.alert, message.generation)
        if run is None:
            return  # a replaced run's last word
        run.finished_at = self.clock()
        run.error, run.error_short = message.error, message.error_short
        self.incident_feed.checklist_ended(message.alert, run.ordered_results())
        self._start_due()
        self.repaint(message.alert)

    def on_open_incident(self, message: OpenIncident) -> None:
        self.open_incident(message.alert)

    def on_rerun_checklist(self, message: RerunChecklist) -> None:
        self.start_checklist(message.alert)

    def on_refresh_alerts(self, _message: RefreshAlerts) -> None:
        self.refresh_alerts_now()


def _incident_screen() -> type[IncidentScreen]:
    from oncall.tui.incident import IncidentScreen

    return IncidentScreen


def _warm_up(checklists: ChecklistRunner) -> None:
    """Import what the first `enter` and `:audit` need, so that they do not wait for it."""
    import oncall.service.audit_view
    import oncall.service.remediation
    import oncall.tui.audit_screen
    import oncall.tui.commands
    import oncall.tui.help
    import oncall.tui.incident  # noqa: F401

    checklists.warm_up()
