"""Each drill DCGM layout, scraped by a real Prometheus as the drill scrapes it
(`Layout.scrape_config`: the exporter pod's target labels, `honor_labels` per layout), is read
right by the `gpu.devices` probe: every GPU attributed to its pod, device totals not mixed
with per-pod rows, MIG instances apart, either node label."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import httpx
import pytest
import pytest_asyncio

from oncall_drill.gpu_sim.devices import GpuSpec, PodClaim, Slot, vllm_used_mib
from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.gpu_sim.podresources import static_pods
from oncall_drill.gpu_sim.server import Exporter, build_app
from tests.drill.gateway.helpers import serve_app
from tests.harness.servers import prometheus_server
from tests.probes.dcgm_scraped import Scraped, wait_scraped

SPEC = GpuSpec()
LAYOUTS = ("helm", "honor-labels", "hostname", "virtual-gpus", "mig")
#: Two pods per node: at 0.92 and at 0.45 of their GPU (or MIG instance).
CLAIMS = [
    PodClaim("ai", "vllm-a", gpu_memory_utilization=0.92),
    PodClaim("ai", "vllm-b", gpu_memory_utilization=0.45),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def scraped(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Scraped]:
    async with AsyncExitStack() as stack:
        jobs = []
        for name in LAYOUTS:
            layout = Layout.parse(name)
            exporter = Exporter(f"node-{name}", 2, pods=static_pods(CLAIMS), layout=layout)
            url = await stack.enter_async_context(serve_app(build_app(exporter)))
            jobs.append(layout.scrape_config(f"dcgm-{name}", url.removeprefix("http://")))
        http = await stack.enter_async_context(httpx.AsyncClient(trust_env=False, timeout=5))
        directory = tmp_path_factory.mktemp("dcgm-layouts-drill")
        prom = stack.enter_context(prometheus_server(directory, scrape_configs=jobs))
        yield await wait_scraped(
            http, prom, "sum(up)", len(LAYOUTS), what="every layout's exporter scraped"
        )


module_loop = pytest.mark.asyncio(loop_scope="module")


@module_loop
@pytest.mark.parametrize("name", ["helm", "honor-labels", "hostname"])
async def test_one_pod_per_gpu(scraped: Scraped, name: str) -> None:
    devices = await scraped.devices(f"node-{name}")
    assert [(d["index"], [p["pod"] for p in d["pods"]]) for d in devices] == [
        (0, ["vllm-a"]),
        (1, ["vllm-b"]),
    ]
    whole = Slot("0", "n")
    assert [d["memory_used_mib"] for d in devices] == [
        vllm_used_mib(SPEC, whole, 0.92),
        vllm_used_mib(SPEC, whole, 0.45),
    ]
    assert devices[0]["memory_total_mib"] == SPEC.total_mib


@module_loop
async def test_virtual_gpus_share_gpu_0(scraped: Scraped) -> None:
    shared, idle = await scraped.devices("node-virtual-gpus")
    whole = Slot("0", "n")
    shares = [vllm_used_mib(SPEC, whole, 0.92), vllm_used_mib(SPEC, whole, 0.45)]
    assert [p["pod"] for p in shared["pods"]] == ["vllm-a", "vllm-b"]
    assert [p["memory_used_mib"] for p in shared["pods"]] == shares
    # The device row (capped at the card), not the sum of device and pod rows.
    assert shared["memory_used_mib"] == min(sum(shares), SPEC.usable_mib)
    assert shared["memory_free_mib"] == SPEC.usable_mib - shared["memory_used_mib"]
    assert (idle["pods"], idle["memory_used_mib"]) == ([], 0)


@module_loop
async def test_mig_instances(scraped: Scraped) -> None:
    devices = await scraped.devices("node-mig")
    assert [(d["index"], d["instance_id"], [p["pod"] for p in d["pods"]]) for d in devices] == [
        (0, "1", ["vllm-a"]),
        (0, "2", ["vllm-b"]),
        (1, "1", []),
        (1, "2", []),
    ]
    instance = Slot("0", "n", "1", SPEC.mig_profile)
    assert devices[0]["memory_used_mib"] == vllm_used_mib(SPEC, instance, 0.92)
    assert devices[0]["memory_used_mib"] + devices[0]["memory_free_mib"] == SPEC.mig_instance_mib
    assert devices[0]["utilization_ratio"] is None
