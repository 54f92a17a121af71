"""GPU probes.

`gpu.devices`: memory, utilisation, temperature, power, ECC and Xid of each GPU (or MIG
instance) and the pods using it. Read through NVML on this host, or from dcgm-exporter metrics
in Prometheus (every label layout: `oncall.backends.dcgm`); `auto` uses NVML when it starts
here and otherwise DCGM, saying why in `hint`. The same numbers by hand:

    nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total,utilization.gpu,\
temperature.gpu,power.draw --format=csv
    curl -s 'http://PROMETHEUS:9090/api/v1/query' \
        --data-urlencode 'query={__name__=~"DCGM_FI_DEV_(FB_USED|FB_FREE|…|XID_ERRORS)"}'

`gpu.vllm_memory`: the `--gpu-memory-utilization` a vLLM Deployment runs with, the fraction of
each GPU vLLM pre-allocates at start (`oncall.probes.gpu_args`):

    kubectl get deployment NAME -n NS -o yaml
"""

from __future__ import annotations

import socket
from typing import Literal

from pydantic import Field

from oncall.backends import from_settings
from oncall.backends.dcgm import dcgm_devices, dcgm_query
from oncall.backends.gpu import (
    DCGM_HINT,
    GpuDevice,
    NvmlClient,
    is_this_host,
    nvml_last_outcome,
)
from oncall.backends.kube import BACKEND as KUBE_BACKEND
from oncall.errors import BackendError
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext
from oncall.probes.gpu_args import DEFAULT_GPU_MEMORY_UTILIZATION, parse_gpu_memory_utilization
from oncall.probes.kube import kube_reader, kubectl, vllm_container
from oncall.probes.prometheus import curl_query, prometheus_client

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
        None,
        description="Only this node's GPUs (DCGM `Hostname` or `hostname`); NVML reads this "
        "host only.",
    )


class VllmMemoryParams(ProbeParams):
    deployment: str = Field(description="The vLLM Deployment's name.")
    namespace: str | None = Field(None, description="Default: the settings' namespace.")
    container: str | None = Field(None, description="Default: the container mentioning vllm.")


async def nvml_client(ctx: ProbeContext) -> NvmlClient:
    """The run's shared NVML client (NVML is initialised once, on first read)."""
    return await ctx.client("nvml", lambda: from_settings.nvml_client(ctx.settings.gpu))


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


def _unattributed_mib(device: GpuDevice) -> float | None:
    """Device memory no pod's processes account for (GPU sharing's per-pod split only)."""
    shares = [p.memory_used_mib for p in device.pods]
    if device.memory_used_mib is None or not shares or None in shares:
        return None
    return max(0.0, device.memory_used_mib - sum(s for s in shares if s is not None))


def _where(device: GpuDevice) -> str:
    """`node/gpuN` or `node/gpuN/migI`, for summaries."""
    node = f"{device.node}/" if device.node else ""
    mig = f"/mig{device.instance_id}" if device.instance_id else ""
    return f"{node}gpu{device.index}{mig}"


def _device_facts(device: GpuDevice) -> Facts:
    return {
        "where": _where(device),
        "index": device.index,
        "uuid": device.uuid,
        "name": device.name,
        "node": device.node,
        "instance_id": device.instance_id,
        "mig_profile": device.mig_profile,
        "memory_used_mib": device.memory_used_mib,
        "memory_total_mib": device.memory_total_mib,
        "memory_free_mib": device.memory_free_mib,
        "memory_reserved_mib": device.memory_reserved_mib,
        "memory_used_ratio": device.memory_used_ratio,
        "utilization_ratio": device.utilization_ratio,
        "temperature_c": device.temperature_c,
        "power_w": device.power_w,
        "ecc_uncorrected": device.ecc_uncorrected,
        "last_xid": device.last_xid,
        "processes": [{"pid": p.pid, "used_mib": p.used_mib} for p in device.processes],
        "pods": [
            {
                "namespace": p.namespace,
                "pod": p.pod,
                "container": p.container,
                "memory_used_mib": p.memory_used_mib,
            }
            for p in device.pods
        ],
        "unattributed_mib": _unattributed_mib(device),
        # Summaries cannot join a list (CEL has no join here): the pods as one text.
        "pods_text": ", ".join(
            f"{p.namespace}/{p.pod}" if p.namespace else p.pod for p in device.pods
        ),
    }


async def run_devices(ctx: ProbeContext, params: DevicesParams) -> Facts:
    """Facts: `source` ("nvml" | "dcgm"); `devices`: [{where ("node/gpuN[/migI]"), index,
    uuid, name, node, instance_id and mig_profile (MIG instances; else None), memory_used_mib,
    memory_total_mib (used + free + reserved), memory_free_mib, memory_reserved_mib,
    memory_used_ratio (used / (used + free), 0–1), utilization_ratio (0–1), temperature_c,
    power_w, ecc_uncorrected, last_xid, processes: [{pid, used_mib}] (NVML), pods:
    [{namespace, pod, container, memory_used_mib}] (DCGM's pod mapping; memory_used_mib only
    with GPU sharing's per-pod split), unattributed_mib (used memory no pod accounts for, with
    that split; else None), pods_text ("ns/pod, ..." for summaries)}]; `fullest` (the device
    with the highest memory_used_ratio, or None); `count`, `max_memory_used_ratio`,
    `min_memory_free_mib`, `total_free_mib` (None when no device reports them); `xid_count`
    (devices whose last Xid is not 0); `hint`: why the other source was not used, or None.
    A reading a source lacks is None (ECC on consumer cards; Xids through NVML are not read:
    `last_xid` None; DCGM has no `processes`). `absent`: fact -> why not seen: every device
    fact when no GPU was found; `xid_count` when no GPU has an Xid reading (NVML, or a
    dcgm-exporter without the Xid series); else empty."""
    source, devices, hint = await _read(ctx, params)
    ratios = [d.memory_used_ratio for d in devices if d.memory_used_ratio is not None]
    free = [d.memory_free_mib for d in devices if d.memory_free_mib is not None]
    listed = [_device_facts(d) for d in devices]
    known = [f for f in listed if f["memory_used_ratio"] is not None]
    return {
        "source": source,
        "devices": listed,
        "fullest": max(known, key=lambda f: f["memory_used_ratio"], default=None),
        "count": len(devices),
        "max_memory_used_ratio": max(ratios, default=None),
        "min_memory_free_mib": min(free, default=None),
        "total_free_mib": sum(free) if free else None,
        "xid_count": sum(1 for d in devices if d.last_xid),
        "hint": hint,
        "absent": _absent(source, devices, params.node),
    }


#: Facts about the devices found: none of them is seen when no device is.
DEVICE_FACTS = ("fullest", "max_memory_used_ratio", "min_memory_free_mib", "total_free_mib")


def _absent(source: str, devices: tuple[GpuDevice, ...], node: str | None) -> dict[str, str]:
    """fact -> why it was not seen: no GPU at all, or no Xid reading on any GPU."""
    where = f" on {node}" if node else ""
    if not devices:
        why = f"no GPU found through {source}{where}"
        return dict.fromkeys([*DEVICE_FACTS, "xid_count"], why)
    if any(d.last_xid is not None for d in devices):
        return {}
    if source == "nvml":
        why = (
            "NVML gives no Xid value: read them through DCGM (source: dcgm) or dmesg | grep -i xid"
        )
    else:
        # One GPU's series shows the exporter collects Xids: the others then had none.
        why = (
            f"no DCGM_FI_DEV_XID_ERRORS series for the {len(devices)} GPUs{where}: "
            "dcgm-exporter exports it only after a GPU's first Xid (as a Helm-default "
            "install does) or does not collect it; read the driver's log on the node: "
            "dmesg | grep -i xid"
        )
    return {"xid_count": why}


def devices_equivalent(ctx: ProbeContext, params: DevicesParams) -> str:
    """nvidia-smi for NVML, curl to Prometheus for DCGM; for `auto`, the source it would use
    (DCGM once NVML failed to start in this process, or when `node` is another host)."""
    source = _source(ctx, params)
    if source == "auto":
        nvml_out = nvml_last_outcome() == "unavailable" or _elsewhere(params.node) is not None
        source = "dcgm" if nvml_out else "nvml"
    if source == "nvml":
        return NVIDIA_SMI
    return curl_query(ctx.settings.prometheus, dcgm_query(params.node))


async def run_vllm_memory(ctx: ProbeContext, params: VllmMemoryParams) -> Facts:
    """Facts: `deployment`, `container`, `gpu_memory_utilization` (the fraction of each GPU
    vLLM pre-allocates: the container's `--gpu-memory-utilization`, else vLLM's default),
    `configured` (the value written in the spec, None when absent or not a number), `form`
    ("flag", "shell", "default", "unresolved": a `$(VAR)` or text vLLM would reject, or
    "kv_cache_memory_bytes": that flag sizes the KV pool and the fraction decides nothing, so
    `gpu_memory_utilization` is None), `kv_cache_memory_bytes` (bytes, None when unset),
    `default` (0.92), `problem` (why "unresolved", else None).

    A `container` naming no container of the Deployment is a "not found" error.
    """
    reader = await kube_reader(ctx)
    namespace = params.namespace or ctx.settings.kubernetes.namespace
    dep = await reader.get_deployment(namespace, params.deployment)
    template = ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = [
        {
            "name": c.get("name"),
            "image": c.get("image"),
            "command": list(c.get("command") or []),
            "args": list(c.get("args") or []),
            "env": list(c.get("env") or []),
        }
        for c in template.get("containers") or []
    ]
    chosen = vllm_container(containers, params.container)
    if chosen is None:
        detail = f'deployment "{params.deployment}" has no container "{params.container}"'
        raise BackendError(KUBE_BACKEND, reader.target, "not found", detail)
    parsed = parse_gpu_memory_utilization(chosen["command"], chosen["args"], chosen["env"])
    return {
        "deployment": params.deployment,
        "container": chosen["name"],
        "gpu_memory_utilization": parsed.effective,
        "configured": parsed.value,
        "form": parsed.form,
        "kv_cache_memory_bytes": parsed.kv_cache_memory_bytes,
        "default": DEFAULT_GPU_MEMORY_UTILIZATION,
        "problem": parsed.problem,
    }


def vllm_memory_equivalent(ctx: ProbeContext, params: VllmMemoryParams) -> str:
    namespace = params.namespace or ctx.settings.kubernetes.namespace
    return kubectl(ctx, "get", "deployment", params.deployment, "-n", namespace, "-o", "yaml")


PROBES = (
    Probe(
        name="gpu.devices",
        backend="gpu",
        summary="GPU memory, utilisation, temperature, power, ECC, Xid and pods (NVML or DCGM).",
        params=DevicesParams,
        run=run_devices,
        equivalent=devices_equivalent,
        absent_facts=frozenset({*DEVICE_FACTS, "xid_count"}),
    ),
    Probe(
        name="gpu.vllm_memory",
        backend="kubernetes",
        summary="The --gpu-memory-utilization a vLLM Deployment pre-allocates of each GPU.",
        params=VllmMemoryParams,
        run=run_vllm_memory,
        equivalent=vllm_memory_equivalent,
    ),
)
