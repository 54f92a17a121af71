"""GPU probe `gpu.devices`: memory, utilisation, temperature, power, ECC and XID of each GPU.

Read through NVML on this host, or from dcgm-exporter metrics in Prometheus; `auto` uses NVML
when it starts here and otherwise DCGM, saying why in `hint`. The same numbers by hand:

    nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,\
temperature.gpu,power.draw --format=csv
    curl -s 'http://PROMETHEUS:9090/api/v1/query' \
        --data-urlencode 'query={__name__=~"DCGM_FI_DEV_(FB_USED|FB_FREE|…|XID_ERRORS)"}'
"""

from __future__ import annotations

import shlex
import socket
from typing import Literal

from pydantic import Field

from oncall.backends.gpu import (
    DCGM_HINT,
    GpuDevice,
    NvmlClient,
    dcgm_devices,
    dcgm_query,
    is_this_host,
    nvml_last_outcome,
)
from oncall.errors import BackendError
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext
from oncall.probes.prometheus import prometheus_client

Source = Literal["auto", "nvml", "dcgm"]

NVIDIA_SMI = (
    "nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,"
    "temperature.gpu,power.draw --format=csv"
)


class DevicesParams(ProbeParams):
    source: Source | None = Field(
        None, description="nvml, dcgm, or auto (NVML if it starts here); default gpu.source."
    )
    node: str | None = Field(
        None, description="Only this node's GPUs (DCGM `Hostname`); NVML reads this host only."
    )


async def nvml_client(ctx: ProbeContext) -> NvmlClient:
    """The run's shared NVML client (NVML is initialised once, on first read)."""
    return await ctx.client("nvml", lambda: NvmlClient(timeout=ctx.settings.gpu.timeout))


def _source(ctx: ProbeContext, params: DevicesParams) -> Source:
    return params.source or ctx.settings.gpu.source


def _elsewhere(node: str | None) -> str | None:
    """Why NVML cannot answer for `node`, or None when it names this host (or no node)."""
    if node is None or is_this_host(node):
        return None
    return f"NVML reads only the GPUs of this host ({socket.gethostname()}), not of {node!r}"


async def _dcgm(ctx: ProbeContext, params: DevicesParams) -> tuple[GpuDevice, ...]:
    return await dcgm_devices(await prometheus_client(ctx), node=params.node)


async def _read(
    ctx: ProbeContext, params: DevicesParams
) -> tuple[str, tuple[GpuDevice, ...], str | None]:
    """(source used, devices, why the other source was not used)."""
    source = _source(ctx, params)
    if source == "dcgm":
        return "dcgm", await _dcgm(ctx, params), None
    elsewhere = _elsewhere(params.node)
    if source == "nvml":
        if elsewhere:
            raise BackendError("gpu", "nvml", "unavailable", f"{elsewhere}; {DCGM_HINT}")
        return "nvml", await (await nvml_client(ctx)).devices(), None
    hint = elsewhere
    if hint is None:
        try:
            devices = await (await nvml_client(ctx)).devices()
        except BackendError as exc:
            hint = f"NVML {exc.reason}: {exc.detail}" if exc.detail else f"NVML {exc.reason}"
        else:
            if devices:
                return "nvml", devices, None
            hint = "NVML found no GPU on this host"
    try:
        return "dcgm", await _dcgm(ctx, params), hint
    except BackendError as exc:
        # Both sources failed: say why for each, not only for the last one tried.
        detail = f"{exc.detail}; and {hint}" if exc.detail else hint
        raise BackendError(exc.backend, exc.target, exc.reason, detail) from exc


def _device_facts(device: GpuDevice) -> Facts:
    return {
        "index": device.index,
        "uuid": device.uuid,
        "name": device.name,
        "node": device.node,
        "memory_used_mib": device.memory_used_mib,
        "memory_total_mib": device.memory_total_mib,
        "memory_free_mib": device.memory_free_mib,
        "memory_used_ratio": device.memory_used_ratio,
        "utilization_ratio": device.utilization_ratio,
        "temperature_c": device.temperature_c,
        "power_w": device.power_w,
        "ecc_uncorrected": device.ecc_uncorrected,
        "last_xid": device.last_xid,
        "processes": [{"pid": p.pid, "used_mib": p.used_mib} for p in device.processes],
    }


async def run_devices(ctx: ProbeContext, params: DevicesParams) -> Facts:
    """Facts: `source` ("nvml" | "dcgm"), `devices` ([{index, uuid, name, node,
    memory_used_mib, memory_total_mib, memory_free_mib, memory_used_ratio (0–1),
    utilization_ratio (0–1), temperature_c, power_w, ecc_uncorrected, last_xid,
    processes: [{pid, used_mib}]}]), `count`, `max_memory_used_ratio`, `min_memory_free_mib`,
    `total_free_mib` (None when no device reports them), and `hint`: why the other source was
    not used, or None. A reading a source lacks is None (ECC on consumer cards, XIDs and
    processes through NVML are not read: `last_xid` None, DCGM has no `processes`)."""
    source, devices, hint = await _read(ctx, params)
    ratios = [d.memory_used_ratio for d in devices if d.memory_used_ratio is not None]
    free = [d.memory_free_mib for d in devices if d.memory_free_mib is not None]
    return {
        "source": source,
        "devices": [_device_facts(d) for d in devices],
        "count": len(devices),
        "max_memory_used_ratio": max(ratios, default=None),
        "min_memory_free_mib": min(free, default=None),
        "total_free_mib": sum(free) if free else None,
        "hint": hint,
    }


def devices_equivalent(ctx: ProbeContext, params: DevicesParams) -> str:
    """nvidia-smi for NVML, curl to Prometheus for DCGM; for `auto`, the source it would use
    (DCGM once NVML failed to start in this process, or when `node` is another host)."""
    source = _source(ctx, params)
    if source == "auto":
        nvml_out = nvml_last_outcome() == "unavailable" or _elsewhere(params.node) is not None
        source = "dcgm" if nvml_out else "nvml"
    if source == "nvml":
        return NVIDIA_SMI
    url = ctx.settings.prometheus.url.rstrip("/") + "/api/v1/query"
    query = "query=" + dcgm_query(params.node)
    return f"curl -s {shlex.quote(url)} --data-urlencode {shlex.quote(query)}"


PROBES = (
    Probe(
        name="gpu.devices",
        backend="gpu",
        summary="GPU memory, utilisation, temperature, power, ECC and XID (NVML or DCGM).",
        params=DevicesParams,
        run=run_devices,
        equivalent=devices_equivalent,
    ),
)
