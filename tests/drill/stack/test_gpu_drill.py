"""The drill's GPUs end to end: the Helm-default DCGM layout attributes each GPU to its vLLM
pod; GPU memory stays flat while `kv-cache-pressure` fills the KV caches; `gpu-xid` fires
GPUXidError and its checklist proposes rebuilding the pod (RESTART_APP).

Real Prometheus scraping the simulated exporter as the Helm chart's ServiceMonitor does, the
real probes with the drill's settings, and `oncall check` as a person runs it.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from oncall.backends.prometheus import PrometheusClient
from oncall.probes.context import ProbeContext
from oncall.probes.gpu import DevicesParams, run_devices
from oncall.probes.kube import PodsParams, run_pods
from oncall.settings import load_settings
from oncall_drill.gpu_sim.layout import EXPORTER_TARGET_LABELS
from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import Drill, start_drill
from tests.harness.waiting import eventually


async def _devices_and_pods(drill: Drill) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    settings = load_settings(config=drill.directory / "oncall.yaml").settings
    async with ProbeContext(settings) as ctx:
        gpus = await run_devices(ctx, DevicesParams(node="gpu-node-1"))
        pods = await run_pods(ctx, PodsParams(selector="app=vllm"))
    return gpus["devices"], pods["pods"]


async def test_helm_default_layout_attributes_each_gpu_to_its_vllm_pod(drill: Drill) -> None:
    async def every_pod_on_a_gpu() -> bool:
        devices, pods = await _devices_and_pods(drill)
        running = {p["name"] for p in pods if p["ready"]}
        on_gpus = [p["pod"] for d in devices for p in d["pods"]]
        return len(running) == 2 and sorted(on_gpus) == sorted(running)

    await eventually(every_pod_on_a_gpu, within=30, what="each vLLM pod on its own GPU")
    devices, _ = await _devices_and_pods(drill)
    assert [d["index"] for d in devices] == [0, 1, 2, 3]
    held = [d for d in devices if d["pods"]]
    assert len(held) == 2 and all(len(d["pods"]) == 1 for d in held)
    for device in held:
        assert device["pods"][0]["namespace"] == "ai"
        assert device["memory_used_ratio"] > 0.92  # vLLM's pre-allocation at 0.92
    # What Prometheus stores: the workload renamed exported_*, `pod` the exporter's own.
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:
        samples = await prom.query("DCGM_FI_DEV_FB_USED")
    assert {s.labels["pod"] for s in samples} == {EXPORTER_TARGET_LABELS["pod"]}
    assert sorted(
        s.labels["exported_pod"] for s in samples if "exported_pod" in s.labels
    ) == sorted(p["pod"] for d in held for p in d["pods"])


async def test_gpu_memory_stays_flat_under_kv_cache_pressure(drill: Drill) -> None:
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:

        async def fb_used() -> dict[str, float]:
            samples = await prom.query("DCGM_FI_DEV_FB_USED")
            return {s.labels["gpu"]: s.value for s in samples}

        async def kv_full() -> bool:
            samples = await prom.query("max(vllm:kv_cache_usage_perc)")
            return bool(samples) and samples[0].value > 0.9

        before = await fb_used()
        assert len(before) == 4
        drill.cli("inject", "kv-cache-pressure")
        try:
            await eventually(kv_full, within=60, what="the KV caches to fill")
            # Every scrape since the fault: the framebuffer did not move on any GPU.
            spread = await prom.query(
                "max_over_time(DCGM_FI_DEV_FB_USED[15s]) - min_over_time(DCGM_FI_DEV_FB_USED[15s])"
            )
            assert {s.labels["gpu"]: s.value for s in spread} == dict.fromkeys(before, 0.0)
            assert await fb_used() == before
            # Meanwhile the latency checklist judges the pressure where vLLM shows it.
            config = str(drill.directory / "oncall.yaml")

            async def kv_step_fails() -> bool:
                result = await asyncio.to_thread(
                    run_oncall, "--config", config, "check", "LLMHighP99Latency", "-o", "json",
                    timeout=60,
                )  # fmt: skip
                steps = {s["id"]: s["status"] for s in json.loads(result.stdout)["steps"]}
                return bool(steps["kv_cache"] == "fail")

            await eventually(kv_step_fails, within=60, what="the kv_cache step failing")
        finally:
            drill.cli("clear")


async def test_gpu_xid_fires_and_its_checklist_proposes_rebuilding_the_pod(drill: Drill) -> None:
    config = str(drill.directory / "oncall.yaml")
    async with PrometheusClient(drill.prometheus, timeout=2) as prom:

        async def firing() -> bool:
            samples = await prom.query('ALERTS{alertname="GPUXidError",alertstate="firing"}')
            return any(s.labels.get("gpu") == "0" for s in samples)

        drill.cli("inject", "gpu-xid")
        try:
            await eventually(firing, within=30, what="GPUXidError firing for GPU 0")
            result = await asyncio.to_thread(
                run_oncall, "--config", config, "check", "GPUXidError", "-o", "json", timeout=60
            )
            assert result.code == 1, result.stderr
            report = json.loads(result.stdout)
            steps = {s["id"]: s for s in report["steps"]}
            assert steps["xid"]["status"] == "fail"
            assert "Xid 13" in steps["xid"]["summary"]
            assert steps["restart_app"]["status"] == "fail"
            assert steps["node_action"]["status"] == "ok"
            devices, _ = await _devices_and_pods(drill)
            gpu0_pod = devices[0]["pods"][0]["pod"]
            proposals = {p["id"]: p for p in report["proposals"]}
            assert set(proposals) == {"rebuild-xid-pod"}
            assert proposals["rebuild-xid-pod"]["error"] is None
            assert proposals["rebuild-xid-pod"]["params"]["pod"] == gpu0_pod

            # Xid 79 (fallen off the bus): the node owner's reboot, named; nothing proposed.
            exporter = f"http://127.0.0.1:{drill.state['ports']['gpu']}"
            fault = {"fault": "xid", "gpu": "0", "xid": 79}
            async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                assert (await http.post(f"{exporter}/drill/fault", json=fault)).status_code == 200
            latest: dict[str, Any] = {}

            async def reads_79() -> bool:
                run = await asyncio.to_thread(
                    run_oncall, "--config", config, "check", "GPUXidError", "-o", "json", timeout=60
                )
                latest.update(json.loads(run.stdout))
                return any(s["id"] == "xid" and "Xid 79" in s["summary"] for s in latest["steps"])

            await eventually(reads_79, within=30, what="the checklist to read Xid 79")
            steps = {s["id"]: s for s in latest["steps"]}
            assert steps["restart_app"]["status"] == "ok"
            assert steps["node_action"]["status"] == "fail"
            assert "RESTART_BM" in steps["node_action"]["summary"]
            assert latest["proposals"] == []
        finally:
            drill.cli("clear")

        async def resolved() -> bool:
            return not await firing()

        await eventually(resolved, within=30, what="GPUXidError resolved after clear")


async def test_gpu_sharing_layout_through_the_drill_names_both_pods(tmp_path: Path) -> None:
    """`drill up --dcgm-layout honor-labels,hostname,virtual-gpus`: both vLLM pods time-share
    GPU 0; the probe reads the per-pod rows and GPUMemoryHigh's checklist blames the sharing,
    not the configuration."""
    layout = "honor-labels,hostname,virtual-gpus"
    other = start_drill(tmp_path / "drill", "--dcgm-layout", layout)
    try:

        async def both_on_gpu0() -> bool:
            devices, _ = await _devices_and_pods(other)
            return len(devices[0]["pods"]) == 2

        await eventually(both_on_gpu0, within=30, what="both vLLM pods on GPU 0")
        devices, _ = await _devices_and_pods(other)
        shares = [p["memory_used_mib"] for p in devices[0]["pods"]]
        assert len(shares) == 2 and all(share > 0.9 * 81079 for share in shares)
        assert devices[0]["memory_used_ratio"] == 1.0  # capped at the card, not the sum
        assert all(d["pods"] == [] for d in devices[1:])
        async with PrometheusClient(other.prometheus, timeout=2) as prom:
            rows = await prom.query('DCGM_FI_DEV_FB_USED{gpu="0"}')
        assert all("hostname" in s.labels and "Hostname" not in s.labels for s in rows)
        assert sorted(s.labels["pod"] for s in rows) == sorted(
            [EXPORTER_TARGET_LABELS["pod"], *(p["pod"] for p in devices[0]["pods"])]
        )  # honorLabels: true: the pod rows keep `pod`; the device row has the exporter's
        config = str(other.directory / "oncall.yaml")
        result = await asyncio.to_thread(
            run_oncall, "--config", config, "check", "GPUMemoryHigh", "-o", "json", timeout=60
        )
        steps = {s["id"]: s for s in json.loads(result.stdout)["steps"]}
        assert steps["gpu_memory"]["status"] == "fail"
        assert steps["sharing"]["status"] == "fail"
        assert "pods ai/vllm-" in steps["sharing"]["summary"]
        assert steps["utilization"]["status"] == "ok"  # 0.92: the configuration is not it
        assert json.loads(result.stdout)["proposals"] == []
    finally:
        run_oncall("drill", "down", "--dir", str(other.directory), timeout=60)
