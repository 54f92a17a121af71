"""The incident chart's repaint cost at 100x30, against a Static of the same size
(docs/PERFORMANCE.md).

    .venv/bin/python scripts/bench/chart.py --frames 300

In one process, under Textual's headless driver at 100x30: each frame hands the widget new
data (a new 240-point series: the cache misses, as after a follow refresh) and times
`render_lines` of its whole region — what a repaint costs the event loop. Rows:

- baseline: a `Static` of the chart's size updated with text of as many characters;
- `ChartView`, full chart (threshold, shading, markers) and sparkline (80x24 / NO_COLOR);
- `ChartView` repainted with unchanged data (the cache: a resize or a sibling's refresh).

With `--libraries` (and `textual-plot` / `textual-plotext` importable, e.g. installed with
`pip install --target DIR` and `PYTHONPATH=DIR`), their widgets plot the same series in the
same region, for the comparison in docs/PERFORMANCE.md. Budget: ≤ 10 ms a frame.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Static

from oncall.model.chart import ChartData, Marker
from oncall.tui.chart import ChartView

WIDTH, HEIGHT, ROWS = 100, 30, 12
T0 = 1_767_225_600.0


def series(k: int) -> ChartData:
    points = tuple(
        (T0 - 3600 + 15 * i, 0.5 + 0.4 * math.sin((i + k) / 20) + 0.5 * (i > 160))
        for i in range(240)
    )
    periods = ((T0 - 1200, T0 - 900, "pending"), (T0 - 900, T0, "firing"))
    marker = (Marker(T0 - 300, "set-max-num-seqs verified"),)
    return ChartData("LLMHighP99Latency", T0 - 3600, T0, points, (">", 1.2), periods, marker)


class Bench(App[None]):
    def __init__(self, widget: Widget) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def time_frames(widget: Widget, frames: int, change: Callable[[int], None]) -> list[float]:
    region = Region(0, 0, WIDTH, ROWS)
    out = []
    for k in range(frames):
        change(k)
        widget.refresh()  # drop Textual's render cache: every frame is a full repaint
        started = time.perf_counter()
        widget.render_lines(region)
        out.append((time.perf_counter() - started) * 1000)
    return out


async def measure(widget: Widget, frames: int, change: Callable[[int], None]) -> list[float]:
    app = Bench(widget)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        widget.styles.height = ROWS
        await pilot.pause()
        time_frames(widget, 10, change)  # warm up: imports, caches of the first frame
        return time_frames(widget, frames, change)


def chart_cases(frames: int) -> dict[str, tuple[Widget, Callable[[int], None]]]:
    full = ChartView(rows=ROWS, compact=False)
    spark = ChartView(rows=ROWS, compact=True)
    cached = ChartView(rows=ROWS, compact=False)
    static = Static("")
    data = [series(k) for k in range(frames + 10)]
    fixed = series(0)
    return {
        "baseline: Static, same size": (
            static,
            lambda k: static.update(f"{f'frame {k}':<99}\n" * ROWS),
        ),
        "ChartView, full chart": (full, lambda k: full.set_chart(data[k])),
        "ChartView, sparkline": (spark, lambda k: spark.set_chart(data[k])),
        "ChartView, same data": (cached, lambda k: cached.set_chart(fixed)),
    }


def library_cases() -> dict[str, tuple[Widget, Callable[[int], None]]]:
    out: dict[str, tuple[Widget, Callable[[int], None]]] = {}
    xs = [float(i) for i in range(240)]
    ys = [[0.5 + 0.4 * math.sin((i + k) / 20) for i in range(240)] for k in range(400)]
    try:
        from textual_plotext import PlotextPlot  # type: ignore[import-not-found]

        plotext = PlotextPlot()

        def draw_plotext(k: int) -> None:
            plt: Any = plotext.plt
            plt.clear_data()
            plt.plot(xs, ys[k % 400])
            plt.hline(1.2)

        out["textual-plotext PlotextPlot"] = (plotext, draw_plotext)
    except ImportError:
        print("textual-plotext: not importable, skipped")
    try:
        from textual_plot import PlotWidget  # type: ignore[import-not-found]

        plot = PlotWidget()

        def draw_plot(k: int) -> None:
            plot.clear()
            plot.plot(xs, ys[k % 400])

        out["textual-plot PlotWidget"] = (plot, draw_plot)
    except ImportError:
        print("textual-plot: not importable, skipped")
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--libraries", action="store_true")
    args = parser.parse_args()
    cases = chart_cases(args.frames)
    if args.libraries:
        cases.update(library_cases())
    results = {}
    for name, (widget, change) in cases.items():
        results[name] = await measure(widget, args.frames, change)
    base = statistics.median(results["baseline: Static, same size"])
    print(f"{args.frames} frames, {WIDTH}x{ROWS} region of a {WIDTH}x{HEIGHT} app, ms per frame")
    print(f"{'':34} {'p50':>7} {'p99':>7} {'max':>7} {'x base':>7}")
    for name, times in results.items():
        ordered = sorted(times)
        p50 = statistics.median(ordered)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        print(f"{name:34} {p50:7.2f} {p99:7.2f} {ordered[-1]:7.2f} {p50 / base:7.1f}")


if __name__ == "__main__":
    asyncio.run(main())
