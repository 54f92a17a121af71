"""GPU facts from dcgm-exporter's gauges in Prometheus, in every label layout it produces.

One instant query reads every `DCGM_FI_DEV_*` gauge oncall uses, plus the `up` series of the
exporters' scrape targets. The layouts read (shapes recorded in `fixtures/dcgm/`):

* The node label is `Hostname` in dcgm-exporter releases up to 4.5.3-4.8.2 and `hostname` on
  its main branch (commit d5e5f51): either is the node.
* The workload's labels. dcgm-exporter writes `namespace`, `pod`, `container` of the container
  the kubelet allocated the GPU to (none on an unallocated GPU). Its Helm chart's
  ServiceMonitor has `honorLabels: false`, so prometheus-operator's own target labels
  `namespace`/`pod`/`container` (the *exporter's* pod) win and the workload's arrive as
  `exported_namespace`/`exported_pod`/`exported_container`. With `honorLabels: true` the
  workload keeps `pod`, and an unallocated GPU shows the target's `pod` (the exporter's).
  So: `exported_pod` when present; else `pod` unless it is the `pod` of the target's own `up`
  series (the exporter's); else no workload.
* GPU sharing (`KUBERNETES_VIRTUAL_GPUS`, time-slicing or MPS): `FB_USED` and `GPU_UTIL` come
  as a device row (no workload) plus one row per pod holding that pod's processes only; every
  other gauge (`FB_FREE`, ...) comes once per pod with the device's value copied. Device totals
  come from the device row, or from one copy; per-pod rows are never added to them.
* MIG: each GPU instance has its own rows (`GPU_I_ID`, `GPU_I_PROFILE`) under the parent's
  `gpu` and `UUID`; each instance is a device of its own.
* `FB_RESERVED` (a default counter since 4.3.1-4.4.0) is part of the card's total:
  total = used + free + reserved. Older exporters lack it: total = used + free.
* `XID_ERRORS` since 4.0.0 carries `err_code`/`err_msg` labels, so each new Xid is a new
  series; on a default install there is no row at all until the first Xid (DCGM's blank value
  is skipped): such a device reads `last_xid` None (not reported), which the checklists count
  as no Xid. Two Xid rows of one device (an old series within the lookback) read the highest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oncall.backends.gpu import BACKEND, GpuDevice, GpuPod
from oncall.errors import BackendError
from oncall.model.metrics import Sample
from oncall.model.numbers import ascii_int

if TYPE_CHECKING:  # the client is only passed in: importing httpx is the caller's cost
    from oncall.backends.prometheus import PrometheusClient

#: dcgm-exporter gauge → attribute. FB_* are MiB, GPU_UTIL %, POWER_USAGE W; XID_ERRORS is
#: the last Xid seen (0 = none; it stays until the GPU is reset or the exporter restarts),
#: ECC_DBE_VOL_TOTAL the volatile double-bit (uncorrectable) ECC count (not a default counter).
DCGM_FIELDS = {
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "DCGM_FI_DEV_FB_FREE": "fb_free",
    "DCGM_FI_DEV_FB_RESERVED": "fb_reserved",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}
DCGM_SELECTOR = "__name__=~" + json.dumps(
    "DCGM_FI_DEV_(" + "|".join(n.removeprefix("DCGM_FI_DEV_") for n in DCGM_FIELDS) + ")"
)
NODE_LABELS = ("Hostname", "hostname")
EXPORTED = "exported_"

Workload = tuple[str | None, str, str | None]


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dcgm_query(node: str | None = None) -> str:
    """The one instant query: every DCGM gauge (of `node` only, under either node label) and
    the `up` series of the targets exporting them (to tell the exporter's own `pod` label)."""
    if node is None:
        gauges = "{" + DCGM_SELECTOR + "}"
    else:
        gauges = " or ".join(
            "{" + DCGM_SELECTOR + f",{label}={_quoted(node)}" + "}" for label in NODE_LABELS
        )
    return f"{gauges} or (up and on (job, instance) ({gauges}))"


def node_of(labels: dict[str, str]) -> str | None:
    """The node of a DCGM series: `Hostname` (releases) or `hostname` (main)."""
    return labels.get("Hostname") or labels.get("hostname") or None


def workload_of(labels: dict[str, str], exporter_pod: str | None) -> Workload | None:
    """(namespace, pod, container) of the workload a DCGM series is about, or None."""
    pod = labels.get(EXPORTED + "pod")
    if pod:
        namespace, container = (
            labels.get(EXPORTED + "namespace"),
            labels.get(EXPORTED + "container"),
        )
        return namespace or None, pod, container or None
    pod = labels.get("pod")
    if pod and pod != exporter_pod:
        return labels.get("namespace") or None, pod, labels.get("container") or None
    return None


def _clean(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


@dataclass
class _Rows:
    """Every series of one device (or MIG instance): the device's own rows and the per-pod."""

    labels: dict[str, str]
    device: dict[str, float] = field(default_factory=dict)
    per_pod: dict[Workload, dict[str, float]] = field(default_factory=dict)

    def add(self, attr: str, value: float, workload: Workload | None) -> None:
        values = self.device if workload is None else self.per_pod.setdefault(workload, {})
        if attr == "xid" and attr in values:  # two Xid series (err_code labels): the highest
            value = max(value, values[attr])
        values[attr] = value

    def get(self, attr: str) -> float | None:
        """The device's value: its own row, else a per-pod copy (equal copies; max to be safe).

        Without GPU sharing the one mapped row *is* the device row; with sharing, gauges other
        than FB_USED and GPU_UTIL exist only as per-pod copies of the device's value.
        """
        if attr in self.device:
            return _clean(self.device[attr])
        copies = [_clean(values.get(attr)) for values in self.per_pod.values()]
        known = [value for value in copies if value is not None]
        return max(known) if known else None

    def pods(self) -> tuple[GpuPod, ...]:
        # A per-pod FB_USED is that pod's share only when the device has its own FB_USED row.
        split = "fb_used" in self.device
        return tuple(
            GpuPod(ns, pod, container, _clean(values.get("fb_used")) if split else None)
            for (ns, pod, container), values in sorted(
                self.per_pod.items(), key=lambda item: (item[0][0] or "", item[0][1])
            )
        )

    def to_device(self) -> GpuDevice:
        used, free, reserved = self.get("fb_used"), self.get("fb_free"), self.get("fb_reserved")
        total = None if used is None or free is None else used + free + (reserved or 0.0)
        util, xid, ecc = self.get("util_pct"), self.get("xid"), self.get("ecc_dbe")
        index = self.labels.get("gpu", "")
        return GpuDevice(
            index=_index(index),
            uuid=self.labels.get("UUID") or self.labels.get("uuid") or "",
            name=self.labels.get("modelName", ""),
            node=node_of(self.labels),
            memory_used_mib=used,
            memory_total_mib=total,
            memory_free_mib=free,
            utilization_ratio=None if util is None else util / 100,
            temperature_c=self.get("temp_c"),
            power_w=self.get("power_w"),
            ecc_uncorrected=None if ecc is None else int(ecc),
            last_xid=None if xid is None else int(xid),
            memory_reserved_mib=reserved,
            instance_id=self.labels.get("GPU_I_ID") or None,
            mig_profile=self.labels.get("GPU_I_PROFILE") or None,
            pods=self.pods(),
        )


def _exporter_pods(samples: list[Sample]) -> dict[tuple[str, str], str]:
    """(job, instance) → the `pod` target label of that scrape target (from its `up`)."""
    found: dict[tuple[str, str], str] = {}
    for sample in samples:
        labels = sample.labels
        if labels.get("__name__") == "up" and labels.get("pod"):
            found[(labels.get("job", ""), labels.get("instance", ""))] = labels["pod"]
    return found


def _index(text: str) -> int:
    """A GPU or MIG-instance index label as a number; -1 when it spells none (ASCII only)."""
    found = ascii_int(text)
    return -1 if found is None else found


def _sort_key(device: GpuDevice) -> tuple[str, int, int, str]:
    instance = device.instance_id or ""
    return (
        device.node or "",
        device.index,
        _index(instance),
        device.uuid,
    )


def devices_from_dcgm(samples: Iterable[Sample]) -> tuple[GpuDevice, ...]:
    """Group DCGM samples into devices: one per (node, gpu, UUID, GPU_I_ID), by node and index."""
    listed = list(samples)
    exporter_pods = _exporter_pods(listed)
    rows: dict[tuple[str, str, str, str], _Rows] = {}
    for sample in listed:
        labels = sample.labels
        attr = DCGM_FIELDS.get(labels.get("__name__", ""))
        if attr is None:
            continue
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        key = (node_of(labels) or "", labels.get("gpu", ""), uuid, labels.get("GPU_I_ID", ""))
        exporter_pod = exporter_pods.get((labels.get("job", ""), labels.get("instance", "")))
        # Two jobs scraping one exporter give the same GPU twice: one device, either value.
        rows.setdefault(key, _Rows(labels)).add(
            attr, sample.value, workload_of(labels, exporter_pod)
        )
    return tuple(sorted((r.to_device() for r in rows.values()), key=_sort_key))


async def dcgm_devices(prom: PrometheusClient, *, node: str | None = None) -> tuple[GpuDevice, ...]:
    """Every GPU whose dcgm-exporter Prometheus scrapes (of `node` only, when given)."""
    devices = devices_from_dcgm(await prom.query(dcgm_query(node)))
    if not devices:
        where = f" with Hostname or hostname {node!r}" if node is not None else ""
        raise BackendError(
            BACKEND,
            prom.url,
            "no data",
            f"no DCGM_FI_DEV_* series{where} in Prometheus: dcgm-exporter is not scraped "
            "(check its scrape job or ServiceMonitor, and `up` of its targets)",
        )
    return devices
