"""`oncall.service.charts` against a real Prometheus: one request a chart, the value side of
the rule, the ALERTS periods, the audit log's actions; and the pure helpers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from oncall.audit.log import AuditLog
from oncall.model.alerts import AlertRule
from oncall.model.checklist_events import EvidenceValue, StepResult
from oncall.model.metrics import Series
from oncall.service.charts import (
    MAX_POINTS,
    WINDOWS,
    LiveCharts,
    evidence_query,
    evidence_threshold,
    peak_expr,
    periods_from_alerts,
    periods_from_threshold,
    step_for,
    value_expr,
    worst,
)
from oncall.settings import Settings
from tests.harness.servers import RunningServer, rule_file_text
from tests.harness.waiting import eventually

POD = {"kind": "Deployment", "namespace": "ai", "name": "vllm"}


def rule(expr: str = "vector(7) > 5", for_s: float = 2.0) -> AlertRule:
    return AlertRule(name="Seven", expr=expr, group="g", file="r.yml", line=1, for_s=for_s)


def test_step_keeps_every_window_at_most_max_points() -> None:
    for seconds in WINDOWS.values():
        assert seconds / step_for(seconds) <= MAX_POINTS
    assert step_for(900) == 15.0  # never finer than a scrape
    assert step_for(86400) == 360.0


def test_peak_expr_looks_inside_each_step() -> None:
    # A point is the highest of 15 evaluations in its step, at most one a second.
    assert peak_expr("up", step_for(900)) == "max_over_time((up)[15s:1s])"
    assert peak_expr("max(kv)", step_for(21600)) == "max_over_time((max(kv))[90s:6s])"
    assert peak_expr("up", step_for(86400)) == "max_over_time((up)[360s:24s])"
    assert peak_expr("up", 22.5) == "max_over_time((up)[22500ms:1s])"
    # Judged against a floor: the dip, not the peak.
    assert peak_expr("up", step_for(900), low=True) == "min_over_time((up)[15s:1s])"


def kv_samples(end: int) -> str:
    """Two pods' KV-cache usage, a sample a second for the 16 minutes up to `end`: pod a at
    0.5, pod b at 0.4 but for the one second 457 s before `end` at 0.97, between the points
    of a 15-minute chart at 15 s steps (465 and 450 s before its end); and two Redis
    instances' hit rate, a at 0.95, b at 0.9 but 0.3 in that same second."""
    lines = ["# TYPE kv_usage gauge", "# TYPE hit_ratio gauge"]
    for ts in range(end - 960, end + 1):
        lines.append(f'kv_usage{{pod="a"}} 0.5 {ts}')
        lines.append(f'kv_usage{{pod="b"}} {0.97 if ts == end - 457 else 0.4} {ts}')
        lines.append(f'hit_ratio{{instance="a"}} 0.95 {ts}')
        lines.append(f'hit_ratio{{instance="b"}} {0.3 if ts == end - 457 else 0.9} {ts}')
    # OpenMetrics wants each family's samples together.
    lines.sort(key=lambda line: (not line.startswith("#"), line.split("{")[0]))
    return "\n".join([*lines, "# EOF", ""])


async def test_an_evidence_chart_shows_the_worst_between_its_points(
    start_prometheus: Callable[..., RunningServer], tmp_path: Path
) -> None:
    """A KV-cache usage: each point the highest over its step. A hit rate's evidence
    (`bad: below`): the lowest over its step and across instances, the dip under its floor."""
    end = int(time.time()) - 60
    server = start_prometheus(openmetrics=kv_samples(end))
    settings = Settings.model_validate(
        {"prometheus": {"url": server.url}, "audit": {"path": str(tmp_path / "a.jsonl")}}
    )
    charts = LiveCharts(settings, now=lambda: float(end))
    try:
        data = await charts.query_chart("KV", "max(kv_usage)", (">", 0.9), WINDOWS["15m"], "ratio")
        sampled = await charts.prom().query_range(
            "max(kv_usage)", start=end - 900, end=end, step=step_for(900)
        )
        scalar = await charts.query_chart("S", "scalar(max(kv_usage))", None, 900, None)
        typo = await charts.query_chart("T", "max(kv_usage", None, 900, None)
        hit = await charts.query_chart("Hit", "hit_ratio", ("<", 0.8), WINDOWS["15m"], "ratio")
    finally:
        await charts.aclose()
    # What the chart drew before: one sample per 15 s, and the peak is none of them.
    assert [v for _, v in worst(sampled)] == [0.5] * 61
    assert data.error is None and data.threshold == (">", 0.9)
    # The point whose step holds the peak carries it; the others the fleet's highest, 0.5.
    assert [ts for ts, v in data.points if v == 0.97] == [end - 450], data.points
    assert [v for _, v in data.points].count(0.5) == 60
    assert data.query == "max(kv_usage)"
    assert data.range_query == "max_over_time((max(kv_usage))[15s:1s])"
    # A scalar cannot be a subquery: charted as sampled. A typo: its own parse error.
    assert scalar.error is None and scalar.range_query == "scalar(max(kv_usage))"
    assert {v for _, v in scalar.points} == {0.5}
    assert typo.points == () and typo.error is not None and "parse error" in typo.error
    # Judged against a floor: the one-second dip to 0.3 is drawn, the others the lower 0.9.
    assert hit.error is None and hit.threshold == ("<", 0.8)
    assert hit.range_query == "min_over_time((hit_ratio)[15s:1s])"
    assert [ts for ts, v in hit.points if v == 0.3] == [end - 450], hit.points
    assert [v for _, v in hit.points].count(0.9) == 60


def test_evidence_threshold_follows_the_unhealthy_side() -> None:
    above = EvidenceValue("kv", 0.97, 0.9, "ratio")
    below = EvidenceValue("hit", 0.5, 0.8, "ratio", bad="below")
    assert evidence_threshold(above) == (">", 0.9)
    assert evidence_threshold(below) == ("<", 0.8)
    assert evidence_threshold(EvidenceValue("n", 1, "facts.total", None)) is None
    assert evidence_threshold(EvidenceValue("b", 1, True, None)) is None


def test_value_expr_drops_only_the_trailing_threshold() -> None:
    assert value_expr(rule("max(kv) > 0.9")) == "max(kv)"
    assert value_expr(rule("sum(rate(x[5m])) >= bool 1e3")) == "sum(rate(x[5m]))"
    assert value_expr(rule("a > b")) == "a > b"  # against an expression: charted as it is


def test_periods_from_alerts_split_on_gaps() -> None:
    firing = Series({"alertstate": "firing"}, [(100.0, 1), (115.0, 1), (200.0, 1)])
    pending = Series({"alertstate": "pending"}, [(70.0, 1), (85.0, 1)])
    assert periods_from_alerts([firing, pending], 15) == [
        (70.0, 100.0, "pending"),
        (100.0, 130.0, "firing"),
        (200.0, 215.0, "firing"),
    ]


def test_periods_from_threshold_follow_the_for_duration() -> None:
    points = [(float(t), 9.0 if 30 <= t <= 90 else 1.0) for t in range(0, 150, 15)]
    assert periods_from_threshold(points, rule(for_s=30), 15) == [
        (30.0, 60.0, "pending"),
        (60.0, 105.0, "firing"),
    ]


def result(probe: str, params: dict[str, object], source: str) -> tuple[StepResult, EvidenceValue]:
    item = EvidenceValue("x", 0.5, 0.9, "ratio", None, source)
    step = StepResult("s", "S", "fail", None, None, 0.1, 0.0, probe, params, None, 5.0, (item,))
    return step, item


def test_evidence_query_knows_the_prometheus_probes() -> None:
    assert evidence_query(*result("prometheus.query", {"query": "up"}, "facts.value")) == "up"
    kv = evidence_query(*result("vllm.rates", {"window": "1m"}, "facts.kv_cache_usage"))
    assert kv == "max(vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)"
    assert evidence_query(*result("prometheus.query", {"query": "up"}, "facts.value * 2")) is None
    assert evidence_query(*result("kube.pods", {}, "facts.not_ready_count")) is None


async def test_alert_chart_is_one_request_with_states_and_markers(
    start_prometheus: Callable[..., RunningServer], tmp_path: Path
) -> None:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(rule_file_text(rule()))
    server = start_prometheus(rule_files=[rules_file])
    audit = tmp_path / "audit.jsonl"
    log = AuditLog(audit)
    for transition in ("approved", "started", "succeeded", "verified"):
        log.append(
            action_id="a1", transition=transition, action="set-max-num-seqs", target=POD,
            alert={"name": "Seven", "value": 7},
        )  # fmt: skip
    log.append(action_id="a2", transition="refused", action="rebuild-pod", target=POD,
               alert={"name": "Other"})  # fmt: skip
    settings = Settings.model_validate(
        {"prometheus": {"url": server.url}, "audit": {"path": str(audit)}}
    )
    charts = LiveCharts(settings)
    try:
        seen = []

        async def firing() -> bool:
            seen.append(await charts.alert_chart(rule(), WINDOWS["15m"]))
            return any(state == "firing" for *_, state in seen[-1].periods)

        await eventually(firing, within=30, what="ALERTS{alertname=Seven} firing in the chart")
        before = charts.prom().requests
        data = await charts.alert_chart(rule(), WINDOWS["15m"])
        assert charts.prom().requests - before == 1
    finally:
        await charts.aclose()
    assert data.error is None and data.query == "vector(7)"
    assert data.points and {v for _, v in data.points} == {7.0}  # the value, not the comparison
    assert data.threshold == (">", 5.0)
    assert [m.label for m in data.markers] == ["set-max-num-seqs verified"]
    assert abs(data.markers[0].at - time.time()) < 120
    assert data.end - data.start == 900


async def test_a_dead_prometheus_is_a_chart_that_says_why(tmp_path: Path) -> None:
    from tests.harness.faults import refused_port

    url = f"http://127.0.0.1:{refused_port()}"
    settings = Settings.model_validate(
        {"prometheus": {"url": url, "timeout": 1}, "audit": {"path": str(tmp_path / "a.jsonl")}}
    )
    charts = LiveCharts(settings)
    try:
        data = await charts.query_chart("up", "up", None, 900, None)
    finally:
        await charts.aclose()
    assert data.points == () and data.error is not None and "refused" in data.error
