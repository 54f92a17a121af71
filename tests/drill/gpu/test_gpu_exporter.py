"""The simulated dcgm-exporter: names and labels, memory following vLLM's KV use, faults.

A stub vLLM (`GET /drill/state` with a KV usage the test sets) makes the memory arithmetic
exact; one test binds the real vLLM simulator and one has a real Prometheus scrape the
exporter through the `hang` fault (the scrape-failure drill).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from oncall.drill.gpu_sim.devices import FB_FULL_FRACTION, Gpu, GpuSpec, MemoryModel, PodRef
from oncall.drill.gpu_sim.server import Exporter, build_app
from oncall.drill.netutil import free_loopback_port
from tests.drill.gateway.helpers import (
    REPO_ROOT,
    Metrics,
    module_process,
    scrape,
    serve_app,
    vllm_sim,
)
from tests.harness.processes import eventually
from tests.harness.servers import RunningServer

SPEC = GpuSpec()
MEMORY = MemoryModel()
BASE_MIB = SPEC.context_mib + MEMORY.weights_mib
POOL_MIB = MEMORY.utilization * SPEC.total_mib - BASE_MIB
NAMES = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_XID_ERRORS",
)


@dataclass
class Node:
    url: str
    http: httpx.AsyncClient
    vllm_state: dict[str, Any]

    async def metrics(self) -> Metrics:
        return await scrape(self.http, self.url)

    async def fault(self, **body: Any) -> httpx.Response:
        return await self.http.post(f"{self.url}/drill/fault", json=body)


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    """GPU 0 bound to a stub vLLM (pod ai/vllm-0), GPU 1 bound to a dead port, no pod."""
    state: dict[str, Any] = {"kv_usage": 0.0, "running": 0, "max_num_seqs": 16, "dead": False}

    async def drill_state(request: web.Request) -> web.Response:
        return web.json_response(state)

    stub = web.Application()
    stub.router.add_get("/drill/state", drill_state)
    dead = f"http://127.0.0.1:{free_loopback_port()}"
    async with serve_app(stub) as vllm_url:
        gpus = [
            Gpu("0", "node-1", vllm_url, PodRef("ai", "vllm-0")),
            Gpu("1", "node-1", dead),
        ]
        async with (
            serve_app(build_app(Exporter(gpus))) as url,
            httpx.AsyncClient(trust_env=False, timeout=5) as http,
        ):
            yield Node(url, http, state)


async def test_dcgm_names_types_and_labels(node: Node) -> None:
    metrics = await node.metrics()
    for name in NAMES:
        family = metrics.families[name]
        assert family.type == "gauge"
        assert len(family.samples) == 2
    by_gpu = {s.labels["gpu"]: s.labels for s in metrics.matching("DCGM_FI_DEV_FB_USED")}
    gpu0, gpu1 = by_gpu["0"], by_gpu["1"]
    required = {"gpu", "UUID", "Hostname", "modelName", "namespace", "pod", "container"}
    assert required <= set(gpu0)
    assert (gpu0["namespace"], gpu0["pod"], gpu0["container"]) == ("ai", "vllm-0", "vllm")
    # Unmapped GPUs carry empty pod labels, which Prometheus drops, as with dcgm-exporter.
    assert (gpu1["namespace"], gpu1["pod"], gpu1["container"]) == ("", "", "")
    assert gpu0["Hostname"] == gpu1["Hostname"] == "node-1"
    assert gpu0["modelName"] == "NVIDIA H100 80GB HBM3"
    assert gpu0["UUID"].startswith("GPU-") and gpu0["UUID"] != gpu1["UUID"]


async def test_memory_follows_kv_usage(node: Node) -> None:
    used: dict[float, float] = {}
    for kv in (0.0, 0.5, 1.0):
        node.vllm_state.update(kv_usage=kv, running=8 if kv else 0)
        metrics = await node.metrics()
        fb_used = metrics.value("DCGM_FI_DEV_FB_USED", gpu="0")
        fb_free = metrics.value("DCGM_FI_DEV_FB_FREE", gpu="0")
        assert fb_used + fb_free == SPEC.total_mib
        assert fb_used == pytest.approx(BASE_MIB + kv * POOL_MIB, abs=1)
        used[kv] = fb_used
        util = metrics.value("DCGM_FI_DEV_GPU_UTIL", gpu="0")
        assert (util > 0) == (kv > 0)
    assert used[0.0] < used[0.5] < used[1.0]
    assert used[1.0] / SPEC.total_mib > 0.95  # a full KV cache crosses the 95% alert line
    busy = await node.metrics()
    node.vllm_state.update(kv_usage=0.0, running=0)
    idle = await node.metrics()
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"):
        assert busy.value(name, gpu="0") > idle.value(name, gpu="0")


async def test_unreachable_vllm_means_idle_with_weights(node: Node) -> None:
    metrics = await node.metrics()
    assert metrics.value("DCGM_FI_DEV_FB_USED", gpu="1") == BASE_MIB
    assert metrics.value("DCGM_FI_DEV_GPU_UTIL", gpu="1") == 0
    state = (await node.http.get(f"{node.url}/drill/state")).json()
    assert "unavailable" in " ".join(state["gpus"][1]["notes"])


async def test_fb_full_and_xid_faults(node: Node) -> None:
    assert (await node.fault(fault="fb-full", gpu="0")).status_code == 200
    metrics = await node.metrics()
    used0 = metrics.value("DCGM_FI_DEV_FB_USED", gpu="0")
    assert used0 / SPEC.total_mib > 0.97
    assert used0 == round(FB_FULL_FRACTION * SPEC.total_mib)
    assert metrics.value("DCGM_FI_DEV_FB_USED", gpu="1") == BASE_MIB

    assert (await node.fault(fault="xid")).status_code == 200
    assert (await node.fault(fault="xid", gpu="1", xid=79)).status_code == 200
    metrics = await node.metrics()
    assert metrics.value("DCGM_FI_DEV_XID_ERRORS", gpu="0") == 48
    assert metrics.value("DCGM_FI_DEV_XID_ERRORS", gpu="1") == 79

    assert (await node.fault(fault="none", gpu="0")).status_code == 200
    metrics = await node.metrics()
    assert metrics.value("DCGM_FI_DEV_XID_ERRORS", gpu="0") == 0
    assert metrics.value("DCGM_FI_DEV_FB_USED", gpu="0") == BASE_MIB
    assert metrics.value("DCGM_FI_DEV_XID_ERRORS", gpu="1") == 79


@pytest.mark.parametrize(
    "body",
    [
        {"fault": "melt"},
        {"fault": "fb-full", "gpu": "7"},
        {"fault": "hang", "gpu": "0"},
        {"fault": "xid", "xid": "big"},
        {"fault": "none", "extra": 1},
    ],
)
async def test_bad_fault_requests_are_refused(node: Node, body: dict[str, Any]) -> None:
    response = await node.fault(**body)
    assert response.status_code == 400
    assert (await node.http.get(f"{node.url}/drill/state")).json()["exporter_fault"] == "none"


async def test_error_fault_answers_500(node: Node) -> None:
    await node.fault(fault="error")
    assert (await node.http.get(f"{node.url}/metrics")).status_code == 500
    assert (await node.http.get(f"{node.url}/health")).status_code == 200
    await node.fault(fault="none")
    assert (await node.http.get(f"{node.url}/metrics")).status_code == 200


async def test_hang_fault_never_answers_until_cleared(node: Node) -> None:
    await node.fault(fault="hang")
    with pytest.raises(httpx.ReadTimeout):
        await node.http.get(f"{node.url}/metrics", timeout=0.5)
    waiting = asyncio.create_task(node.http.get(f"{node.url}/metrics", timeout=5))

    async def both_scrapes_held() -> bool:
        # The timed-out first scrape is still held too: the server never gave up on it.
        state = (await node.http.get(f"{node.url}/drill/state")).json()
        return bool(state["hung_scrapes"] == 2)

    await eventually(both_scrapes_held, within=5, what="the second scrape to hang", interval=0.02)
    assert not waiting.done()
    await node.fault(fault="none")
    response = await asyncio.wait_for(waiting, timeout=5)
    assert response.status_code == 200


async def test_real_vllm_kv_use_moves_fb_used(tmp_path: Path) -> None:
    """Bound to the real simulator: a long generation fills KV, and FB_USED follows."""
    kv_args = ("--kv-capacity-tokens", "1024", "--max-model-len", "1024", "--speed", "4")
    with vllm_sim(tmp_path, *kv_args) as vllm:
        gpu_args = ["--hostname", "node-7", "--gpu", f"0={vllm.url}", "--pod", "0=ai/vllm-a"]
        with module_process(tmp_path, "oncall.drill.gpu_sim", *gpu_args) as exporter:
            async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
                idle = (await scrape(http, exporter.url)).value("DCGM_FI_DEV_FB_USED")
                assert idle == BASE_MIB
                body = {
                    "model": "sim/llama",
                    "messages": [{"role": "user", "content": "Write a long story."}],
                    "max_tokens": 900,
                    "ignore_eos": True,
                }
                generation = asyncio.create_task(
                    http.post(f"{vllm.url}/v1/chat/completions", json=body, timeout=60)
                )

                async def memory_grew() -> bool:
                    metrics = await scrape(http, exporter.url)
                    return metrics.value("DCGM_FI_DEV_FB_USED") > idle + 0.1 * POOL_MIB

                try:
                    await eventually(memory_grew, within=10, what="FB_USED to follow KV use")
                    metrics = await scrape(http, exporter.url)
                    assert metrics.value("DCGM_FI_DEV_GPU_UTIL") > 0
                    assert metrics.matching("DCGM_FI_DEV_FB_USED")[0].labels["pod"] == "vllm-a"
                finally:
                    generation.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await generation


def test_process_refuses_non_loopback_vllm() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "oncall.drill.gpu_sim",
            "--port",
            "1",
            "--gpu",
            "0=http://192.168.1.5:8000",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "loopback" in result.stderr


PromStarter = Callable[..., RunningServer]


async def test_prometheus_marks_the_target_down_while_hung(
    node: Node, start_prometheus: PromStarter
) -> None:
    target = node.url.removeprefix("http://")
    prom = start_prometheus(
        scrape_configs=[
            {
                "job_name": "dcgm",
                "scrape_interval": "1s",
                "scrape_timeout": "500ms",
                "static_configs": [{"targets": [target]}],
            }
        ]
    )

    async def up_is(value: float) -> bool:
        response = await node.http.get(
            f"{prom.url}/api/v1/query", params={"query": 'up{job="dcgm"}'}
        )
        result = response.json()["data"]["result"]
        return bool(result) and float(result[0]["value"][1]) == value

    await eventually(lambda: up_is(1), within=15, what="the exporter to be scraped")
    await node.fault(fault="hang")
    await eventually(lambda: up_is(0), within=10, what="up == 0 while /metrics hangs")
    await node.fault(fault="none")
    await eventually(lambda: up_is(1), within=10, what="up == 1 once the hang is cleared")
