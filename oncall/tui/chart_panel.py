"""What the incident screen's charts show and when they ask for it.

`AlertChart` charts the alert's expression over the chosen window (`oncall.service.charts`
WINDOWS, default the last hour): one request when it opens, one per zoom change, and — after
a remediation is verified — one every `FOLLOW_EVERY_S` for `FOLLOW_FOR_S`, so the operator
sees the signal respond. `EvidenceCharts` charts the highlighted step's evidence values that
are PromQL series (`evidence_query`), one request per value when the step, the window or a
follow refresh changes; other evidence keeps its text in the pane above.

The charts come from the app's `chart_source` when it has one (tests hand in fakes), else
from a `LiveCharts` of the screen's own, closed when the screen goes. Requests run in
workers; a failed one is a chart that says why, never an exception on the screen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.containers import Vertical
from textual.timer import Timer
from textual.widget import Widget

from oncall.model.alerts import AlertRule
from oncall.model.chart import ChartData, Threshold
from oncall.model.checklist_events import StepResult
from oncall.service.charts import (
    DEFAULT_WINDOW,
    WINDOWS,
    ChartSource,
    evidence_query,
    evidence_threshold,
)
from oncall.settings import Settings
from oncall.tui.chart import ChartView

#: After a verified remediation: refresh every 15 s for 5 minutes, then stop.
FOLLOW_EVERY_S = 15.0
FOLLOW_FOR_S = 300.0
NAMES = list(WINDOWS)
#: One evidence chart to ask for: label, PromQL, threshold, unit.
Wanted = tuple[str, str, Threshold | None, str | None]


def chart_source(widget: Widget, settings: Settings) -> tuple[ChartSource, bool]:
    """The app's chart source, or a new live one (True: the caller owns and closes it)."""
    shared: ChartSource | None = getattr(widget.app, "chart_source", None)
    if shared is not None:
        return shared, False
    from oncall.service.charts import LiveCharts

    return LiveCharts(settings), True


def close_later(widget: Widget, source: ChartSource | None) -> None:
    """Close a screen's own source in an app worker: leaving the screen must not wait for
    a hung Prometheus' connections to be torn down (esc answers at once)."""
    if source is not None:
        widget.app.run_worker(source.aclose(), group="chart-close", exit_on_error=False)


class AlertChart(Vertical):
    """The alert's chart and the window it shows; zoom with `zoom(+1 | -1)`."""

    DEFAULT_CSS = """
    AlertChart { height: auto; padding: 0 1; }
    """

    def __init__(
        self,
        alert: str,
        settings: Settings,
        rule: Callable[[], AlertRule | None],
        clock: Callable[[], float],
        *,
        rows: int = 10,
        follow_every_s: float = FOLLOW_EVERY_S,
        follow_for_s: float = FOLLOW_FOR_S,
    ) -> None:
        super().__init__(id="alert-chart")
        self.alert = alert
        self.settings = settings
        self.rule = rule
        self.clock = clock
        self.window = DEFAULT_WINDOW
        self.view = ChartView(id="alert-chart-view", rows=rows)
        self.source: ChartSource | None = None
        self._owned = False
        self._asked: tuple[str, int] | None = None  # (window, generation) last asked for
        self._generation = 0
        self.follow_until: float | None = None
        #: The follow refresh's period and length (a test against the drill shortens the
        #: period so that it need not wait 15 s a step).
        self.follow_every_s = follow_every_s
        self.follow_for_s = follow_for_s
        self._follow_timer: Timer | None = None
        #: Requests made (tests check that repaints make none).
        self.requests = 0
        self.evidence: EvidenceCharts | None = None

    def compose(self) -> Any:
        yield self.view

    def on_mount(self) -> None:
        self.source, self._owned = chart_source(self, self.settings)
        self.load()

    def on_unmount(self) -> None:
        close_later(self, self.source if self._owned else None)

    def load(self) -> None:
        """Ask for the chart of the current window unless it was asked for already."""
        rule = self.rule()
        if rule is None or self.source is None:
            self.view.set_chart(None, "chart: waiting for the alert's first state…")
            return
        wanted = (self.window, self._generation)
        if wanted == self._asked:
            return
        self._asked = wanted
        if self.view.data is None:
            self.view.set_chart(None, f"chart: loading the last {self.window}…")
        # An app worker: leaving the screen must not wait for a hung Prometheus to answer
        # (a widget's workers are awaited when it is removed); the answer is then dropped.
        self.app.run_worker(
            self._load(rule, self.source), group="alert-chart", exclusive=True, exit_on_error=False
        )

    async def _load(self, rule: AlertRule, source: ChartSource) -> None:
        self.requests += 1
        try:
            data = await source.alert_chart(rule, WINDOWS[self.window])
        except Exception as exc:  # a picture is decoration: say why, keep the screen
            data, note = None, f"chart: {type(exc).__name__}: {exc}"
        else:
            note = self.note()
        if self.view.is_attached:
            self.view.set_chart(data, note)

    def note(self) -> str:
        keys = "[ ] zoom"
        follow = ""
        if self.follow_until is not None and self.clock() < self.follow_until:
            left = int(self.follow_until - self.clock())
            follow = f" · following the remediation, {left}s left"
        return f"last {self.window} · {keys}{follow}"

    def zoom(self, delta: int) -> None:
        index = min(len(NAMES) - 1, max(0, NAMES.index(self.window) + delta))
        if NAMES[index] == self.window:
            self.app.bell()
            return
        self.window = NAMES[index]
        self.load()
        if self.evidence is not None:
            self.evidence.set_window(self.window)

    def follow(self) -> None:
        """Refresh every `follow_every_s` for `follow_for_s` (15 s for 5 minutes unless told
        otherwise): the signal answering a remediation."""
        every, length = self.follow_every_s, self.follow_for_s
        self.follow_until = self.clock() + length
        self.refresh_now()
        if self._follow_timer is not None:  # a second verified remediation: one timer, anew
            self._follow_timer.stop()
        self._follow_timer = self.set_interval(
            every, self._tick, repeat=max(1, int(length // every))
        )

    def _tick(self) -> None:
        if self.follow_until is None or self.clock() >= self.follow_until:
            self.follow_until = None
            return
        self.refresh_now()

    def refresh_now(self) -> None:
        self._generation += 1
        self.load()
        if self.evidence is not None:
            self.evidence.reload()


class EvidenceCharts(Vertical):
    """A chart per PromQL evidence value of one step."""

    DEFAULT_CSS = """
    EvidenceCharts { height: auto; }
    EvidenceCharts ChartView { margin-top: 1; }
    """

    def __init__(self, settings: Settings, *, rows: int = 8) -> None:
        super().__init__(id="evidence-charts")
        self.settings = settings
        self.rows = rows
        self.window = DEFAULT_WINDOW
        self.result: StepResult | None = None
        self.source: ChartSource | None = None
        self._owned = False
        self._shown: tuple[object, ...] | None = None
        self.requests = 0

    def on_mount(self) -> None:
        self.source, self._owned = chart_source(self, self.settings)

    def on_unmount(self) -> None:
        close_later(self, self.source if self._owned else None)

    def show_step(self, result: StepResult | None) -> None:
        """Chart `result`'s PromQL evidence (nothing for None or for other evidence)."""
        key = (result.id, result.started_at) if result is not None else None
        if self._shown is not None and self._shown[:2] == (key, self.window):
            return
        self.result = result
        self._shown = (key, self.window)
        self.reload()

    def set_window(self, window: str) -> None:
        self.window = window
        self.show_step(self.result)

    def reload(self) -> None:
        result = self.result
        wanted: list[Wanted] = []
        if result is not None:
            for item in result.evidence:
                query = evidence_query(result, item)
                if query is not None:
                    wanted.append((item.label, query, evidence_threshold(item), item.unit))
        self.remove_children()
        if not wanted or self.source is None:
            return
        # Under 40 rows the pane holds a few lines, and it scrolls only with a mouse: sparklines.
        compact = self.app.size.height < 40 or None
        views = [ChartView(rows=self.rows, compact=compact) for _ in wanted]
        self.mount_all(views)
        for view, one in zip(views, wanted, strict=True):
            view.set_chart(None, f"{one[0]}: loading the last {self.window}…")
            self.app.run_worker(
                self._load(view, self.source, one), group="evidence-chart", exit_on_error=False
            )

    async def _load(self, view: ChartView, source: ChartSource, wanted: Wanted) -> None:
        label, query, limit, unit = wanted
        self.requests += 1
        try:
            data: ChartData = await source.query_chart(
                label, query, limit, WINDOWS[self.window], unit
            )
        except Exception as exc:  # decoration: the text above still holds the value
            if view.is_attached:
                view.set_chart(None, f"{label}: chart failed: {type(exc).__name__}: {exc}")
            return
        if view.is_attached:
            view.set_chart(data)
