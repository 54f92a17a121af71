"""The app's side of incidents: after each alert refresh, group the firing alerts in a worker
and post the team's open incidents back (`IncidentsGrouped`); the board draws them.

One grouping at a time: a refresh arriving while one runs is folded into the next. The
service (`oncall.service.incidents`) is imported and made on first use, not before the first
frame; a Redis that does not answer leaves the last incidents shown. The app's own checklist
runs are handed to it as they end, so that alerts without an at-firing verdict group too.
See `docs/architecture.md` §3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from oncall.model.alerts import split_key
from oncall.settings import Settings
from oncall.tui.messages import IncidentsGrouped
from oncall.tui.state import AlertBook

if TYPE_CHECKING:
    from textual.app import App

    from oncall.model.checklist_events import StepResult
    from oncall.service.incidents import IncidentsView


class IncidentFeed:
    """Asks for a grouping after a refresh, one at a time; holds the service it made."""

    def __init__(self, settings: Settings, source: IncidentsView | None = None) -> None:
        self.settings = settings
        self.source = source
        self._running = False

    def _view(self) -> IncidentsView:
        if self.source is None:
            from oncall.service.incidents import IncidentsView

            self.source = IncidentsView(self.settings)
        return self.source

    def checklist_ended(self, alert_key: str, results: list[StepResult]) -> None:
        """A run of the app's ended: its steps feed the next grouping."""
        if results:
            context, alert = split_key(alert_key)
            self._view().note_checklist(context, alert, [r.to_json() for r in results])

    def ask(self, app: App[Any], book: AlertBook, post: Callable[[Any], Any]) -> None:
        if self._running:
            return
        self._running = True
        view = self._view()
        statuses = list(book.statuses.values())
        verdicts = list(book.at_firing.values())

        async def group() -> None:
            try:
                found = await view.update(statuses, verdicts)
            finally:
                self._running = False
            post(IncidentsGrouped(list(found)))

        app.run_worker(
            group(),
            name="incidents",
            group="incidents",
            exit_on_error=False,
            description="group the firing alerts into incidents",
        )

    async def aclose(self) -> None:
        if self.source is not None:
            await self.source.aclose()
