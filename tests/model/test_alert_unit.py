"""The unit the board shows an alert's value and threshold in, from its expression or a `unit`
annotation: seconds for `*_seconds` series, a percentage for ratios."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncall.alerts.loader import load_rule_files
from oncall.model.alerts import unit_of
from oncall.tui.format import alert_value

ROOT = Path(__file__).resolve().parents[2]

#: Every shipped golden alert, read by hand from alerts/*.yaml.
SHIPPED = {
    "LLMHighP99Latency": "s",
    "VectorSearchP999High": "s",
    "LLMOutOfMemory": None,  # a restart count
    "AIServiceUnavailable": "%",
    "PromptRejectionRateHigh": "%",
    "LatencyP95High": "s",
    "ErrorRateHigh": "%",
    "GPUMemoryHigh": "%",
    "GPUXidError": None,  # the last Xid code
    "RedisHitRateLow": "%",
    "PrometheusScrapeFailing": None,  # failed scrapes, a count
    "VllmInterTokenLatencyP99High": "s",
    "OncallServeDown": None,
    "OncallServeOverloaded": None,
    "OncallServeVerdictStoreErrors": None,
    "VllmTTFTP99High": "s",
    "VllmQueueTimeP99High": "s",
    "VllmKVCacheSaturated": "%",
    "VllmEngineHung": None,  # requests stuck, a count
    "VllmEngineRestarted": None,
    "VllmRequestErrorsHigh": "%",
}


def test_every_shipped_alerts_unit() -> None:
    rules = load_rule_files(sorted((ROOT / "alerts").glob("*.yaml"))).rules
    assert {r.name: r.unit for r in rules} == SHIPPED


@pytest.mark.parametrize(
    ("expr", "annotations", "unit"),
    [
        ("histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket[1m]))) > 1", {}, "s"),
        ("rate(x_seconds_sum[5m]) / rate(x_seconds_count[5m]) > 2", {}, "s"),  # a mean, not a ratio
        ("time() - last_success_timestamp_seconds > 300", {}, "s"),
        ("rate(process_cpu_seconds_total[1m]) > 3", {}, None),  # cores, not seconds
        ("vllm:kv_cache_usage_perc > 0.9", {}, "%"),
        ("sum(rate(a[1m])) / sum(rate(b[1m])) > 0.01", {}, "%"),
        ('sum(rate(x{path="/a/b"}[5m])) > 1', {}, None),  # a slash in a matcher is no division
        ("up == 0", {}, None),
        ("x # a / b\n > 1", {}, None),  # nor in a comment
        ("increase(restarts_total[5m]) > 0", {"unit": "s"}, "s"),  # the annotation wins
        ("a / b > 0.5", {"unit": "none"}, None),
        ("a / b > 0.5", {"unit": "%"}, "%"),
    ],
)
def test_unit_of(expr: str, annotations: dict[str, str], unit: str | None) -> None:
    assert unit_of(expr, annotations) == unit


@pytest.mark.parametrize(
    ("value", "threshold", "unit", "shown"),
    [
        (9.9, (">", 1.2), "s", "9.9 s > 1.2 s"),
        (0.3, (">", 0.01), "%", "30% > 1%"),
        (0.0909, (">", 0.05), "%", "9.09% > 5%"),
        (None, (">", 0.95), "%", "> 95%"),
        (2.0, (">", 1.0), None, "2 > 1"),
        (0.25, None, "s", "0.25 s"),
        (float("nan"), (">", 0.5), "%", "nan > 50%"),
    ],
)
def test_alert_value_shows_the_unit(
    value: float | None, threshold: tuple[str, float] | None, unit: str | None, shown: str
) -> None:
    assert alert_value(value, threshold, unit) == shown
