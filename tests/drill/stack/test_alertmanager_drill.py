"""The drill's Prometheus sends its alerts to the drill's real Alertmanager, and the drill's
settings point oncall at it: a firing alert is held there, and `oncall alerts` says so."""

from __future__ import annotations

import json
import math

import httpx
import yaml

from oncall.backends.prometheus import PrometheusClient
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.drill.stack.test_scenarios import SCENARIOS, crossed, read
from tests.harness.waiting import eventually

SCENARIO = "gateway-unavailable"
ALERT = "AIServiceUnavailable"


async def test_a_firing_alert_reaches_the_drills_alertmanager(drill: Drill) -> None:
    am = str(drill.state["urls"]["alertmanager"])
    config = drill.directory / "oncall.yaml"
    assert yaml.safe_load(config.read_text())["alertmanager"]["url"] == am
    signal = SCENARIOS[SCENARIO].signal
    assert signal is not None
    async with (
        PrometheusClient(drill.prometheus, timeout=2) as prom,
        httpx.AsyncClient(base_url=am, timeout=5, trust_env=False) as client,
    ):
        status = (await client.get("/api/v2/status")).json()
        assert status["cluster"]["status"] == "disabled"  # gossip off: nothing on 0.0.0.0:9094
        assert "inhibit_rules" in status["config"]["original"]

        async def held() -> bool:
            alerts = (await client.get("/api/v2/alerts")).json()
            return any(a["labels"]["alertname"] == ALERT for a in alerts)

        async def healthy() -> bool:
            value = await read(prom, signal)
            return not math.isnan(value) and not crossed(signal, value)

        await eventually(healthy, within=60, what=f"{SCENARIO}: healthy before the fault")
        drill.cli("inject", SCENARIO)
        try:
            await eventually(held, within=60, what=f"{ALERT} held by the drill's Alertmanager")
            result = run_oncall("alerts", "-o", "json", "--config", str(config), timeout=60)
            body = json.loads(result.stdout)
            assert body["alertmanager"] == am
            (alert,) = [a for a in body["alerts"] if a["name"] == ALERT]
            assert alert["state"] == "firing", alert
            assert alert["alertmanager"]["active"] >= 1
            assert alert["alertmanager"]["unknown"] == 0
        finally:
            drill.cli("clear")
        await eventually(healthy, within=90, what=f"{SCENARIO}: back after clear")
