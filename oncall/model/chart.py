"""A time series chart as lines of text: the pure part both `oncall check --chart` and the
incident screen draw.

`ChartData` holds what a chart shows: the points of one expression over a window, the
threshold it is judged against, the periods the alert was pending or firing, and markers at
the oncall actions taken on it. `render` turns it into rows of `Cell` runs (text and a *kind*:
"line", "threshold", "over", "pending", "firing", "marker", "axis" or None), which the CLI
prints as they are and the screen colours by kind. No I/O, no Textual, no Rich.

Two shapes: the full chart (block characters, eighths of a row, one column per time slot;
the threshold a dashed row, states a band under the plot with `░` pending and `▓` firing, `▲`
markers over the time axis), and a compact sparkline with min/max labels for small terminals
and NO_COLOR, where every part is still told apart by its characters, not its colour.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise

#: Eighths of a cell, empty to full: a column's top cell shows how far up the value reaches.
BLOCKS = " ▁▂▃▄▅▆▇█"
PENDING, FIRING, MARKER = "░", "▓", "▲"
#: Below this size the full chart has no room: the sparkline is shown instead.
MIN_FULL_WIDTH, MIN_FULL_HEIGHT = 60, 8

Cell = tuple[str, str | None]
#: (operator, number): `(">", 0.9)`, or `("<", 0.8)` when below it is unhealthy.
Threshold = tuple[str, float]
Row = list[Cell]


@dataclass(frozen=True)
class Marker:
    """An oncall action on the chart: when, and a short label ('set-max-num-seqs verified')."""

    at: float
    label: str


@dataclass(frozen=True)
class ChartData:
    """One expression over [start, end] (unix seconds), with what is drawn over it.

    `periods` are (from, to, "pending" | "firing"); `threshold` is (operator, number) or None.
    `query` is the expression charted; `range_query`, when set, the PromQL the points came
    from (an evidence chart's: each point the highest of `query` over its step).
    """

    title: str
    start: float
    end: float
    points: tuple[tuple[float, float], ...] = ()
    threshold: tuple[str, float] | None = None
    periods: tuple[tuple[float, float, str], ...] = ()
    markers: tuple[Marker, ...] = ()
    unit: str | None = None
    error: str | None = None  # why there are no points (a failed query), shown in their place
    query: str | None = field(default=None, compare=False)
    range_query: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, object]:
        return {
            "title": self.title,
            "query": self.query,
            "range_query": self.range_query,
            "start": self.start,
            "end": self.end,
            "points": [list(p) for p in self.points],
            "threshold": list(self.threshold) if self.threshold else None,
            "periods": [list(p) for p in self.periods],
            "markers": [{"at": m.at, "label": m.label} for m in self.markers],
            "unit": self.unit,
            "error": self.error,
        }


def fmt(value: float) -> str:
    """A compact number for an axis label: 0.9986, 12.3, 4.5k, 1.2M."""
    size = abs(value)
    if size >= 1e6:
        return f"{value / 1e6:.3g}M"
    if size >= 1e4:
        return f"{value / 1e3:.3g}k"
    if size >= 100 or value == int(value):
        return f"{value:.0f}"
    return f"{value:.4g}"


def clock(ts: float, span: float) -> str:
    """'14:05' (UTC), or '12-01 14:05' when the window is a day or more."""
    moment = datetime.fromtimestamp(ts, UTC)
    return moment.strftime("%m-%d %H:%M" if span >= 86400 else "%H:%M")


def low_is_bad(threshold: tuple[str, float] | None) -> bool:
    """Whether the unhealthy side of `threshold` is below it (`< 0.8`, a hit rate's floor):
    a chart then draws each slot's lowest value, the dip a step or rule failed on, where an
    upper bound's chart draws the peak."""
    return threshold is not None and threshold[0] in ("<", "<=")


def slots(data: ChartData, width: int) -> list[float | None]:
    """The worst finite value in each of `width` equal time slots — the highest, or the lowest
    when below the threshold is unhealthy (`low_is_bad`); None where there is none.

    With more slots than points (15 minutes at a 15 s step on 97 columns), a point also fills
    the slots up to the next one when that follows within two of the usual spacings: a
    regular series is drawn without holes, a real gap in the data stays a gap."""
    out: list[float | None] = [None] * width
    span = (data.end - data.start) / width
    worst = min if low_is_bad(data.threshold) else max
    shown = [(ts, v) for ts, v in data.points if data.start <= ts <= data.end and math.isfinite(v)]
    for ts, value in shown:
        i = min(width - 1, int((ts - data.start) / span))
        current = out[i]
        out[i] = value if current is None else worst(current, value)
    if len(shown) > 1:
        gaps = sorted(b[0] - a[0] for a, b in pairwise(shown))
        usual = gaps[len(gaps) // 2]
        for (ts, value), (after, _) in pairwise(shown):
            if after - ts > 2 * usual:
                continue
            first = min(width - 1, int((ts - data.start) / span))
            last = min(width - 1, int((after - data.start) / span))
            for i in range(first + 1, last):
                if out[i] is None:
                    out[i] = value
    return out


def state_band(data: ChartData, width: int) -> list[str | None]:
    """Per slot: "firing" over "pending" over None, from the periods overlapping it."""
    out: list[str | None] = [None] * width
    span = (data.end - data.start) / width
    for begin, finish, state in data.periods:
        first = min(width - 1, max(0, int((begin - data.start) / span)))
        last = min(width - 1, int((finish - data.start) / span))
        for i in range(first, last + 1):
            if out[i] != "firing":
                out[i] = state
    return out


def marker_slots(data: ChartData, width: int) -> dict[int, list[Marker]]:
    span = (data.end - data.start) / width
    out: dict[int, list[Marker]] = {}
    for marker in data.markers:
        if data.start <= marker.at <= data.end:
            out.setdefault(min(width - 1, int((marker.at - data.start) / span)), []).append(marker)
    return out


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
}


def _over(value: float, threshold: tuple[str, float] | None) -> bool:
    if threshold is None:
        return False
    op, limit = threshold
    compare = _COMPARE.get(op)
    return compare is not None and compare(value, limit)


def _runs(cells: Sequence[Cell]) -> Row:
    """Adjacent cells of one kind joined: fewer segments to style and to print."""
    row: Row = []
    for text, kind in cells:
        if row and row[-1][1] == kind:
            row[-1] = (row[-1][0] + text, kind)
        else:
            row.append((text, kind))
    return row


def render(data: ChartData, width: int, height: int, *, compact: bool = False) -> list[Row]:
    """The chart in `width` x at most `height` cells; the sparkline when `compact`, or when
    there is no room for the full chart."""
    if compact or width < MIN_FULL_WIDTH or height < MIN_FULL_HEIGHT:
        return sparkline_rows(data, width)
    return full_rows(data, width, height)


def _bounds(values: list[float], threshold: tuple[str, float] | None) -> tuple[float, float]:
    low, high = min(values), max(values)
    if threshold is not None:
        low, high = min(low, threshold[1]), max(high, threshold[1])
    if high == low:  # a flat series: give it a row above and below
        pad = abs(high) * 0.1 or 1.0
        low, high = low - pad, high + pad
    return low, high


def _legend(data: ChartData) -> Row:
    bits: Row = [(data.title, "axis")]
    if data.threshold is not None:
        bits.append((f"  ┄ threshold {data.threshold[0]} {fmt(data.threshold[1])}", "threshold"))
    if data.unit:
        bits.append((f"  ({data.unit})", "axis"))
    return bits


def _marker_lines(data: ChartData, width: int) -> list[Row]:
    span = data.end - data.start
    inside = [m for m in data.markers if data.start <= m.at <= data.end]
    if not inside:
        return []
    text = "  ".join(f"{MARKER} {clock(m.at, span)} {m.label}" for m in inside[-3:])
    more = f"  (+{len(inside) - 3} earlier)" if len(inside) > 3 else ""
    return [[((text + more)[:width], "marker")]]


def full_rows(data: ChartData, width: int, height: int) -> list[Row]:
    """Legend, plot rows with a y axis, the state band, markers and the time axis."""
    rows: list[Row] = [_legend(data)]
    values = [v for _, v in data.points if math.isfinite(v)]
    footer = _marker_lines(data, width)
    plot_height = max(2, height - 4 - len(footer))  # legend, band, axis labels, markers
    if not values:
        rows.append([(data.error or "no samples in this window", "axis")])
        return rows + footer
    low, high = _bounds(values, data.threshold)
    labels = [fmt(high), fmt(low)]
    gutter = max(len(s) for s in labels) + 1
    cols = width - gutter - 1
    per_slot = slots(data, cols)
    band = state_band(data, cols)
    marks = marker_slots(data, cols)
    rows += _plot_rows(data, per_slot, band, (low, high), labels, height=plot_height)
    pad = " " * gutter + "└"
    rows.append(_runs([(pad, "axis"), *_band_cells(band, marks, ("─", "axis"))]))
    span = data.end - data.start
    left, right = clock(data.start, span), clock(data.end, span)
    middle = f"{fmt(span / 60)} min" if span < 7200 else f"{fmt(span / 3600)} h"
    room = width - gutter - len(left) - len(right)
    axis = " " * gutter + left + middle.center(max(0, room)) + right
    rows.append([(axis[:width], "axis")])
    return rows + footer


def _band_cells(band: list[str | None], marks: dict[int, list[Marker]], blank: Cell) -> list[Cell]:
    """The row under a chart, per slot: an action's marker, else the alert's state, else
    `blank`."""
    cells: list[Cell] = []
    for i, state in enumerate(band):
        if i in marks:
            cells.append((MARKER, "marker"))
        elif state is not None:
            cells.append((PENDING if state == "pending" else FIRING, state))
        else:
            cells.append(blank)
    return cells


def _plot_rows(
    data: ChartData,
    per_slot: list[float | None],
    band: list[str | None],
    bounds: tuple[float, float],
    labels: list[str],
    *,
    height: int,
) -> list[Row]:
    """The plot itself, top row first: y labels, columns of blocks, threshold, shading."""
    low, high = bounds
    plot_height = height
    gutter = max(len(s) for s in labels) + 1
    rows: list[Row] = []
    # Per column, once: its kind when drawn ("over+firing") and its height in eighths.
    drawn = [
        None if v is None else ("over" if _over(v, data.threshold) else "line") for v in per_slot
    ]
    drawn = [f"{g}+{b}" if g and b else g for g, b in zip(drawn, band, strict=True)]
    scale = plot_height / (high - low)
    heights = [None if v is None else (v - low) * scale * 8 for v in per_slot]
    limit_row: int | None = None
    if data.threshold is not None:  # the row (from the bottom) the threshold falls in
        limit_row = min(plot_height - 1, int((data.threshold[1] - low) * scale))
    for r in range(plot_height - 1, -1, -1):
        if r == plot_height - 1:
            axis = labels[0].rjust(gutter - 1)
        elif r == 0:
            axis = labels[1].rjust(gutter - 1)
        else:
            axis = " " * (gutter - 1)
        cells: list[Cell] = [(axis + " ┤" if r in (0, plot_height - 1) else axis + " │", "axis")]
        floor = r * 8
        for i, top in enumerate(heights):
            char, kind = " ", band[i]
            if top is not None:
                eighths = top - floor
                if eighths >= 8:
                    char = BLOCKS[8]
                elif eighths > 0:
                    char = BLOCKS[max(1, round(eighths))]
                if char != " ":
                    kind = drawn[i]  # the state stays as the cell's background
            if char == " " and r == limit_row:
                char, kind = "┄", "threshold"
            if char == " " and kind is not None:
                char = PENDING if kind == "pending" else FIRING
            cells.append((char, kind))
        rows.append(_runs(cells))
    return rows


def sparkline_rows(data: ChartData, width: int) -> list[Row]:
    """'KV cache  min 0.12 ▁▂▃▅▇█ max 0.99', the state band and marks under it, the markers.

    Readable without colour: the states are `░`/`▓`, the actions `▲`, the threshold a label.
    """
    values = [v for _, v in data.points if math.isfinite(v)]
    head: Row = [(data.title, "axis")]
    if data.threshold is not None:
        head.append((f"  threshold {data.threshold[0]} {fmt(data.threshold[1])}", "threshold"))
    if not values:
        return [head, [(data.error or "no samples in this window", "axis")]]
    low, high = min(values), max(values)
    left, right = f"min {fmt(low)} ", f" max {fmt(high)}"
    cols = max(4, width - len(left) - len(right))
    per_slot = slots(data, cols)
    top = len(BLOCKS) - 2
    cells: list[Cell] = [(left, "axis")]
    for value in per_slot:
        if value is None:
            cells.append((" ", None))
            continue
        level = 0 if high == low else round((value - low) / (high - low) * top)
        kind = "over" if _over(value, data.threshold) else "line"
        cells.append((BLOCKS[level + 1], kind))
    cells.append((right, "axis"))
    band_cells = _band_cells(state_band(data, cols), marker_slots(data, cols), (" ", None))
    under: list[Cell] = [(" " * len(left), None), *band_cells]
    rows = [head, _runs(cells)]
    if any(kind is not None for _, kind in under[1:]):
        rows.append(_runs(under))
    return rows + _marker_lines(data, width)


def plain(rows: list[Row]) -> list[str]:
    """The rows as text lines, trailing spaces trimmed."""
    return ["".join(text for text, _ in row).rstrip() for row in rows]
