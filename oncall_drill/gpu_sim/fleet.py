"""The fleet's GPU exporters: one dcgm-exporter per node, as the DaemonSet runs them.

`drill up --fleet` has 50 nodes of 8 GPUs (400). The first node's exporter is the drill's own
(`/metrics`, the vLLM pods on it); every other node's exporter is mounted on the same port under
`/nodes/<node>/metrics`, and Prometheus scrapes each as its own target (`__metrics_path__`), with
the exporter pod's labels and an `instance` of its own, as the Helm chart's ServiceMonitor would
give 50 exporter pods. A node's GPU pods are the simulator's pods on that node holding
`nvidia.com/gpu` (none of them runs a process: memory held as vLLM sizes it, no load).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from oncall_drill.gpu_sim.devices import PodClaim
from oncall_drill.gpu_sim.layout import EXPORTER_TARGET_LABELS, Layout
from oncall_drill.gpu_sim.podresources import GPU_RESOURCE, PodSource
from oncall_drill.gpu_sim.server import Exporter, build_app
from oncall_drill.kube_sim import KubeSim
from oncall_drill.kube_sim.resources import PODS

FLEET_JOB = "dcgm-exporter-fleet"
FLEET_SCRAPE_INTERVAL = "10s"  # 49 exporters: scraped less often than the drill's own


def metrics_path(node: str) -> str:
    return f"/nodes/{node}/metrics"


class NodeClaims:
    """The GPU-holding containers of every node, rebuilt in one pass after pods changed."""

    def __init__(self, sim: KubeSim) -> None:
        self.sim = sim
        self._seen = -1
        self._by_node: dict[str, list[PodClaim]] = {}

    def of(self, node: str) -> list[PodClaim]:
        seen = self.sim.store.changed(PODS)
        if seen != self._seen:
            self._seen, self._by_node = seen, self._build()
        return self._by_node.get(node, [])

    def _build(self) -> dict[str, list[PodClaim]]:
        by_node: dict[str, list[PodClaim]] = {}
        for pod in self.sim.store.scan(PODS):
            meta, spec = pod["metadata"], pod.get("spec") or {}
            if meta.get("deletionTimestamp") or not spec.get("nodeName"):
                continue
            for container in spec.get("containers") or []:
                limits = (container.get("resources") or {}).get("limits") or {}
                gpus = int(str(limits.get(GPU_RESOURCE, "0")) or 0)
                if gpus > 0:
                    by_node.setdefault(spec["nodeName"], []).append(
                        PodClaim(
                            namespace=str(meta["namespace"]),
                            pod=str(meta["name"]),
                            container=str(container.get("name") or ""),
                            gpus=gpus,
                        )
                    )
        return by_node

    def source(self, node: str) -> PodSource:
        return lambda: self.of(node)


def node_exporters(
    sim: KubeSim, nodes: list[str], gpus: int, layout: Layout
) -> dict[str, Exporter]:
    claims = NodeClaims(sim)
    return {node: Exporter(node, gpus, pods=claims.source(node), layout=layout) for node in nodes}


def mount(app: web.Application, exporters: dict[str, Exporter]) -> None:
    """Each node's exporter under `/nodes/<node>/` of the drill exporter's application."""
    for node, exporter in exporters.items():
        app.add_subapp(f"/nodes/{node}/", build_app(exporter))


def scrape_config(layout: Layout, target: str, nodes: list[str]) -> dict[str, Any]:
    """The Prometheus job over the fleet's exporters (one target per node)."""
    configs = []
    for node in nodes:
        labels = dict(EXPORTER_TARGET_LABELS)
        labels |= {
            "pod": f"dcgm-exporter-{node.rpartition('-')[2]:0>5}",
            "instance": f"{node}:9400",
            "__metrics_path__": metrics_path(node),
        }
        configs.append({"targets": [target], "labels": labels})
    job = layout.scrape_config(FLEET_JOB, target, FLEET_SCRAPE_INTERVAL)
    job["static_configs"] = configs
    return job
