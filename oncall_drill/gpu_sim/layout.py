"""The label layouts of dcgm-exporter series, and how Prometheus scrapes them.

The default is what a default Helm install of dcgm-exporter gives (4.5.3-4.8.2, the
`deployment/` chart): node label `Hostname`, the kubelet's pod mapping as `namespace`/`pod`/
`container`, no GPU sharing, no MIG, scraped through the chart's ServiceMonitor with
`honorLabels: false` — prometheus-operator's target labels `namespace`/`pod`/`container` name
the exporter's own pod, so Prometheus renames the workload's to `exported_*`. Each other
layout is an option (`--dcgm-layout`, comma-separated):

* `honor-labels`: the ServiceMonitor with `honorLabels: true` (the workload keeps `pod`);
* `hostname`: the node label `hostname` (dcgm-exporter main, commit d5e5f51);
* `virtual-gpus`: `KUBERNETES_VIRTUAL_GPUS=true` with time-slicing (2 replicas per GPU):
  `FB_USED`/`GPU_UTIL` as a device row plus per-pod rows, other gauges copied per pod, each
  pod row with `vgpu` (`internal/pkg/transformation/kubernetes.go`, `process_metrics.go`).
  Two vLLM pods at the default 0.92 over-commit a shared card (a real second vLLM would fail
  to start): GPUMemoryHigh fires, the "another process shares the GPU" case;
* `mig`: MIG mode, each GPU split into instances with `GPU_I_ID`/`GPU_I_PROFILE` under the
  parent's `gpu`/`UUID`; `GPU_UTIL` is not reported for instances.

Label names and values follow `internal/pkg/rendermetrics/render_metrics.go` (prometheus_client
writes them sorted; their order means nothing to Prometheus).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from oncall_drill.gpu_sim.devices import DRIVER_VERSION, GpuSpec, PodClaim, Slot

OPTIONS = ("helm", "honor-labels", "hostname", "virtual-gpus", "mig")
#: The exporter's own pod as prometheus-operator labels its target (Helm chart: container
#: `exporter`, Service and job `dcgm-exporter`, endpoint port `metrics`).
EXPORTER_TARGET_LABELS = {
    "namespace": "monitoring",
    "pod": "dcgm-exporter-5q8rt",
    "container": "exporter",
    "service": "dcgm-exporter",
    "endpoint": "metrics",
}
TIME_SLICING_REPLICAS = 2


@dataclass(frozen=True)
class Layout:
    honor_labels: bool = False
    hostname_label: Literal["Hostname", "hostname"] = "Hostname"
    virtual_gpus: bool = False
    mig: bool = False

    @classmethod
    def parse(cls, text: str) -> Layout:
        """`helm` (the default) or a comma-separated list of the options; ValueError else."""
        words = [w.strip() for w in text.split(",") if w.strip()]
        unknown = [w for w in words if w not in OPTIONS]
        if unknown or not words:
            raise ValueError(
                f"--dcgm-layout {text!r}: expected a comma-separated list of {', '.join(OPTIONS)}"
            )
        return cls(
            honor_labels="honor-labels" in words,
            hostname_label="hostname" if "hostname" in words else "Hostname",
            virtual_gpus="virtual-gpus" in words,
            mig="mig" in words,
        )

    def text(self) -> str:
        """The inverse of `parse`."""
        words = [
            name
            for name, on in (
                ("honor-labels", self.honor_labels),
                ("hostname", self.hostname_label == "hostname"),
                ("virtual-gpus", self.virtual_gpus),
                ("mig", self.mig),
            )
            if on
        ]
        return ",".join(words) or "helm"

    def slots(self, spec: GpuSpec, hostname: str, gpus: int) -> list[Slot]:
        """What the device plugin can hand out: GPUs, or their MIG instances."""
        if not self.mig:
            return [Slot(str(i), hostname) for i in range(gpus)]
        # H100 MIG GPU instance ids of two 3g.40gb instances are 1 and 2.
        return [
            Slot(str(i), hostname, str(g + 1), spec.mig_profile)
            for i in range(gpus)
            for g in range(spec.mig_instances)
        ]

    def pods_per_slot(self) -> int:
        return TIME_SLICING_REPLICAS if self.virtual_gpus else 1

    def device_labels(self, spec: GpuSpec, slot: Slot) -> dict[str, str]:
        """The labels of a row with no pod, in dcgm-exporter's order."""
        labels = {
            "gpu": slot.index,
            "UUID": slot.uuid,
            "pci_bus_id": slot.pci_bus_id,
            "device": f"nvidia{slot.index}",
            "modelName": spec.model_name,
        }
        if slot.instance_id:
            labels |= {"GPU_I_PROFILE": slot.profile or "", "GPU_I_ID": slot.instance_id}
        labels[self.hostname_label] = slot.hostname
        labels["DCGM_FI_DRIVER_VERSION"] = DRIVER_VERSION
        return labels

    def pod_labels(self, spec: GpuSpec, slot: Slot, claim: PodClaim, vgpu: int) -> dict[str, str]:
        """A row about one pod: the device labels, then the attributes in sorted order."""
        labels = self.device_labels(spec, slot)
        labels |= {"container": claim.container, "namespace": claim.namespace, "pod": claim.pod}
        if self.virtual_gpus:
            labels["vgpu"] = str(vgpu)
        return labels

    def scrape_config(self, job: str, target: str, interval: str = "1s") -> dict[str, Any]:
        """The Prometheus job that scrapes the exporter as the Helm chart's ServiceMonitor
        would: the exporter pod's target labels, `honor_labels` as the layout says."""
        return {
            "job_name": job,
            "scrape_interval": interval,
            "honor_labels": self.honor_labels,
            "static_configs": [{"targets": [target], "labels": dict(EXPORTER_TARGET_LABELS)}],
        }
