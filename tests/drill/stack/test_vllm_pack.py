"""The gateway-free `vllm` pack in the drill: its alerts fire under `kv-cache-pressure`,
`model-stuck` and `model-hung`, as Prometheus evaluates them from what it scraped of the
simulated vLLM pods and kube-state-metrics; and the `--max-num-seqs` change the
LLMHighP99Latency checklist proposes under `kv-cache-pressure`, applied as a Deployment patch
and rollout, brings back the signal the checklist judged on (no preemptions, KV cache under
90%).

Each test is one inject/clear cycle on the shared drill (run one at a time: ~80 s each).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from oncall.backends.prometheus import PrometheusClient
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import as_asked, remediate
from tests.drill.stack.test_remediation_actions import pod_caps
from tests.harness.waiting import eventually


async def firing(prom: PrometheusClient, alert: str) -> bool:
    """Prometheus' own rule state (the drill deploys alerts/vllm.yaml): `ALERTS` says firing."""
    samples = await prom.query(f'ALERTS{{alertname="{alert}", alertstate="firing", pack="vllm"}}')
    return bool(samples)


async def check(drill: Drill, alert: str) -> dict[str, Any]:
    """`oncall check ALERT -o json` with the drill's settings."""
    config = str(drill.directory / "oncall.yaml")
    result = await asyncio.to_thread(
        run_oncall, "--config", config, "check", alert, "-o", "json", timeout=60
    )
    assert result.code in (0, 1, 3), result.stderr  # never a crash or a usage error
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def step_of(report: dict[str, Any], step: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in report["steps"] if s["id"] == step)
    return found


@asynccontextmanager
async def fired_by(
    drill: Drill, prom: PrometheusClient, alert: str, fault: str
) -> AsyncIterator[None]:
    """`alert` inactive first; then `fault` injected, until the alert fires; cleared on the way
    out, whatever happened inside."""
    await eventually(lambda: _not(firing(prom, alert)), within=90, what=f"{alert} inactive before")
    drill.cli("inject", fault)
    try:
        await eventually(
            lambda: firing(prom, alert), within=90, what=f"{alert} firing under {fault}"
        )
        yield
    finally:
        drill.cli("clear")


async def test_vllm_pack_fires_under_model_stuck(drill: Drill) -> None:
    async with (
        PrometheusClient(drill.prometheus, timeout=2) as prom,
        fired_by(drill, prom, "VllmInterTokenLatencyP99High", "model-stuck"),
    ):
        pass  # fired_by waits for both: inactive before, firing under the fault


async def test_vllm_pack_names_the_hung_pods_under_model_hung(drill: Drill) -> None:
    """A hung EngineCore keeps /health at 200 and its gauges frozen: VllmEngineHung fires for
    each vLLM pod (the fault hangs every Ready pod), its $value the requests stuck there."""
    async with (
        PrometheusClient(drill.prometheus, timeout=2) as prom,
        fired_by(drill, prom, "VllmEngineHung", "model-hung"),
    ):
        samples = await prom.query('ALERTS{alertname="VllmEngineHung", alertstate="firing"}')
        pods = {s.labels["pod"] for s in samples}
        assert pods and all(pod.startswith("vllm-") for pod in pods), pods
        stuck = await prom.query(
            "sum by (pod) (vllm:num_requests_running) + sum by (pod) (vllm:num_requests_waiting)"
        )
        assert all(s.value > 0 for s in stuck if s.labels["pod"] in pods)


async def test_kv_pressure_fires_the_pack_and_the_proposed_max_num_seqs_recovers(
    drill: Drill, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    action_id: str | None = None
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:
        try:
            async with fired_by(drill, prom, "VllmKVCacheSaturated", "kv-cache-pressure"):
                proposal: dict[str, Any] = {}

                async def judged_failing() -> bool:
                    report = await check(drill, "LLMHighP99Latency")
                    if step_of(report, "kv_cache")["status"] != "fail":
                        return False
                    proposals = {p["id"]: p for p in report["proposals"]}
                    proposal.update(proposals["lower-max-num-seqs-kv"])
                    return True

                await eventually(judged_failing, within=60, what="the kv_cache step failing")
                assert proposal["error"] is None, proposal
                value = int(proposal["params"]["value"])
                assert 1 <= value < 64  # half of what runs per pod: the drill's pool holds ~15

                run = await asyncio.to_thread(
                    remediate,
                    drill,
                    audit,
                    "set-max-num-seqs",
                    "vllm",
                    str(value),
                    answers=[("to confirm", as_asked("vllm"))],
                )
                assert run.code == 0, run.output
                found = re.search(r"rollback (\w+)", run.output)
                assert found, run.output
                action_id = found.group(1)

                async def every_pod_runs_the_new_cap() -> bool:
                    # The drill rewrites its scrape targets a moment after the rollout's last
                    # old pod stops: until then the file may still name a stopped pod.
                    try:
                        return set(await asyncio.to_thread(pod_caps, drill)) == {value}
                    except OSError:
                        return False

                await eventually(
                    every_pod_runs_the_new_cap, within=30, what=f"every pod at {value}"
                )

                last_step: dict[str, Any] = {}

                async def recovered() -> bool:
                    report = await check(drill, "LLMHighP99Latency")
                    last_step.update(step_of(report, "kv_cache"))
                    return bool(last_step["status"] in ("ok", "warn"))

                # The signal the step judged: preemptions over the 20 s window back to 0, the
                # KV cache under 90%; requests wait instead (a warn), as vLLM trades them.
                await eventually(
                    recovered,
                    within=90,
                    what="the kv_cache step recovering",
                    seen=lambda: (last_step.get("status"), last_step.get("summary")),
                )
                await eventually(
                    lambda: _not(firing(prom, "VllmKVCacheSaturated")),
                    within=90,
                    what="VllmKVCacheSaturated resolving after the change",
                )
        finally:
            if action_id is not None:
                back = await asyncio.to_thread(
                    remediate, drill, audit, "rollback", action_id,
                    answers=[("to confirm", as_asked("vllm"))],
                )  # fmt: skip
                assert back.code == 0, back.output


async def _not(condition: Any) -> bool:
    return not await condition
