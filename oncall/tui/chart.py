"""The incident screen's charts: the alert's expression, and the highlighted step's PromQL
evidence, drawn by `oncall.model.chart` and coloured here by the kind of each cell.

`ChartView` is a Static that renders its `ChartData` for the size it has: the full chart
(threshold row, pending/firing shading, action markers) from 60x8 cells, otherwise — and at
80x24 or with NO_COLOR — the one-line sparkline with min/max labels. The rendered text is
cached per (data, size, compact): a repaint that changes neither costs a dict lookup
(scripts/bench/chart.py). No query is made here: the screen hands in what the service
(`oncall.service.charts`) answered, once per zoom change.

Imported by the incident screen only, itself imported after the first frame: the board never
pays for it.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.app import App
from textual.widgets import Static

from oncall.model.chart import ChartData, render
from oncall.tui.paint import theme_colour

#: Theme variable of each kind of cell; the shading of a state is a background.
KIND_COLOUR = {
    "line": "primary",
    "over": "error",
    "threshold": "warning",
    "marker": "accent",
    "axis": "foreground-muted",
}
STATE_BACKGROUND = {"pending": "warning-muted", "firing": "error-muted"}


def compact_for(app: App[Any]) -> bool:
    """The sparkline instead of the full chart: NO_COLOR, or a terminal of 80x24 or less."""
    size = app.size
    return bool(app.no_color) or (size.width <= 80 and size.height <= 24)


def kind_styles(app: App[Any]) -> dict[str, Style]:
    """A Rich style per kind ('over+firing' included), from the app's theme."""
    out: dict[str, Style] = {}
    for kind, colour in KIND_COLOUR.items():
        resolved = theme_colour(app, colour)
        out[kind] = Style(color=resolved) if resolved else Style()
    for state, colour in STATE_BACKGROUND.items():
        resolved = theme_colour(app, colour)
        background = Style(bgcolor=resolved) if resolved else Style()
        out[state] = background
        for kind in ("line", "over"):
            out[f"{kind}+{state}"] = out[kind] + background
    return out


def chart_text(
    data: ChartData, width: int, height: int, compact: bool, styles: dict[str, Style]
) -> Text:
    """The chart as one Rich Text of at most `height` lines."""
    text = Text(end="", no_wrap=True, overflow="crop")
    for n, row in enumerate(render(data, width, height, compact=compact)[:height]):
        if n:
            text.append("\n")
        for segment, kind in row:
            text.append(segment, styles.get(kind or "", Style()))
    return text


class ChartView(Static):
    """One chart, re-rendered only when its data or its size changes."""

    DEFAULT_CSS = """
    ChartView { height: auto; }
    """

    def __init__(
        self, *, id: str | None = None, rows: int = 10, compact: bool | None = None
    ) -> None:
        super().__init__(id=id, markup=False)
        #: The sparkline always (True), never (False), or as the terminal decides (None).
        self.compact = compact
        self.data: ChartData | None = None
        self.note: str = ""
        self.rows = rows
        self._cache: tuple[tuple[object, ...], Text] | None = None

    def set_chart(self, data: ChartData | None, note: str = "") -> None:
        """Show `data` (None: only `note`, e.g. 'loading the last hour…')."""
        if data is self.data and note == self.note:
            return
        self.data, self.note = data, note
        self.refresh(layout=True)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        if self.data is None:
            return 1
        compact = self.is_compact()
        return len(render(self.data, width, self.rows, compact=compact)[: self.rows]) + (
            1 if self.note else 0
        )

    def is_compact(self) -> bool:
        return compact_for(self.app) or bool(self.compact)

    def render(self) -> Text:
        width = max(1, self.content_region.width or self.size.width)
        if self.data is None:
            return Text(self.note, end="")
        compact = self.is_compact()
        key = (id(self.data), self.note, width, self.rows, compact, self.app.theme)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        text = chart_text(self.data, width, self.rows, compact, kind_styles(self.app))
        if self.note:
            text.append("\n" + self.note, kind_styles(self.app)["axis"])
        self._cache = (key, text)
        return text
