"""The simulated dcgm-exporter: names and labels per layout, flat vLLM memory, faults.

A stub vLLM (`GET /drill/state` with a load the test sets) stands for the pods' engines; one
test binds the real vLLM simulator and fills its KV cache, one has a real Prometheus scrape the
exporter through the `hang` fault (the scrape-failure drill).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from oncall_drill.gpu_sim.devices import FB_FULL_FRACTION, GpuSpec, PodClaim, Slot, vllm_used_mib
from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.gpu_sim.podresources import Allocator, static_pods
from oncall_drill.gpu_sim.server import Exporter, build_app
from tests.drill.gateway.helpers import (
    Metrics,
    module_process,
    run_module,
    scrape,
    serve_app,
    vllm_sim,
)
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually

SPEC = GpuSpec()
#: What a vLLM at the default --gpu-memory-utilization (0.92) holds on a whole H100.
VLLM_MIB = vllm_used_mib(SPEC, Slot("0", "node-1"), 0.92)
NAMES = (
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_RESERVED",
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


@contextlib.asynccontextmanager
async def exporter_node(
    layout: Layout, claims: list[PodClaim] | None = None
) -> AsyncIterator[Node]:
    """Two GPUs; pods ai/vllm-0 (on a stub vLLM) and, when given, `claims` instead."""
    state: dict[str, Any] = {"running": 0, "max_num_seqs": 16, "dead": False}

    async def drill_state(request: web.Request) -> web.Response:
        return web.json_response(state)

    stub = web.Application()
    stub.router.add_get("/drill/state", drill_state)
    async with serve_app(stub) as vllm_url:
        pods = claims if claims is not None else [PodClaim("ai", "vllm-0", vllm_url=vllm_url)]
        exporter = Exporter("node-1", 2, pods=static_pods(pods), layout=layout)
        async with (
            serve_app(build_app(exporter)) as url,
            httpx.AsyncClient(trust_env=False, timeout=5) as http,
        ):
            yield Node(url, http, state)


@pytest.fixture
async def node() -> AsyncIterator[Node]:
    """The Helm default layout: GPU 0 held by ai/vllm-0 (a stub vLLM), GPU 1 by no pod."""
    async with exporter_node(Layout()) as found:
        yield found


async def test_dcgm_names_types_and_labels(node: Node) -> None:
    metrics = await node.metrics()
    for name in NAMES:
        if name == "DCGM_FI_DEV_XID_ERRORS":
            # No Xid yet: DCGM's value is blank and dcgm-exporter skips it, family and all.
            assert name not in metrics.families
            continue
        family = metrics.families[name]
        assert family.type == "gauge"
        assert len(family.samples) == 2
    by_gpu = {s.labels["gpu"]: s.labels for s in metrics.matching("DCGM_FI_DEV_FB_USED")}
    gpu0, gpu1 = by_gpu["0"], by_gpu["1"]
    assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"} <= set(gpu0)
    assert (gpu0["namespace"], gpu0["pod"], gpu0["container"]) == ("ai", "vllm-0", "vllm")
    # An unallocated GPU has no pod labels at all, as with dcgm-exporter.
    assert not {"namespace", "pod", "container"} & set(gpu1)
    assert gpu0["Hostname"] == gpu1["Hostname"] == "node-1" and "hostname" not in gpu0
    assert gpu0["modelName"] == "NVIDIA H100 80GB HBM3"
    assert gpu0["UUID"].startswith("GPU-") and gpu0["UUID"] != gpu1["UUID"]
    assert metrics.value("DCGM_FI_DEV_FB_RESERVED", gpu="0") == SPEC.reserved_mib


async def test_memory_is_preallocated_and_flat_whatever_the_load(node: Node) -> None:
    readings = []
    for running, seqs in ((0, 16), (16, 16), (256, 256), (4, 64)):
        node.vllm_state.update(running=running, max_num_seqs=seqs)
        metrics = await node.metrics()
        used = metrics.value("DCGM_FI_DEV_FB_USED", gpu="0")
        free = metrics.value("DCGM_FI_DEV_FB_FREE", gpu="0")
        reserved = metrics.value("DCGM_FI_DEV_FB_RESERVED", gpu="0")
        assert used + free + reserved == SPEC.total_mib
        readings.append((used, metrics.value("DCGM_FI_DEV_GPU_UTIL", gpu="0")))
    assert {used for used, _ in readings} == {VLLM_MIB}  # flat: load and max-num-seqs alike
    assert round(0.92 * (SPEC.total_mib - SPEC.reserved_mib)) + SPEC.context_mib == VLLM_MIB
    assert readings[0][1] == 0 and readings[1][1] > 0  # utilisation follows the load
    assert (await node.metrics()).value("DCGM_FI_DEV_FB_USED", gpu="1") == 0


async def test_memory_follows_the_configured_utilization() -> None:
    claims = [
        PodClaim("ai", "vllm-a", gpu_memory_utilization=0.97),
        PodClaim("ai", "vllm-b", gpu_memory_utilization=0.5),
    ]
    async with exporter_node(Layout(), claims) as node:
        metrics = await node.metrics()
        used = {
            s.labels["pod"]: s.value
            / (s.value + metrics.value("DCGM_FI_DEV_FB_FREE", gpu=s.labels["gpu"]))
            for s in metrics.matching("DCGM_FI_DEV_FB_USED")
        }
        assert used["vllm-a"] > 0.95  # >= 0.95 configured: the GPUMemoryHigh line is crossed
        assert 0.5 < used["vllm-b"] < 0.52


async def test_fb_full_and_xid_faults(node: Node) -> None:
    assert (await node.fault(fault="fb-full", gpu="1")).status_code == 200
    metrics = await node.metrics()
    usable = SPEC.total_mib - SPEC.reserved_mib
    assert metrics.value("DCGM_FI_DEV_FB_USED", gpu="1") == round(FB_FULL_FRACTION * usable)
    assert metrics.value("DCGM_FI_DEV_FB_USED", gpu="0") == VLLM_MIB

    assert (await node.fault(fault="xid")).status_code == 200
    assert (await node.fault(fault="xid", gpu="1", xid=79)).status_code == 200
    metrics = await node.metrics()
    # dcgm-exporter >= 4.0.0: the Xid's code and text as labels; each new Xid a new series.
    (gpu0,) = metrics.matching("DCGM_FI_DEV_XID_ERRORS", gpu="0")
    assert gpu0.value == 48 and gpu0.labels["pod"] == "vllm-0"
    assert (gpu0.labels["err_code"], gpu0.labels["err_msg"]) == ("48", "Double Bit ECC Error")
    (gpu1,) = metrics.matching("DCGM_FI_DEV_XID_ERRORS", gpu="1")
    assert (gpu1.value, gpu1.labels["err_code"]) == (79, "79")
    assert gpu1.labels["err_msg"] == "GPU has fallen off the bus"
    assert (await node.fault(fault="xid", gpu="1", xid=13)).status_code == 200
    (gpu1,) = (await node.metrics()).matching("DCGM_FI_DEV_XID_ERRORS", gpu="1")
    assert (gpu1.value, gpu1.labels["err_msg"]) == (13, "Graphics Engine Exception")

    assert (await node.fault(fault="none", gpu="1")).status_code == 200
    metrics = await node.metrics()
    assert metrics.matching("DCGM_FI_DEV_XID_ERRORS", gpu="1") == []  # reset: blank again
    assert metrics.value("DCGM_FI_DEV_FB_USED", gpu="1") == 0
    assert metrics.value("DCGM_FI_DEV_XID_ERRORS", gpu="0") == 48


async def test_hostname_layout_spells_the_node_label_as_main_does() -> None:
    async with exporter_node(Layout.parse("hostname")) as node:
        labels = (await node.metrics()).matching("DCGM_FI_DEV_FB_USED")[0].labels
        assert labels["hostname"] == "node-1" and "Hostname" not in labels


async def test_virtual_gpus_layout_device_row_and_per_pod_rows() -> None:
    claims = [
        PodClaim("ai", "vllm-a", gpu_memory_utilization=0.45),
        PodClaim("ai", "vllm-b", gpu_memory_utilization=0.45),
    ]
    async with exporter_node(Layout.parse("virtual-gpus"), claims) as node:
        metrics = await node.metrics()
        used = metrics.matching("DCGM_FI_DEV_FB_USED", gpu="0")
        device = [s for s in used if "pod" not in s.labels]
        per_pod = {s.labels["pod"]: s for s in used if "pod" in s.labels}
        assert len(device) == 1 and set(per_pod) == {"vllm-a", "vllm-b"}
        assert device[0].value == sum(s.value for s in per_pod.values())
        assert {s.labels["vgpu"] for s in per_pod.values()} == {"0", "1"}
        free = metrics.matching("DCGM_FI_DEV_FB_FREE", gpu="0")  # copied per pod, no device row
        assert sorted(s.labels["pod"] for s in free) == ["vllm-a", "vllm-b"]
        assert {s.value for s in free} == {SPEC.total_mib - SPEC.reserved_mib - device[0].value}
        assert len(metrics.matching("DCGM_FI_DEV_FB_USED", gpu="1")) == 1  # idle: device row


async def test_mig_layout_instances_share_the_parent_uuid() -> None:
    claims = [PodClaim("ai", "vllm-a"), PodClaim("ai", "vllm-b")]
    async with exporter_node(Layout.parse("mig"), claims) as node:
        metrics = await node.metrics()
        rows = metrics.matching("DCGM_FI_DEV_FB_USED")
        assert [(s.labels["gpu"], s.labels["GPU_I_ID"]) for s in rows] == [
            ("0", "1"), ("0", "2"), ("1", "1"), ("1", "2"),
        ]  # fmt: skip
        assert len({s.labels["UUID"] for s in rows if s.labels["gpu"] == "0"}) == 1
        assert [s.labels.get("pod") for s in rows] == ["vllm-a", "vllm-b", None, None]
        assert {s.labels["GPU_I_PROFILE"] for s in rows} == {SPEC.mig_profile}
        assert "DCGM_FI_DEV_GPU_UTIL" not in metrics.families or not metrics.matching(
            "DCGM_FI_DEV_GPU_UTIL"
        )


def test_allocator_keeps_a_pod_on_its_gpu_and_frees_it() -> None:
    slots = [Slot(str(i), "n") for i in range(2)]
    allocator = Allocator(slots)
    a, b, c = PodClaim("ai", "a"), PodClaim("ai", "b"), PodClaim("ai", "c")
    assert {k: [p.pod for p, _ in v] for k, v in allocator.assign([a, b]).items()} == {
        0: ["a"], 1: ["b"],
    }  # fmt: skip
    assert {k: [p.pod for p, _ in v] for k, v in allocator.assign([b, c]).items()} == {
        0: ["c"], 1: ["b"],
    }  # fmt: skip
    assert allocator.assign([a, b, c]) == allocator.assign([b, c])  # no GPU left for a


def test_layout_options_parse_and_refuse_unknown() -> None:
    assert Layout.parse("helm") == Layout()
    layout = Layout.parse("honor-labels,hostname,virtual-gpus,mig")
    assert (layout.honor_labels, layout.hostname_label, layout.virtual_gpus, layout.mig) == (
        True, "hostname", True, True,
    )  # fmt: skip
    assert Layout.parse(layout.text()) == layout
    with pytest.raises(ValueError, match="honor-labels"):
        Layout.parse("honour")
    config = Layout().scrape_config("dcgm-exporter", "127.0.0.1:9400")
    assert config["honor_labels"] is False
    assert config["static_configs"][0]["labels"]["pod"].startswith("dcgm-exporter-")


@pytest.mark.parametrize(
    "body",
    [
        {"fault": "melt"},
        {"fault": "fb-full", "gpu": "7"},
        {"fault": "hang", "gpu": "0"},
        {"fault": "xid", "xid": "big"},
        {"fault": "xid", "xid": 7},  # an Xid whose err_msg the simulator does not know
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


async def test_real_vllm_kv_fills_and_fb_used_stays_flat(tmp_path: Path) -> None:
    """Bound to the real simulator: a long generation fills its KV cache; FB_USED does not move."""
    kv_args = ("--kv-capacity-tokens", "1024", "--max-model-len", "1024", "--speed", "4")
    with vllm_sim(tmp_path, *kv_args) as vllm:
        gpu_args = ["--hostname", "node-7", "--gpus", "1", "--pod", f"ai/vllm-a={vllm.url}"]
        with module_process(tmp_path, "oncall_drill.gpu_sim", *gpu_args) as exporter:
            async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
                idle = (await scrape(http, exporter.url)).value("DCGM_FI_DEV_FB_USED")
                assert idle == VLLM_MIB
                body = {
                    "model": "sim/llama",
                    "messages": [{"role": "user", "content": "Write a long story."}],
                    "max_tokens": 900,
                    "ignore_eos": True,
                }
                generation = asyncio.create_task(
                    http.post(f"{vllm.url}/v1/chat/completions", json=body, timeout=60)
                )

                async def kv_filling() -> bool:
                    state = (await http.get(f"{vllm.url}/drill/state")).json()
                    return bool(state["kv_usage"] > 0.3)

                try:
                    await eventually(kv_filling, within=10, what="vLLM's KV cache to fill")
                    metrics = await scrape(http, exporter.url)
                    assert metrics.value("DCGM_FI_DEV_FB_USED") == idle
                    assert metrics.value("DCGM_FI_DEV_GPU_UTIL") > 0
                    assert metrics.matching("DCGM_FI_DEV_FB_USED")[0].labels["pod"] == "vllm-a"
                finally:
                    generation.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await generation


def test_process_refuses_non_loopback_vllm() -> None:
    result = run_module(
        "oncall_drill.gpu_sim",
        "--port",
        "1",
        "--pod",
        "ai/vllm-a=http://192.168.1.5:8000",
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
