"""Every scenario trips the signal behind its golden alert, and `clear` brings it back.

Seen the way an alert sees it: a Prometheus query over what Prometheus scraped from the
simulators and the real Redis exporter, while the drill's load generator runs.
"""

from __future__ import annotations

import math

import pytest

from oncall.backends.prometheus import PrometheusClient
from oncall.drill.scenarios import Signal, all_scenarios
from tests.drill.stack.conftest import Drill
from tests.harness.processes import eventually

SCENARIOS = {name: s for name, s in all_scenarios().items() if s.signal is not None}


def crossed(signal: Signal, value: float) -> bool:
    return value > signal.threshold if signal.op == ">" else value < signal.threshold


async def read(prom: PrometheusClient, signal: Signal) -> float:
    samples = await prom.query(signal.query)
    return samples[0].value if samples else math.nan


def test_every_scenario_names_an_alert_and_a_signal() -> None:
    scenarios = all_scenarios()
    assert {
        "healthy", "kv-cache-pressure", "gpu-oom", "vector-search-slow", "gateway-unavailable",
        "prompt-rejections", "redis-hit-rate-collapse", "model-stuck", "scrape-failure",
    } <= set(scenarios)  # fmt: skip
    for name, scenario in scenarios.items():
        if name != "healthy":
            assert scenario.alert and scenario.signal and scenario.inject, name


async def test_healthy_drill_crosses_no_threshold(drill: Drill) -> None:
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:

        async def all_healthy() -> bool:
            for scenario in SCENARIOS.values():
                assert scenario.signal is not None
                value = await read(prom, scenario.signal)
                if math.isnan(value) or crossed(scenario.signal, value):
                    return False
            return True

        await eventually(all_healthy, within=60, what="every golden signal on its healthy side")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario_crosses_and_clear_brings_it_back(drill: Drill, name: str) -> None:
    signal = SCENARIOS[name].signal
    assert signal is not None
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:

        async def healthy() -> bool:
            value = await read(prom, signal)
            return not math.isnan(value) and not crossed(signal, value)

        async def tripped() -> bool:
            return crossed(signal, await read(prom, signal))

        await eventually(healthy, within=60, what=f"{name}: healthy before the fault")
        drill.cli("inject", name)
        try:
            await eventually(
                tripped, within=60, what=f"{name}: {signal.query} {signal.op} {signal.threshold}"
            )
        finally:
            drill.cli("clear")
        await eventually(healthy, within=60, what=f"{name}: back after clear")
