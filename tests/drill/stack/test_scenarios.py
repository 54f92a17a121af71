"""Every scenario trips the signal behind its golden alert, its alert's checklist finds it, and
`clear` brings it back.

The signal is seen the way an alert sees it: a Prometheus query over what Prometheus scraped
from the simulators and the real Redis exporter, while the drill's load generator runs. The
checklist is `oncall check ALERT -o json` with the drill's settings (real clients, real
backends): the intended step fails and the intended remediation is proposed.
"""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from oncall.backends.prometheus import PrometheusClient
from oncall_drill.scenario_catalog import Signal, all_scenarios
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.harness.waiting import eventually

SCENARIOS = {name: s for name, s in all_scenarios().items() if s.signal is not None}

#: scenario -> (the checklist step that must fail, the remediation it must propose or None).
FINDINGS: dict[str, tuple[str, str | None]] = {
    "kv-cache-pressure": ("kv_cache", "lower-max-num-seqs-kv"),
    "model-stuck": ("token_rate", "rebuild-stuck-pod"),
    "model-hung": ("token_rate", "rebuild-stuck-pod"),
    "gpu-oom": ("gpu_oom", "lower-max-num-seqs"),
    "host-oom": ("host_oom", None),
    "gateway-unavailable": ("still_undegraded", "degrade"),
    "vector-search-slow": ("rag_still_on", "rag-off"),
    "prompt-rejections": ("policy_ratio", None),
    "redis-hit-rate-collapse": ("hit_rate", None),
    "scrape-failure": ("failed_scrapes", None),
    "gpu-xid": ("restart_app", "rebuild-xid-pod"),
    "pending": ("scheduling", None),
}
#: scenario -> what the failing step's summary must say.
SAYS = {
    "pending": "Pending for want of a GPU (no node has the nvidia.com/gpu it requests free",
}
#: Rule files a team would bring for a scenario's alert: kube-prometheus' own KubePodNotReady
#: (verbatim), evaluated by the app over the drill's kube-state-metrics series.
KUBE_PROMETHEUS = (
    Path(__file__).resolve().parents[3]
    / "fixtures" / "rules" / "kube-prometheus" / "kubernetesControlPlane-prometheusRule.yaml"
)  # fmt: skip
RULE_FILES = {"pending": [KUBE_PROMETHEUS]}


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
        "host-oom", "model-hung",
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
            await eventually(
                lambda: checklist_finds(drill, name),
                within=60,
                what=f"{name}: `oncall check {SCENARIOS[name].alert}` finds {FINDINGS[name]}",
            )
        finally:
            drill.cli("clear")
        await eventually(healthy, within=60, what=f"{name}: back after clear")


async def checklist_finds(drill: Drill, scenario: str) -> bool:
    """`oncall check ALERT -o json` shows the intended failing step and proposal."""
    alert = SCENARIOS[scenario].alert
    assert alert is not None
    step, proposal = FINDINGS[scenario]
    config = str(drill.directory / "oncall.yaml")
    if scenario in RULE_FILES:
        settings = yaml.safe_load((drill.directory / "oncall.yaml").read_text())
        settings.setdefault("alerts", {})["files"] = [str(p) for p in RULE_FILES[scenario]]
        config = str(drill.directory / f"oncall-{scenario}.yaml")
        await asyncio.to_thread(Path(config).write_text, yaml.safe_dump(settings))
    result = await asyncio.to_thread(
        run_oncall, "--config", config, "check", alert, "-o", "json", timeout=60
    )
    assert result.code in (0, 1, 3), result.stderr  # never a crash or a usage error
    report: dict[str, Any] = json.loads(result.stdout)
    statuses = {s["id"]: s["status"] for s in report["steps"]}
    assert step in statuses, f"{alert}'s runbook has no step {step}"
    if statuses[step] != "fail":
        return False
    assert result.code == 1
    summary = next(s["summary"] for s in report["steps"] if s["id"] == step)
    assert SAYS.get(scenario, "") in summary, summary
    proposed = {p["id"]: p for p in report["proposals"]}
    if proposal is not None:
        assert proposal in proposed, f"{step} failed but proposed {sorted(proposed)}"
        assert proposed[proposal]["error"] is None, proposed[proposal]
    return True
