"""The aiohttp application of the simulated GPU exporter.

Routes:

* `GET /metrics` — dcgm-exporter gauges (`DCGM_FI_DEV_FB_USED`, `FB_FREE`, `FB_RESERVED` in
  MiB, `GPU_UTIL` %, `GPU_TEMP` C, `POWER_USAGE` W, `XID_ERRORS` = last Xid, with the
  `err_code`/`err_msg` labels of dcgm-exporter >= 4.0.0 and absent until the first Xid:
  `xid.py`) in the label layout of `layout.Layout`, for the pods the kubelet view
  (`podresources`) puts on each GPU.
  Each scrape reads those pods' vLLM `GET /drill/state` (timeout 0.5 s) for utilisation;
  memory is what each vLLM pre-allocated, whatever its load.
* `GET /health` — 200 (also under the `hang` and `error` faults: only /metrics breaks).
* drill only: `POST /drill/fault` `{"fault": "fb-full"|"xid"|"hang"|"error"|"none",
  "gpu"?: "0", "xid"?: int}` and `GET /drill/state`. `fb-full`: a process outside Kubernetes
  fills the GPU; `xid`: the GPU reports that Xid (it stays, as DCGM's last-Xid gauge does,
  until cleared); `hang` makes /metrics never answer until cleared; `error` makes it answer
  500 — Prometheus marks the target down either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from oncall_drill.gpu_sim.devices import (
    DEFAULT_XID,
    DeviceFaults,
    GpuSpec,
    PodClaim,
    Reading,
    Slot,
    VllmLoad,
    read_slot,
)
from oncall_drill.gpu_sim.layout import Layout
from oncall_drill.gpu_sim.podresources import Allocator, PodSource, static_pods
from oncall_drill.gpu_sim.xid import XID_MESSAGES, xid_attributes

STATE_TIMEOUT_SECONDS = 0.5
EXPORTER_FAULTS = ("hang", "error")
DEVICE_FAULTS = ("fb-full", "xid")
FAULTS = (*DEVICE_FAULTS, *EXPORTER_FAULTS, "none")
#: The gauges GPU sharing splits per pod (`process_metrics.go`, `isPerProcessMetric`).
PER_PROCESS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL")

#: Not reported for MIG instances: GPU_UTIL is not supported in MIG mode; whether the reserve
#: is reported per instance is not verified, so the drill leaves it out.
MIG_UNREPORTED = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_RESERVED")
#: (metric name, help text as `etc/default-counters.csv` writes it, Reading attribute).
FIELDS = (
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "temp_c"),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "power_w"),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "util_pct"),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "xid"),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "fb_free_mib"),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "fb_used_mib"),
    ("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", "fb_reserved_mib"),
)


@dataclass
class SlotState:
    """One slot at one scrape: its pods (with their time-slicing replica) and readings."""

    slot: Slot
    pods: list[tuple[PodClaim, int]]
    reading: Reading


@dataclass
class _Snapshot:
    """The rows the collector renders (set just before rendering)."""

    families: list[Metric] = field(default_factory=list)


class _DcgmCollector:
    def __init__(self, snapshot: _Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterable[Metric]:
        return list(self.snapshot.families)


def _value(name: str, state: SlotState, attr: str, claim: PodClaim | None) -> float:
    reading = state.reading
    if claim is not None and name == "DCGM_FI_DEV_FB_USED":
        return float(reading.per_pod_used.get(claim.key, 0))
    if claim is not None and name == "DCGM_FI_DEV_GPU_UTIL":
        return float(reading.per_pod_util.get(claim.key, 0))
    return float(getattr(reading, attr))


def _with_attributes(labels: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """A row's labels with more attributes: after the device's labels, all attributes sorted
    by name (dcgm-exporter ranges over its Attributes map, which Go's template sorts)."""
    device_keys = [k for k in labels if k not in _ATTRIBUTE_KEYS]
    attributes = {k: v for k, v in labels.items() if k in _ATTRIBUTE_KEYS} | extra
    return {k: labels[k] for k in device_keys} | dict(sorted(attributes.items()))


_ATTRIBUTE_KEYS = frozenset({"container", "namespace", "pod", "vgpu"})
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"


def _add_row(family: Metric, name: str, labels: dict[str, str], value: float) -> None:
    if name == XID_FIELD:
        if not value:
            return  # DCGM's blank value before the first Xid: no row
        labels = _with_attributes(labels, xid_attributes(int(value)))
    family.add_sample(name, labels, value)


def render_families(spec: GpuSpec, layout: Layout, states: list[SlotState]) -> list[Metric]:
    """The metric families of one scrape, row by row as dcgm-exporter emits them."""
    families: list[Metric] = []
    for name, help_text, attr in FIELDS:
        family = GaugeMetricFamily(name, help_text)
        add = partial(_add_row, family, name)
        for state in states:
            if state.slot.instance_id and name in MIG_UNREPORTED:
                continue
            device = layout.device_labels(spec, state.slot)
            if not state.pods:
                add(device, _value(name, state, attr, None))
            elif not layout.virtual_gpus:
                claim = state.pods[0][0]  # one pod per GPU without sharing
                labels = layout.pod_labels(spec, state.slot, claim, 0)
                add(labels, _value(name, state, attr, None))
            else:
                if name in PER_PROCESS:  # the device row, then each pod's own share
                    add(device, _value(name, state, attr, None))
                for claim, replica in state.pods:
                    labels = layout.pod_labels(spec, state.slot, claim, replica)
                    per_pod = claim if name in PER_PROCESS else None
                    add(labels, _value(name, state, attr, per_pod))
        if family.samples or name != XID_FIELD:  # no Xid row at all: no HELP/TYPE either
            families.append(family)
    return families


class Exporter:
    """State of one exporter: the node's GPUs, the pods on them, faults, an HTTP client."""

    def __init__(
        self,
        hostname: str = "node-1",
        gpus: int = 2,
        *,
        pods: PodSource | None = None,
        layout: Layout | None = None,
        spec: GpuSpec | None = None,
    ) -> None:
        if gpus < 1:
            raise ValueError("at least one GPU is needed")
        self.spec = spec or GpuSpec()
        self.layout = layout or Layout()
        self.pods = pods or static_pods([])
        self.slots = self.layout.slots(self.spec, hostname, gpus)
        self.allocator = Allocator(self.slots, self.layout.pods_per_slot())
        self.faults = {str(i): DeviceFaults() for i in range(gpus)}
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

    async def _load(self, claim: PodClaim) -> VllmLoad:
        if claim.vllm_url is None:
            return VllmLoad(reachable=False)
        if self._client is None:
            timeout = aiohttp.ClientTimeout(total=STATE_TIMEOUT_SECONDS)
            self._client = aiohttp.ClientSession(timeout=timeout)
        try:
            async with self._client.get(f"{claim.vllm_url}/drill/state") as response:
                if response.status != 200:
                    return VllmLoad(reachable=False)
                return VllmLoad.from_state(await response.json())
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return VllmLoad(reachable=False)

    async def states(self) -> list[SlotState]:
        """Every slot with its pods and fresh readings (vLLM states fetched concurrently)."""
        placed = self.allocator.assign(list(self.pods()))
        claims = {claim.key: claim for pods in placed.values() for claim, _ in pods}
        loads = dict(
            zip(
                claims, await asyncio.gather(*(self._load(c) for c in claims.values())), strict=True
            )
        )
        out = []
        for position, slot in enumerate(self.slots):
            pods = placed.get(position, [])
            with_load = [(claim, loads[claim.key]) for claim, _ in pods]
            reading = read_slot(self.spec, slot, with_load, self.faults[slot.index])
            out.append(SlotState(slot, pods, reading))
        return out

    async def render(self) -> bytes:
        """The exposition text of one scrape."""
        self._snapshot.families = render_families(self.spec, self.layout, await self.states())
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
        """`GET /drill/state`: layout, faults and current readings of every slot."""
        states = await self.states()
        return {
            "layout": self.layout.text(),
            "exporter_fault": self.exporter_fault or "none",
            "hung_scrapes": self.hung_scrapes,
            "gpus": [
                {
                    "gpu": s.slot.index,
                    "instance_id": s.slot.instance_id,
                    "uuid": s.slot.uuid,
                    "pods": [f"{c.namespace}/{c.pod}" for c, _ in s.pods],
                    "faults": self.faults[s.slot.index].describe(),
                    "fb_used_mib": s.reading.fb_used_mib,
                    "fb_free_mib": s.reading.fb_free_mib,
                    "fb_reserved_mib": s.reading.fb_reserved_mib,
                    "util_pct": s.reading.util_pct,
                    "temp_c": s.reading.temp_c,
                    "power_w": s.reading.power_w,
                    "xid": s.reading.xid,
                }
                for s in states
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
    if xid is not None and (isinstance(xid, bool) or xid not in XID_MESSAGES):
        known = ", ".join(map(str, XID_MESSAGES))
        problems.append(f"xid: one of the Xids whose err_msg the simulator knows ({known})")
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
