"""A fake `ChartSource` for the app's tests: fixed series derived from the fake clock.

The alert's chart: flat at 0.5 for 40 minutes, climbing over the threshold (1.2) in the last
20, pending then firing, with one action marker 5 minutes before now. Each evidence query's
chart: a ramp from 0.6 to 0.99 over the window. Calls are counted so tests can check that
repaints ask nothing.
"""

from __future__ import annotations

from oncall.model.alerts import AlertRule
from oncall.model.chart import ChartData, Marker, Threshold
from tests.tui.fakes import FakeClock


class FakeCharts:
    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.alert_calls: list[tuple[str, float]] = []
        self.query_calls: list[tuple[str, float]] = []
        self.closed = False

    async def alert_chart(self, rule: AlertRule, window_s: float) -> ChartData:
        self.alert_calls.append((rule.name, window_s))
        end = self.clock()
        start = end - window_s
        step = max(15.0, window_s / 240)
        count = int(window_s // step) + 1
        points = []
        for i in range(count):
            ts = start + i * step
            climb = max(0.0, (ts - (end - 1200)) / 1200)
            points.append((ts, 0.5 + 1.3 * climb))
        periods = ((end - 700, end - 580, "pending"), (end - 580, end, "firing"))
        marker = Marker(end - 300, "set-max-num-seqs verified")
        return ChartData(rule.name, start, end, tuple(points), rule.threshold, periods, (marker,))

    async def query_chart(
        self, title: str, query: str, threshold: Threshold | None, window_s: float, unit: str | None
    ) -> ChartData:
        self.query_calls.append((query, window_s))
        end = self.clock()
        start = end - window_s
        points = tuple((start + i * window_s / 120, 0.6 + 0.39 * i / 120) for i in range(121))
        return ChartData(title, start, end, points, threshold, unit=unit, query=query)

    async def aclose(self) -> None:
        self.closed = True
