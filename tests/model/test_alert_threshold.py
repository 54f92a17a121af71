"""The threshold the board shows next to an alert's value, read from its PromQL expression."""

from __future__ import annotations

from pathlib import Path

import pytest

from oncall.alerts.loader import load_rule_files
from oncall.model.alerts import threshold_of

ROOT = Path(__file__).resolve().parents[2]

#: Every shipped golden alert, read by hand from alerts/*.yaml.
SHIPPED = {
    "LLMHighP99Latency": (">", 1.2),
    "VectorSearchP999High": (">", 0.2),
    "LLMOutOfMemory": None,  # its comparisons sit inside `max by (...) (...)`
    "AIServiceUnavailable": (">", 0.01),
    "PromptRejectionRateHigh": (">", 0.05),
    "LatencyP95High": (">", 1.0),
    "ErrorRateHigh": (">", 0.005),
    "GPUMemoryHigh": (">", 0.95),
    "GPUXidError": (">", 0.0),  # `max by (...) (xid) > 0 and ...`: the last Xid above 0
    "RedisHitRateLow": ("<", 0.8),  # `... < 0.8 and (...)`: the first top-level comparison
    "PrometheusScrapeFailing": (">", 3.0),
    "VllmInterTokenLatencyP99High": (">", 0.2),
    "OncallServeDown": ("==", 0.0),  # `sum (up) == 0 or (absent(...) and on () ...)`
    "OncallServeOverloaded": (">", 0.0),
    "OncallServeVerdictStoreErrors": (">", 0.0),
    "VllmTTFTP99High": (">", 2.0),
    "VllmQueueTimeP99High": (">", 0.5),
    "VllmKVCacheSaturated": (">", 0.9),  # `max(...) > 0.9 and on (...) ...`
    "VllmEngineHung": (">", 0.0),  # `running + waiting > 0 and on (...) rate(...) == 0`
    "VllmEngineRestarted": None,
    "VllmRequestErrorsHigh": (">", 0.05),
}


def test_every_shipped_alerts_threshold() -> None:
    rules = load_rule_files(sorted((ROOT / "alerts").glob("*.yaml"))).rules
    assert {r.name: r.threshold for r in rules} == SHIPPED


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("up == 0", ("==", 0.0)),
        ("x >= bool 1e3", (">=", 1000.0)),
        ("x < -.5", ("<", -0.5)),
        ("x > y", None),  # against another series
        ("x > 2 * y", None),  # against an expression, not a number
        ('rate(x{code=~"5..", a!="1"}[5m]) > 0.1', (">", 0.1)),
        ('sum(x{path=">2"}) < 7', ("<", 7.0)),  # quoted text is not an operator
        ("(x > 5) and y", None),
        ("x != y > 3", (">", 3.0)),
        ("x # alert when > 9\n  < 4", ("<", 4.0)),  # comments are skipped
        ("x>=(y)", None),
        ("vector(1)", None),
        ("x > 1.5e", None),  # not a number
    ],
)
def test_threshold_of(expr: str, expected: tuple[str, float] | None) -> None:
    assert threshold_of(expr) == expected
