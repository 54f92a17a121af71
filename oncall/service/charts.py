"""Charts for the incident screen and `oncall check --chart`: range queries and audit markers.

A chart is one range query over a window (15m, 1h, 6h or 24h), the step chosen so that it
holds at most `MAX_POINTS` points. For an alert that query also asks for Prometheus'
`ALERTS{alertname=…}` series (both in one request, told apart by a label, as the local
evaluation batches its rules): their pending and firing periods are shaded. When the rule
is not deployed in Prometheus (no ALERTS series), the periods are worked out from the
series itself: over the threshold is pending, and firing once that has lasted the rule's
`for`. Markers are the oncall actions on this alert in the audit log (`LiveAudit`, masked),
one per action at the time it started, labelled with how it ended.

The expression charted is the rule's value side: `max(kv) > 0.9` is charted as `max(kv)`
(a range query of the comparison would return only the points over the threshold), with
0.9 drawn as the threshold.

An evidence chart shows the value a step judged at one instant, so each of its points is the
highest value over the step ending at it (`peak_expr`: `max_over_time((q)[15s:1s])`), not the
one sample at the step's end: a range query samples a gauge once a step (one scrape in 15 at
the drill's 1 s scrapes), and a KV-cache usage that touched 0.96 between two points, the
instant the step failed on, was drawn under its 0.9. Each column of the chart is already the
highest of its points (`oncall.model.chart.slots`): the peaks are what it draws. A value
judged against a floor (evidence with `bad: below`, a rule `… < 0.8`) is drawn the other way
up: each point the lowest over its step (`min_over_time`), each column its lowest, the dip.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from oncall.errors import BackendError
from oncall.model.alerts import AlertRule
from oncall.model.chart import ChartData, Marker, Threshold, low_is_bad
from oncall.model.checklist_events import EvidenceValue, StepResult
from oncall.model.metrics import Series
from oncall.settings import Settings

if TYPE_CHECKING:
    from oncall.audit.log import LogLine
    from oncall.backends.prometheus import PrometheusClient

#: Zoom windows by name, in the order the keys cycle them.
WINDOWS: dict[str, float] = {"15m": 900.0, "1h": 3600.0, "6h": 21600.0, "24h": 86400.0}
DEFAULT_WINDOW = "1h"
#: Points per range query at most: a chart is ~100 columns wide, a query stays small.
MAX_POINTS = 240
#: Prometheus' own floor for a useful step: its scrape and rule interval.
MIN_STEP_S = 15.0
#: Evaluations of an evidence query inside each point's step (at most one a second): the
#: point is their highest. 15 sees every sample of the drill's 1 s scrapes at 15 s steps
#: (15m, 1h), of a 15 s scrape at the 6h window's 90 s step, and of a 30 s one at 24h (one
#: evaluation every 24 s); Prometheus does up to 15 times the work of the sampled query.
PEAK_EVALUATIONS = 15

_TAG = "oncall_chart"
_TRAILING_COMPARISON = re.compile(
    r"\s*(>=|<=|==|!=|>|<)\s*(?:bool\s+)?(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)
_FACT = re.compile(r"^\s*facts\.([A-Za-z_][A-Za-z0-9_]*)\s*$")
#: Audit transitions that end an action, for a marker's label; the first record is its time.
_ENDS = ("declined", "refused", "succeeded", "failed", "verified", "rolled_back")


def step_for(window_s: float) -> float:
    """The query step for a window: ≤ MAX_POINTS points, never under MIN_STEP_S."""
    return max(MIN_STEP_S, float(int(-(-window_s // MAX_POINTS))))


def _duration(seconds: float) -> str:
    """A PromQL duration: whole seconds as '15s', anything else in milliseconds."""
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{round(seconds * 1000)}ms"


def peak_expr(expr: str, step: float, *, low: bool = False) -> str:
    """`expr` with each point of a range query at `step` the highest value of `expr` over the
    step ending at it (the lowest with `low`: a value judged against a floor): a subquery
    evaluated `PEAK_EVALUATIONS` times a step, at most once a second (Grafana's
    `max_over_time(…[$__interval])`, for any instant-vector expression)."""
    resolution = max(1.0, float(int(step // PEAK_EVALUATIONS)))
    over_time = "min_over_time" if low else "max_over_time"
    return f"{over_time}(({expr})[{_duration(step)}:{_duration(resolution)}])"


def value_expr(rule: AlertRule) -> str:
    """The rule's expression without its trailing comparison against its threshold."""
    found = _TRAILING_COMPARISON.search(rule.expr)
    if found is None or rule.threshold is None:
        return rule.expr
    return rule.expr[: found.start()]


def worst(series: Iterable[Series], *, low: bool = False) -> tuple[tuple[float, float], ...]:
    """The highest value across series at each timestamp (the board's sparkline does the same),
    or the lowest with `low` (below the threshold is unhealthy: the instance furthest under)."""
    pick = min if low else max
    points: dict[float, float] = {}
    for one in series:
        for ts, value in one.points:
            points[ts] = pick(value, points.get(ts, value))
    return tuple(sorted(points.items()))


def periods_from_alerts(series: Iterable[Series], step: float) -> list[tuple[float, float, str]]:
    """(from, to, state) runs of `ALERTS` samples; a gap of more than a step ends a run."""
    out: list[tuple[float, float, str]] = []
    for one in series:
        state = one.labels.get("alertstate", "firing")
        begin: float | None = None
        last = 0.0
        for ts, _ in one.points:
            if begin is not None and ts - last > step * 1.5:
                out.append((begin, last + step, state))
                begin = None
            if begin is None:
                begin = ts
            last = ts
        if begin is not None:
            out.append((begin, last + step, state))
    return sorted(out)


def periods_from_threshold(
    points: Sequence[tuple[float, float]], rule: AlertRule, step: float
) -> list[tuple[float, float, str]]:
    """The `for` state machine over the series: over the threshold → pending, → firing after
    `for_s`. For rules Prometheus does not evaluate (no ALERTS series)."""
    if rule.threshold is None:
        return []
    op, limit = rule.threshold
    checks = {">": float.__gt__, ">=": float.__ge__, "<": float.__lt__, "<=": float.__le__}
    check = checks.get(op)
    if check is None:
        return []
    out: list[tuple[float, float, str]] = []
    since: float | None = None
    last = 0.0
    for ts, value in points:
        over = check(value, limit)
        if since is not None and (not over or ts - last > step * 1.5):
            out += _split(since, last + step, rule.for_s)
            since = None
        if over and since is None:
            since = ts
        last = ts
    if since is not None:
        out += _split(since, last + step, rule.for_s)
    return out


def _split(begin: float, end: float, for_s: float) -> list[tuple[float, float, str]]:
    fires = begin + for_s
    if fires >= end:
        return [(begin, end, "pending")]
    head = [(begin, fires, "pending")] if for_s > 0 else []
    return [*head, (fires, end, "firing")]


def action_markers(lines: Iterable[LogLine], alert: str, start: float, end: float) -> list[Marker]:
    """One marker per oncall action on `alert`: at its first record, labelled with its action
    and the last transition that ended it ('set-max-num-seqs verified')."""
    from oncall.audit.query import parse_time

    first: dict[str, float] = {}
    label: dict[str, str] = {}
    for line in lines:
        record = line.record
        if record is None or line.problem is not None:
            continue
        named = record.get("alert")
        name = named.get("name") if isinstance(named, dict) else named
        if name != alert:
            continue
        try:
            at = parse_time(str(record.get("ts"))).timestamp()
        except ValueError:
            continue
        key = str(record.get("action_id") or record.get("id"))
        first.setdefault(key, at)
        transition = str(record.get("transition") or "")
        if key not in label or transition in _ENDS:
            label[key] = f"{record.get('action') or 'action'} {transition}".strip()
    return sorted(
        (Marker(at, label[key]) for key, at in first.items() if start <= at <= end),
        key=lambda m: m.at,
    )


def evidence_threshold(item: EvidenceValue) -> Threshold | None:
    """The threshold an evidence chart draws: `(">", t)`, or `("<", t)` when below it is
    unhealthy; None when the threshold is not a number."""
    limit = item.threshold
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        return None
    return ("<" if item.bad == "below" else ">", float(limit))


def evidence_query(result: StepResult, item: EvidenceValue) -> str | None:
    """The PromQL series behind an evidence value, when the probe asked Prometheus for it:
    `facts.value` of `prometheus.query` is its `query`, `facts.kv_cache_usage` of
    `vllm.rates` that rate query. None for any other evidence (kube, Redis INFO…)."""
    found = _FACT.match(item.source or "")
    if found is None:
        return None
    fact = found.group(1)
    if result.probe == "prometheus.query" and fact == "value":
        query = result.params.get("query")
        return query if isinstance(query, str) else None
    if result.probe == "vllm.rates":
        from oncall.probes.vllm_rates import RatesParams, rate_queries

        try:
            return rate_queries(RatesParams.model_validate(result.params)).get(fact)
        except ValueError:
            return None
    return None


class ChartSource(Protocol):
    """Where the incident screen's charts come from; tests hand in fakes."""

    async def alert_chart(self, rule: AlertRule, window_s: float) -> ChartData:
        """The rule's value side over the last `window_s`, its states and actions."""
        ...

    async def query_chart(
        self, title: str, query: str, threshold: Threshold | None, window_s: float, unit: str | None
    ) -> ChartData:
        """Any PromQL series (a step's evidence) over the last `window_s`, judged against
        `threshold` (operator, number: `("<", 0.8)` when below it is unhealthy)."""
        ...

    async def aclose(self) -> None: ...


class LiveCharts:
    """Range queries to the configured Prometheus (own client, made on first use) and the
    audit log at `audit.path`. A failed query is a chart with `error` set, never a raise."""

    def __init__(self, settings: Settings, *, now: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.now = now
        self._prom: PrometheusClient | None = None

    def prom(self) -> PrometheusClient:
        if self._prom is None:
            from oncall.backends import from_settings

            self._prom = from_settings.prometheus_client(self.settings.prometheus)
        return self._prom

    async def alert_chart(self, rule: AlertRule, window_s: float) -> ChartData:
        end = self.now()
        start, step = end - window_s, step_for(window_s)
        expr = value_expr(rule)
        # One request: the value and the ALERTS series, tagged apart.
        batched = (
            f'label_replace(({expr}), "{_TAG}", "value", "", "") or '
            f'label_replace(ALERTS{{alertname="{rule.name}"}}, "{_TAG}", "state", "", "")'
        )
        markers_task = asyncio.create_task(asyncio.to_thread(self._markers, rule.name, start, end))
        error: str | None = None
        try:
            series = await self.prom().query_range(batched, start=start, end=end, step=step)
        except BackendError as exc:
            series, error = [], str(exc)
        markers = await markers_task
        values = [s for s in series if s.labels.get(_TAG) == "value"]
        alerts = [s for s in series if s.labels.get(_TAG) == "state"]
        points = worst(values, low=low_is_bad(rule.threshold))
        periods = periods_from_alerts(alerts, step) if alerts else None
        if periods is None:
            periods = periods_from_threshold(points, rule, step)
        return ChartData(
            title=rule.name,
            start=start,
            end=end,
            points=points,
            threshold=rule.threshold,
            periods=tuple(periods),
            markers=tuple(markers),
            error=error,
            query=expr,
        )

    async def query_chart(
        self, title: str, query: str, threshold: Threshold | None, window_s: float, unit: str | None
    ) -> ChartData:
        end = self.now()
        start, step = end - window_s, step_for(window_s)
        error: str | None = None
        low = low_is_bad(threshold)
        sent = peak_expr(query, step, low=low)
        try:
            try:
                series = await self.prom().query_range(sent, start=start, end=end, step=step)
            except BackendError as exc:
                if exc.http_status not in (400, 422):
                    raise
                # Not a subquery's: a scalar (`subquery is only allowed on instant vector`),
                # a limit on samples, or a typo in the query itself. Charted as sampled, and
                # a typo is then told by its own error, not the wrapper's.
                sent = query
                series = await self.prom().query_range(sent, start=start, end=end, step=step)
        except BackendError as exc:
            series, error = [], str(exc)
        return ChartData(
            title=title,
            start=start,
            end=end,
            points=worst(series, low=low),
            threshold=threshold,
            unit=unit,
            error=error,
            query=query,
            range_query=sent,
        )

    def _markers(self, alert: str, start: float, end: float) -> list[Marker]:
        from oncall.service.audit_view import LiveAudit

        audit = LiveAudit(self.settings)
        if not audit.exists:
            return []
        return action_markers(audit.lines(), alert, start, end)

    async def aclose(self) -> None:
        prom, self._prom = self._prom, None
        if prom is not None:
            await prom.aclose()
