"""Engine deaths and a hung engine end to end, as a real vLLM + kube-state-metrics stack plays
them: `LLMOutOfMemory` fires in Prometheus for a GPU OOM while serving (vLLM exits 0: reason
Completed, vllm issue #48966) and for a host OOM
(OOMKilled), and `oncall check` tells them apart from the previous container's log; a hung
EngineCore keeps /health at 200 and `LLMHighP99Latency`'s checklist still finds the pod."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from oncall.backends.prometheus import PrometheusClient
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.harness.waiting import eventually

#: scenario -> (last terminated reason, failing step, what its summary says, proposal values)
DEATHS: dict[str, tuple[str, str, str, list[dict[str, Any]]]] = {
    "gpu-oom": (
        "Completed",
        "gpu_oom",
        "GPU out of memory: (EngineCore_DP0 pid=",
        [{"id": "lower-max-num-seqs", "deployment": "vllm", "value": 128}],
    ),
    "host-oom": (
        "OOMKilled",
        "host_oom",
        "host memory, not GPU: the kernel OOM-killed vllm-",
        [],
    ),
}


async def check(drill: Drill, alert: str) -> dict[str, Any]:
    config = str(drill.directory / "oncall.yaml")
    result = await asyncio.to_thread(
        run_oncall, "--config", config, "check", alert, "-o", "json", timeout=60
    )
    assert result.code in (0, 1, 3), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


async def firing_reasons(prom: PrometheusClient) -> set[str]:
    samples = await prom.query('ALERTS{alertname="LLMOutOfMemory",alertstate="firing"}')
    return {s.labels.get("reason", "") for s in samples}


@pytest.mark.parametrize("scenario", sorted(DEATHS))
async def test_engine_death_fires_and_the_log_gives_the_verdict(
    drill: Drill, scenario: str
) -> None:
    reason, step, says, proposals = DEATHS[scenario]
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:
        await eventually(
            lambda: _none_firing(prom), within=60, what=f"{scenario}: no LLMOutOfMemory before"
        )
        drill.cli("inject", scenario)
        try:
            await eventually(
                lambda: _fires_with(prom, reason),
                within=60,
                what=f"{scenario}: LLMOutOfMemory firing with reason {reason}",
            )
            seen: dict[str, Any] = {}

            async def decided() -> bool:
                seen.update(await check(drill, "LLMOutOfMemory"))
                steps = {s["id"]: s for s in seen["steps"]}
                return bool(steps[step]["status"] == "fail")

            await eventually(decided, within=60, what=f"{scenario}: the {step} verdict")
        finally:
            drill.cli("clear")
        await eventually(
            lambda: _none_firing(prom), within=90, what=f"{scenario}: resolved after clear"
        )
    steps = {s["id"]: s for s in seen["steps"]}
    assert says in steps[step]["summary"]
    verdicts = {"gpu_oom", "startup_memory", "host_oom", "other_crash"}
    assert {s for s in verdicts if steps[s]["status"] == "fail"} == {step}
    if scenario == "host-oom":
        assert "at its memory limit 64Gi" in steps[step]["summary"]
        assert "torch.OutOfMemoryError" not in json.dumps(steps["gpu_oom"]["facts"]["lines"])
    else:
        assert "torch.OutOfMemoryError: CUDA out of memory" in steps[step]["summary"]
        assert steps[step]["facts"]["terminated_exit_code"] == 0
        assert steps["startup_memory"]["status"] == "ok"
    got = [{"id": p["id"], **p["params"]} for p in seen["proposals"]]
    assert got == proposals
    assert all(p["error"] is None for p in seen["proposals"])


async def _none_firing(prom: PrometheusClient) -> bool:
    return not await firing_reasons(prom)


async def _fires_with(prom: PrometheusClient, reason: str) -> bool:
    return reason in await firing_reasons(prom)


async def test_hung_engine_keeps_health_200_and_the_checklist_finds_it(drill: Drill) -> None:
    drill.cli("inject", "model-hung")
    try:
        seen: dict[str, Any] = {}

        async def found() -> bool:
            seen.update(await check(drill, "LLMHighP99Latency"))
            steps = {s["id"]: s for s in seen["steps"]}
            token_rate = steps["token_rate"]
            # Stalled needs two scrapes with no token while requests run or wait: the step can
            # fail on the fleet's low rate a run before the hung pod is named.
            return bool(token_rate["status"] == "fail" and (token_rate["facts"] or {}).get(
                "stalled_pods"))  # fmt: skip

        await eventually(found, within=90, what="token_rate naming the hung engines")
        async with httpx.AsyncClient(timeout=5) as client:
            health = await client.get(f"{drill.state['urls']['vllm']}/health")
    finally:
        drill.cli("clear")
    assert health.status_code == 200  # the API server lives; only the core is hung
    steps = {s["id"]: s for s in seen["steps"]}
    assert steps["token_rate"]["facts"]["stalled_pods"]
    assert "hung engine, /health still 200" in steps["token_rate"]["summary"]
    (rebuild,) = [p for p in seen["proposals"] if p["id"] == "rebuild-stuck-pod"]
    assert rebuild["params"]["pod"] in steps["token_rate"]["facts"]["stalled_pods"]
