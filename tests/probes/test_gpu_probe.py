"""The `gpu.devices` probe through both sources.

NVML is faked at the `pynvml` boundary only: a module object in `sys.modules` with the
handful of NVML functions the backend calls, raising pynvml-shaped `NVMLError` subclasses.
DCGM is read from a real Prometheus scraping the drill's simulated dcgm-exporter (two nodes).
`scripts/gpu-check` runs as a subprocess against the real `pynvml` of this machine.
"""

from __future__ import annotations

import importlib
import socket
import subprocess
import sys
import threading
import types
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from oncall.errors import BackendError
from oncall.probes.context import ProbeContext
from oncall.probes.gpu import NVIDIA_SMI, PROBES, DevicesParams, devices_equivalent, run_devices
from oncall.probes.registry import all_probes
from oncall.settings.model import GpuSettings, PrometheusSettings, Settings
from oncall_drill.gpu_sim.devices import FB_FULL_FRACTION, GpuSpec, PodClaim, Slot, vllm_used_mib
from oncall_drill.gpu_sim.podresources import static_pods
from oncall_drill.gpu_sim.server import Exporter, build_app
from tests.drill.gateway.helpers import serve_app
from tests.harness.servers import RunningServer, prometheus_server
from tests.harness.waiting import eventually

REPO_ROOT = Path(__file__).resolve().parents[2]
MIB = 1024 * 1024
GIB = 1024 * MIB
SPEC = GpuSpec()
USABLE_MIB = SPEC.total_mib - SPEC.reserved_mib
VLLM_MIB = vllm_used_mib(SPEC, Slot("0", "node-1"), 0.92)


# ------------------------------------------------------------------------------ fake pynvml


class FakeNvmlError(Exception):
    """pynvml's base `NVMLError`: `value` is the NVML return code, str() its text."""

    value = 999
    text = "Unknown Error"

    def __str__(self) -> str:
        return self.text


class NVMLError_LibraryNotFound(FakeNvmlError):
    value, text = 12, "NVML Shared Library Not Found"


class NVMLError_DriverNotLoaded(FakeNvmlError):
    value, text = 9, "Driver Not Loaded"


class NVMLError_NotSupported(FakeNvmlError):
    value, text = 3, "Not Supported"


class NVMLError_GpuIsLost(FakeNvmlError):
    value, text = 15, "GPU is lost"


@dataclass
class FakeCard:
    """What one fake GPU reports; `ecc=None` means the card does not support ECC."""

    uuid: str
    name: str
    used: int
    total: int
    util_pct: int
    temp_c: int
    power_mw: int
    ecc: int | None = 0
    processes: list[tuple[int, int | None]] = field(default_factory=list)


class FakePynvml(types.ModuleType):
    """The pynvml functions `oncall.backends.gpu` calls, over a list of `FakeCard`."""

    NVMLError = FakeNvmlError
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    nvmlMemory_v2 = 0x02000028

    def __init__(
        self, cards: list[FakeCard], init_error: type[FakeNvmlError] | None = None
    ) -> None:
        super().__init__("pynvml")
        self.cards = cards
        self.init_error = init_error
        self.inits = 0
        self.shutdowns = 0
        #: When set, nvmlDeviceGetCount blocks until it is (a driver that hangs).
        self.hang: threading.Event | None = None

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error()
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        if self.hang is not None:
            self.hang.wait(30)
        return len(self.cards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeCard:
        return self.cards[index]

    def nvmlDeviceGetUUID(self, card: FakeCard) -> str:
        return card.uuid

    def nvmlDeviceGetName(self, card: FakeCard) -> str:
        return card.name

    def nvmlDeviceGetMemoryInfo(self, card: FakeCard, version: int | None = None) -> Any:
        assert version == self.nvmlMemory_v2
        free = card.total - card.used - 512 * MIB  # v2: reserved is neither used nor free
        return types.SimpleNamespace(
            total=card.total, used=card.used, free=free, reserved=512 * MIB
        )

    def nvmlDeviceGetUtilizationRates(self, card: FakeCard) -> Any:
        return types.SimpleNamespace(gpu=card.util_pct, memory=10)

    def nvmlDeviceGetTemperatureV(self, card: FakeCard, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return card.temp_c

    def nvmlDeviceGetPowerUsage(self, card: FakeCard) -> int:
        return card.power_mw

    def nvmlDeviceGetTotalEccErrors(self, card: FakeCard, kind: int, counter: int) -> int:
        assert (kind, counter) == (1, 0)
        if card.ecc is None:
            raise NVMLError_NotSupported()
        return card.ecc

    def nvmlDeviceGetComputeRunningProcesses(self, card: FakeCard) -> list[Any]:
        return [types.SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in card.processes]


H100 = "NVIDIA H100 80GB HBM3"
CARDS = [
    FakeCard(
        "GPU-aaaa", H100, used=76 * GIB, total=80 * GIB, util_pct=87, temp_c=71, power_mw=412_500,
        ecc=2, processes=[(4242, 75 * GIB), (4343, None)],
    ),
    FakeCard(
        "GPU-bbbb", "NVIDIA GeForce RTX 4090", used=2 * GIB, total=24 * GIB, util_pct=0,
        temp_c=35, power_mw=21_000, ecc=None,
    ),
]  # fmt: skip


def install(monkeypatch: pytest.MonkeyPatch, fake: FakePynvml | None) -> None:
    """Make `import pynvml` return the fake (None: as if nvidia-ml-py were not installed)."""
    monkeypatch.setitem(sys.modules, "pynvml", fake)


def settings(prom_url: str = "http://127.0.0.1:1", **gpu: Any) -> Settings:
    return Settings(
        prometheus=PrometheusSettings(url=prom_url, timeout=5.0), gpu=GpuSettings(**gpu)
    )


async def probe(cfg: Settings, **params: Any) -> dict[str, Any]:
    async with ProbeContext(cfg) as ctx:
        return await run_devices(ctx, DevicesParams(**params))


# ------------------------------------------------------------------------------ NVML


def test_registered() -> None:
    assert all_probes()["gpu.devices"] is PROBES[0]
    assert PROBES[0].backend == "gpu"


async def test_nvml_devices_with_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePynvml(CARDS)
    install(monkeypatch, fake)
    async with ProbeContext(settings()) as ctx:
        facts = await run_devices(ctx, DevicesParams(source="nvml"))
        again = await run_devices(ctx, DevicesParams(source="nvml"))
        assert devices_equivalent(ctx, DevicesParams(source="nvml")) == NVIDIA_SMI
    assert (fake.inits, fake.shutdowns) == (1, 1)  # initialised once per run, shut down at close
    assert again == facts
    host = socket.gethostname()
    assert facts["fullest"] == facts["devices"][0]  # the fuller of the two
    del facts["fullest"]
    assert facts == {
        "source": "nvml",
        "count": 2,
        "hint": None,
        "max_memory_used_ratio": 76 / 79.5,  # used / (used + free): the reserve is neither
        "min_memory_free_mib": 3.5 * 1024,
        "total_free_mib": 3.5 * 1024 + 21.5 * 1024,
        "xid_count": 0,
        # NVML reads no Xid: the 0 above is not "no Xid", and the step reading it says so.
        "absent": {
            "xid_count": "NVML gives no Xid value: read them through DCGM (source: dcgm) "
            "or dmesg | grep -i xid"
        },
        "devices": [
            {
                "where": f"{host}/gpu0",
                "index": 0,
                "uuid": "GPU-aaaa",
                "name": H100,
                "node": host,
                "memory_used_mib": 76 * 1024,
                "memory_total_mib": 80 * 1024,
                "memory_free_mib": 3.5 * 1024,
                "memory_reserved_mib": 512,
                "memory_used_ratio": 76 / 79.5,
                "instance_id": None,
                "mig_profile": None,
                "pods": [],
                "unattributed_mib": None,
                "pods_text": "",
                "utilization_ratio": 0.87,
                "temperature_c": 71,
                "power_w": 412.5,
                "ecc_uncorrected": 2,
                "last_xid": None,
                "processes": [
                    {"pid": 4242, "used_mib": 75 * 1024},
                    {"pid": 4343, "used_mib": None},
                ],
            },
            {
                "where": f"{host}/gpu1",
                "index": 1,
                "uuid": "GPU-bbbb",
                "name": "NVIDIA GeForce RTX 4090",
                "node": host,
                "memory_used_mib": 2 * 1024,
                "memory_total_mib": 24 * 1024,
                "memory_free_mib": 21.5 * 1024,
                "memory_reserved_mib": 512,
                "memory_used_ratio": 2 / 23.5,
                "instance_id": None,
                "mig_profile": None,
                "pods": [],
                "unattributed_mib": None,
                "pods_text": "",
                "utilization_ratio": 0.0,
                "temperature_c": 35,
                "power_w": 21.0,
                "ecc_uncorrected": None,  # NVMLError_NotSupported: unknown, not an error
                "last_xid": None,
                "processes": [],
            },
        ],
    }


async def test_settings_choose_the_source_when_params_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, FakePynvml(CARDS[:1]))
    facts = await probe(settings(source="nvml"))
    assert (facts["source"], facts["count"]) == ("nvml", 1)


@pytest.mark.parametrize(
    ("fake", "says"),
    [
        (FakePynvml([], init_error=NVMLError_LibraryNotFound), "no NVIDIA driver on this host"),
        (FakePynvml([], init_error=NVMLError_DriverNotLoaded), "driver is not loaded"),
        (FakePynvml([], init_error=NVMLError_GpuIsLost), "NVML did not start (GPU is lost)"),
        (None, "nvidia-ml-py package is not installed"),
    ],
    ids=["no-library", "driver-not-loaded", "other-init-error", "no-pynvml"],
)
async def test_no_driver_under_nvml_is_unavailable_with_the_hint(
    monkeypatch: pytest.MonkeyPatch, fake: FakePynvml | None, says: str
) -> None:
    install(monkeypatch, fake)
    with pytest.raises(BackendError) as caught:
        await probe(settings(), source="nvml")
    error = caught.value
    assert (error.backend, error.target, error.reason) == ("gpu", "nvml", "unavailable")
    assert says in error.detail
    assert "set gpu.source: dcgm to read dcgm-exporter metrics through Prometheus" in error.detail
    assert error.exit_code == 3


async def test_a_hung_driver_is_bounded_by_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakePynvml(CARDS)
    fake.hang = threading.Event()
    install(monkeypatch, fake)
    try:
        with pytest.raises(BackendError) as caught:
            await probe(settings(timeout=0.2), source="nvml")
        assert (caught.value.target, caught.value.reason) == ("nvml", "timeout")
    finally:
        fake.hang.set()  # let the abandoned worker thread finish


async def test_nvml_refuses_another_node(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakePynvml(CARDS))
    with pytest.raises(BackendError) as caught:
        await probe(settings(), source="nvml", node="some-other-node.example")
    assert caught.value.reason == "unavailable"
    assert "only the GPUs of this host" in caught.value.detail


async def test_nvml_on_this_node_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakePynvml(CARDS))
    facts = await probe(settings(), source="auto", node=socket.gethostname())
    assert (facts["source"], facts["count"], facts["hint"]) == ("nvml", 2, None)


def test_extra_params_are_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        DevicesParams.model_validate({"source": "dcgm", "gpu": 0})


# ------------------------------------------------------------------------------ DCGM


@dataclass
class Dcgm:
    """A real Prometheus scraping two simulated dcgm-exporters (node-1: GPUs 0, 1; node-2: 0)."""

    prom: RunningServer
    node1_url: str
    http: httpx.AsyncClient

    def settings(self, **gpu: Any) -> Settings:
        return settings(self.prom.url, **gpu)

    async def fault(self, **body: Any) -> None:
        response = await self.http.post(f"{self.node1_url}/drill/fault", json=body)
        assert response.status_code == 200, response.text


#: The DCGM tests share one module-wide Prometheus and exporters: its first scrape waits for the
#: discovery manager's 5 s update throttle, which every test would otherwise pay again.
module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dcgm(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Dcgm]:
    # GPU 0 of node-1 is held by a busy vLLM pod; the other GPUs by no pod.
    state = {"running": 8, "max_num_seqs": 16}

    async def drill_state(request: web.Request) -> web.Response:
        return web.json_response(state)

    stub = web.Application()
    stub.router.add_get("/drill/state", drill_state)
    async with serve_app(stub) as vllm_url:
        pods = static_pods([PodClaim("ai", "vllm-a", vllm_url=vllm_url)])
        node1 = Exporter("node-1", 2, pods=pods)
        node2 = Exporter("node-2", 1)
        async with (
            serve_app(build_app(node1)) as node1_url,
            serve_app(build_app(node2)) as node2_url,
            httpx.AsyncClient(trust_env=False, timeout=5) as http,
        ):
            targets = [url.removeprefix("http://") for url in (node1_url, node2_url)]
            job = {"job_name": "dcgm", "static_configs": [{"targets": targets}]}
            directory = tmp_path_factory.mktemp("dcgm-prometheus")
            with prometheus_server(directory, scrape_configs=[job]) as prom:

                async def every_gpu_scraped() -> bool:
                    response = await http.get(
                        f"{prom.url}/api/v1/query", params={"query": "DCGM_FI_DEV_FB_USED"}
                    )
                    return len(response.json()["data"]["result"]) == 3

                await eventually(every_gpu_scraped, within=20, what="both exporters scraped")
                yield Dcgm(prom, node1_url, http)


@module_loop
async def test_dcgm_devices_from_prometheus(dcgm: Dcgm) -> None:
    facts = await probe(dcgm.settings(), source="dcgm")
    assert (facts["source"], facts["count"], facts["hint"]) == ("dcgm", 3, None)
    devices = facts["devices"]
    assert [(d["node"], d["index"]) for d in devices] == [
        ("node-1", 0),
        ("node-1", 1),
        ("node-2", 0),
    ]
    busy, idle = devices[0], devices[1]
    for device in devices:
        assert device["name"] == SPEC.model_name
        assert device["uuid"].startswith("GPU-")
        assert device["memory_total_mib"] == SPEC.total_mib
        assert device["memory_reserved_mib"] == SPEC.reserved_mib
        assert device["memory_used_mib"] + device["memory_free_mib"] == USABLE_MIB
        assert device["ecc_uncorrected"] is None  # the simulator exports no ECC counter
        assert device["last_xid"] is None  # no Xid yet: dcgm-exporter >= 4.0 has no row
        assert device["processes"] == []
    assert len({d["uuid"] for d in devices}) == 3
    assert [p["pod"] for p in busy["pods"]] == ["vllm-a"] and idle["pods"] == []
    assert busy["memory_used_mib"] == VLLM_MIB  # pre-allocated, whatever the load
    assert busy["memory_used_ratio"] == pytest.approx(VLLM_MIB / USABLE_MIB)
    assert (idle["memory_used_mib"], idle["utilization_ratio"]) == (0, 0.0)
    assert idle["power_w"] == SPEC.power_w.idle
    assert 0.4 <= busy["utilization_ratio"] <= 1.0
    assert busy["temperature_c"] > idle["temperature_c"]
    assert facts["max_memory_used_ratio"] == busy["memory_used_ratio"]
    assert facts["min_memory_free_mib"] == busy["memory_free_mib"]
    assert facts["total_free_mib"] == sum(d["memory_free_mib"] for d in devices)
    assert facts["xid_count"] == 0


@module_loop
async def test_dcgm_node_filter(dcgm: Dcgm) -> None:
    facts = await probe(dcgm.settings(source="dcgm"), node="node-2")
    assert [(d["node"], d["index"]) for d in facts["devices"]] == [("node-2", 0)]
    with pytest.raises(BackendError) as caught:
        await probe(dcgm.settings(source="dcgm"), node="node-9")
    assert caught.value.reason == "no data"
    assert "Hostname or hostname 'node-9'" in caught.value.detail


@module_loop
async def test_fb_full_and_xid_faults_through_prometheus(dcgm: Dcgm) -> None:
    async def node1_gpu1() -> dict[str, Any]:
        facts = await probe(dcgm.settings(source="dcgm"), node="node-1")
        return {
            **facts["devices"][1],
            "max": facts["max_memory_used_ratio"],
            "xids": facts["xid_count"],
        }

    async def scraped(xid: int | None) -> bool:
        return bool((await node1_gpu1())["last_xid"] == xid)

    await dcgm.fault(fault="fb-full", gpu="1")
    await dcgm.fault(fault="xid", gpu="1", xid=79)
    try:
        await eventually(lambda: scraped(79), within=10, what="Prometheus to scrape the faults")
        full = await node1_gpu1()
        assert full["memory_used_ratio"] == pytest.approx(FB_FULL_FRACTION, abs=0.001)
        assert full["pods"] == []  # a process outside Kubernetes: no pod to name
        assert full["max"] == full["memory_used_ratio"]
        assert full["xids"] == 1
    finally:
        # The exporters are shared by the module: leave them, and Prometheus, as found.
        await dcgm.fault(fault="none", gpu="1")
        # Cleared (a GPU reset): no Xid row again, so no last Xid.
        await eventually(lambda: scraped(None), within=10, what="Prometheus to scrape the clear")
    assert (await node1_gpu1())["memory_used_mib"] == 0


@module_loop
async def test_auto_falls_back_to_dcgm_without_a_driver(
    dcgm: Dcgm, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, FakePynvml([], init_error=NVMLError_LibraryNotFound))
    async with ProbeContext(dcgm.settings(source="auto")) as ctx:
        facts = await run_devices(ctx, DevicesParams())
        equivalent = devices_equivalent(ctx, DevicesParams())
    assert (facts["source"], facts["count"]) == ("dcgm", 3)
    assert facts["hint"].startswith("NVML unavailable: no NVIDIA driver on this host")
    assert equivalent.startswith(f"curl -s {dcgm.prom.url}/api/v1/query --data-urlencode ")
    assert "DCGM_FI_DEV_(FB_USED|FB_FREE|" in equivalent


@module_loop
async def test_auto_reads_another_node_from_dcgm(
    dcgm: Dcgm, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakePynvml(CARDS)  # a working NVML here, but it cannot see node-2
    install(monkeypatch, fake)
    facts = await probe(dcgm.settings(), source="auto", node="node-2")
    assert (facts["source"], facts["count"]) == ("dcgm", 1)
    assert "NVML reads only the GPUs of this host" in facts["hint"]
    assert fake.inits == 0


async def test_no_dcgm_series_is_no_data(prometheus_srv: RunningServer) -> None:
    with pytest.raises(BackendError) as caught:
        await probe(settings(prometheus_srv.url), source="dcgm")
    error = caught.value
    assert (error.backend, error.target, error.reason) == ("gpu", prometheus_srv.url, "no data")
    assert "dcgm-exporter is not scraped" in error.detail


async def test_both_sources_failing_names_both(
    prometheus_srv: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(monkeypatch, FakePynvml([], init_error=NVMLError_DriverNotLoaded))
    with pytest.raises(BackendError) as caught:
        await probe(settings(prometheus_srv.url), source="auto")
    assert caught.value.reason == "no data"
    assert "dcgm-exporter is not scraped" in caught.value.detail
    assert "NVML unavailable: the NVIDIA driver is not loaded" in caught.value.detail


# ------------------------------------------------------------------------------ scripts/gpu-check


def _real_driver_present() -> bool:
    try:
        pynvml = importlib.import_module("pynvml")  # the real one: no fake is installed here
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.fixture
def no_driver() -> Iterator[None]:
    if _real_driver_present():
        pytest.skip("a real NVIDIA driver is present: gpu-check would read it")
    yield


@pytest.mark.usefixtures("no_driver")
def test_gpu_check_exits_3_with_the_hint_without_a_driver() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gpu-check")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 3, result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("gpu-check: gpu at nvml: unavailable (")
    assert "set gpu.source: dcgm to read dcgm-exporter metrics through Prometheus" in result.stderr
    assert "Traceback" not in result.stderr
