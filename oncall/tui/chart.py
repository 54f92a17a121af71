"""The incident screen's charts: the alert's expression, and the highlighted step's PromQL
evidence, drawn by `oncall.model.chart` and coloured here by the kind of each cell.

`ChartView` is a line-API widget that draws its `ChartData` for the size it has: the full chart
(threshold row, pending/firing shading, action markers) from 60x8 cells, otherwise — and at
80x24 or with NO_COLOR — the one-line sparkline with min/max labels. The rendered strips
are cached per (data, size, compact): a repaint that changes neither costs a lookup
(scripts/bench/chart.py). No query is made here: the screen hands in what the service
(`oncall.service.charts`) answered, once per zoom change.

Imported by the incident screen only, itself imported after the first frame: the board never
pays for it.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.app import App
from textual.strip import Strip
from textual.widget import Widget

from oncall.model.chart import ChartData, Row, render
from oncall.tui.paint import theme_colour
from oncall.tui.terminal_safe import safe_text

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


def chart_rows(data: ChartData, width: int, height: int, compact: bool) -> list[Row]:
    return render(data, width, height, compact=compact)[:height]


class ChartView(Widget):
    """One chart, drawn line by line (Textual's line API) from strips cached per (data, size,
    compact, theme): a repaint with unchanged data costs a list lookup, a new series one
    render of `oncall.model.chart` and a Segment per run of cells — no Rich Text to lay out.
    """

    DEFAULT_CSS = """
    ChartView { height: auto; }
    """

    def __init__(
        self, *, id: str | None = None, rows: int = 10, compact: bool | None = None
    ) -> None:
        super().__init__(id=id)
        self.data: ChartData | None = None
        self.note: str = ""
        self.rows = rows
        #: The sparkline always (True), never (False), or as the terminal decides (None).
        self.compact = compact
        self._cache: tuple[tuple[object, ...], list[Strip]] | None = None
        self._styles: tuple[object, dict[str, Style]] | None = None

    def set_chart(self, data: ChartData | None, note: str = "") -> None:
        """Show `data` (None: only `note`, e.g. 'loading the last hour…')."""
        if data is self.data and note == self.note:
            return
        self.data, self.note = data, note
        self.refresh(layout=True)

    def is_compact(self) -> bool:
        return compact_for(self.app) or bool(self.compact)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(self.strips(width))

    def styles_by_kind(self) -> dict[str, Style]:
        theme = (self.app.theme, self.rich_style)
        if self._styles is None or self._styles[0] != theme:
            base = self.rich_style
            kinds = kind_styles(self.app)
            self._styles = (theme, {k: base + v for k, v in kinds.items()} | {"": base})
        return self._styles[1]

    def strips(self, width: int) -> list[Strip]:
        width = max(1, width)
        compact = self.is_compact()
        key = (id(self.data), self.note, width, self.rows, compact, self.app.theme)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        styles = self.styles_by_kind()
        lines: list[Strip] = []
        if self.data is not None:
            for row in chart_rows(self.data, width, self.rows, compact):
                # The title is the alert's name, a marker an audit record's words: text only.
                segments = [
                    Segment(safe_text(text), styles.get(kind or "", styles[""]))
                    for text, kind in row
                ]
                lines.append(Strip(segments).adjust_cell_length(width, styles[""]))
        if self.note or self.data is None:
            note = Strip([Segment(safe_text(self.note), styles.get("axis", styles[""]))])
            lines.append(note.adjust_cell_length(width, styles[""]))
        self._cache = (key, lines)
        return lines

    def render_line(self, y: int) -> Strip:
        lines = self.strips(self.size.width)
        if y < len(lines):
            return lines[y]
        return Strip.blank(self.size.width, self.rich_style)
