"""The aiohttp application of the simulated GPU exporter.

Routes:

* `GET /metrics` — dcgm-exporter gauges (`DCGM_FI_DEV_FB_USED`, `DCGM_FI_DEV_FB_FREE` in MiB,
  `DCGM_FI_DEV_GPU_UTIL` %, `DCGM_FI_DEV_GPU_TEMP` C, `DCGM_FI_DEV_POWER_USAGE` W,
  `DCGM_FI_DEV_XID_ERRORS` = last XID) with labels `gpu`, `UUID`, `pci_bus_id`, `device`,
  `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`, `container`, `namespace`, `pod`.
  Each scrape reads the bound vLLM simulators' `GET /drill/state` (timeout 0.5 s).
* `GET /health` — 200 (also under the `hang` and `error` faults: only /metrics breaks).
* drill only: `POST /drill/fault` `{"fault": "fb-full"|"xid"|"hang"|"error"|"none",
  "gpu"?: "0", "xid"?: int}` and `GET /drill/state`. `hang` makes /metrics never answer
  until cleared; `error` makes it answer 500 — Prometheus marks the target down either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from oncall.drill.gpu_sim.devices import (
    DEFAULT_XID,
    DeviceFaults,
    Gpu,
    GpuSpec,
    MemoryModel,
    Reading,
    VllmLoad,
    read_gpu,
)

STATE_TIMEOUT_SECONDS = 0.5
EXPORTER_FAULTS = ("hang", "error")
DEVICE_FAULTS = ("fb-full", "xid")
FAULTS = (*DEVICE_FAULTS, *EXPORTER_FAULTS, "none")

#: (metric name, help text as dcgm-exporter writes it, Reading attribute).
FIELDS = (
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "fb_free_mib"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util_pct"),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "xid"),
)


@dataclass
class _Snapshot:
    """The readings the collector renders (set just before rendering)."""

    rows: list[tuple[dict[str, str], Reading]] = field(default_factory=list)


class _DcgmCollector:
    """A prometheus_client collector over the latest snapshot."""

    def __init__(self, snapshot: _Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        rows = self.snapshot.rows
        if not rows:
            return
        names = list(rows[0][0])
        for name, help_text, attr in FIELDS:
            family = GaugeMetricFamily(name, help_text, labels=names)
            for labels, reading in rows:
                family.add_metric([labels[n] for n in names], float(getattr(reading, attr)))
            yield family


class Exporter:
    """State of one exporter process: GPUs, faults, the metrics registry, an HTTP client."""

    def __init__(
        self, gpus: list[Gpu], spec: GpuSpec | None = None, memory: MemoryModel | None = None
    ) -> None:
        if not gpus:
            raise ValueError("at least one GPU is needed")
        self.gpus = gpus
        self.spec = spec or GpuSpec()
        self.memory = memory or MemoryModel()
        self.faults = {gpu.index: DeviceFaults() for gpu in gpus}
        self.exporter_fault: str | None = None
        self.unhung = asyncio.Event()
        self.unhung.set()
        #: Scrapes held by the `hang` fault right now.
        self.hung_scrapes = 0
        self.closing = False
        self._snapshot = _Snapshot()
        self.registry = CollectorRegistry()
        self.registry.register(_DcgmCollector(self._snapshot))
        # Created on first use: a ClientSession belongs to the running event loop.
        self._client: aiohttp.ClientSession | None = None

    async def aclose(self) -> None:
        """Close the HTTP client; release any hung scrape (it answers 503)."""
        self.closing = True
        self.unhung.set()
        if self._client is not None:
            await self._client.close()

    async def _load(self, gpu: Gpu) -> VllmLoad:
        if self._client is None:
            timeout = aiohttp.ClientTimeout(total=STATE_TIMEOUT_SECONDS)
            self._client = aiohttp.ClientSession(timeout=timeout)
        try:
            async with self._client.get(f"{gpu.vllm_url}/drill/state") as response:
                if response.status != 200:
                    return VllmLoad(reachable=False)
                return VllmLoad.from_state(await response.json())
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return VllmLoad(reachable=False)

    async def readings(self) -> list[tuple[Gpu, Reading]]:
        """Fresh readings of every GPU (the vLLM states are fetched concurrently)."""
        loads = await asyncio.gather(*(self._load(gpu) for gpu in self.gpus))
        return [
            (gpu, read_gpu(self.spec, self.memory, load, self.faults[gpu.index]))
            for gpu, load in zip(self.gpus, loads, strict=True)
        ]

    async def render(self) -> bytes:
        """The exposition text of one scrape."""
        rows = await self.readings()
        self._snapshot.rows = [(gpu.labels(self.spec), reading) for gpu, reading in rows]
        return generate_latest(self.registry)

    def set_fault(self, fault: str, gpu: str | None, xid: int | None) -> None:
        """Apply a validated fault request (see `parse_fault`)."""
        if fault in EXPORTER_FAULTS:
            self.exporter_fault = fault
            if fault == "hang":
                self.unhung.clear()
            else:
                self.unhung.set()
            return
        targets = [gpu] if gpu is not None else list(self.faults)
        if fault == "none":
            for index in targets:
                self.faults[index] = DeviceFaults()
            if gpu is None:
                self.exporter_fault = None
                self.unhung.set()
            return
        for index in targets:
            if fault == "fb-full":
                self.faults[index].fb_full = True
            else:
                self.faults[index].xid = xid or DEFAULT_XID

    async def state(self) -> dict[str, Any]:
        """`GET /drill/state`: faults and current readings."""
        rows = await self.readings()
        return {
            "exporter_fault": self.exporter_fault or "none",
            "hung_scrapes": self.hung_scrapes,
            "gpus": [
                {
                    "gpu": gpu.index,
                    "uuid": gpu.uuid,
                    "vllm_url": gpu.vllm_url,
                    "pod": f"{gpu.pod.namespace}/{gpu.pod.pod}" if gpu.pod else None,
                    "faults": self.faults[gpu.index].describe(),
                    "fb_used_mib": reading.fb_used_mib,
                    "fb_free_mib": reading.fb_free_mib,
                    "fb_total_mib": self.spec.total_mib,
                    "util_pct": reading.util_pct,
                    "temp_c": reading.temp_c,
                    "power_w": reading.power_w,
                    "xid": reading.xid,
                    "notes": list(reading.notes),
                }
                for gpu, reading in rows
            ],
        }


def parse_fault(body: Any, known_gpus: Iterable[str]) -> tuple[str, str | None, int | None]:
    """(fault, gpu, xid) from a request body; ValueError lists every problem."""
    if not isinstance(body, dict):
        raise ValueError('expected {"fault": ..., "gpu"?: "0", "xid"?: int}')
    problems: list[str] = []
    fault, gpu, xid = body.get("fault"), body.get("gpu"), body.get("xid")
    if fault not in FAULTS:
        problems.append(f"fault: one of {', '.join(FAULTS)}")
    if gpu is not None:
        gpu = str(gpu)
        if gpu not in set(known_gpus):
            problems.append(f"gpu: no GPU {gpu!r} on this exporter")
        if fault in EXPORTER_FAULTS:
            problems.append(f"gpu: {fault!r} affects the whole exporter; omit gpu")
    if xid is not None and (isinstance(xid, bool) or not isinstance(xid, int) or xid < 1):
        problems.append("xid: a positive integer")
    unknown = set(body) - {"fault", "gpu", "xid"}
    if unknown:
        problems.append(f"unknown fields: {', '.join(sorted(unknown))}")
    if problems:
        raise ValueError("; ".join(problems))
    return str(fault), gpu, xid


EXPORTER_KEY = web.AppKey("gpu_sim", Exporter)


async def metrics(request: web.Request) -> web.Response:
    """The DCGM gauges; hangs or fails under the exporter faults."""
    exporter = request.app[EXPORTER_KEY]
    if not exporter.unhung.is_set():
        exporter.hung_scrapes += 1
        try:
            await exporter.unhung.wait()
        finally:
            exporter.hung_scrapes -= 1
    if exporter.closing:
        return web.Response(status=503, text="shutting down")
    if exporter.exporter_fault == "error":
        return web.Response(status=500, text="Internal Server Error: failed to collect metrics")
    body = await exporter.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def health(request: web.Request) -> web.Response:
    """The process answers."""
    return web.json_response({"status": "ok"})


async def post_fault(request: web.Request) -> web.Response:
    """Inject or clear a fault; the answer is the new state."""
    exporter = request.app[EXPORTER_KEY]
    try:
        body = await request.json()
    except ValueError:
        return web.json_response({"error": "request body is not valid JSON"}, status=400)
    try:
        fault, gpu, xid = parse_fault(body, exporter.faults)
    except ValueError as exc:
        return web.json_response({"error": str(exc)}, status=400)
    exporter.set_fault(fault, gpu, xid)
    return web.json_response(await exporter.state())


async def get_state(request: web.Request) -> web.Response:
    """Faults and current readings of every GPU."""
    return web.json_response(await request.app[EXPORTER_KEY].state())


def build_app(exporter: Exporter) -> web.Application:
    """The application around an `Exporter` (closed with the application)."""
    app = web.Application()
    app[EXPORTER_KEY] = exporter

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        yield
        await exporter.aclose()

    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", health)
    app.router.add_post("/drill/fault", post_fault)
    app.router.add_get("/drill/state", get_state)
    return app
