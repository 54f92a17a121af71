"""kube-state-metrics-style series about the simulated cluster, rendered on each scrape.

The names and labels are kube-state-metrics' own, so alert rules written for a real cluster
(`kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}`,
`kube_pod_container_status_restarts_total`, ...) work unchanged against the drill.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from oncall.drill.kube_sim import KubeSim
from oncall.drill.kube_sim.resources import NODES

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ClusterStateCollector(Collector):
    def __init__(self, sim: KubeSim, namespace: str) -> None:
        self.sim = sim
        self.namespace = namespace

    def collect(self) -> Iterator[Metric]:
        restarts = CounterMetricFamily(
            "kube_pod_container_status_restarts",
            "The number of container restarts per container.",
            labels=["namespace", "pod", "container"],
        )
        last_reason = GaugeMetricFamily(
            "kube_pod_container_status_last_terminated_reason",
            "Describes the last reason the container was in terminated state.",
            labels=["namespace", "pod", "container", "reason"],
        )
        ready = GaugeMetricFamily(
            "kube_pod_status_ready",
            "Describes whether the pod is ready to serve requests.",
            labels=["namespace", "pod", "condition"],
        )
        phase = GaugeMetricFamily(
            "kube_pod_status_phase",
            "The pods current phase.",
            labels=["namespace", "pod", "phase"],
        )
        for pod in self.sim.pods(self.namespace):
            meta: dict[str, Any] = pod.get("metadata") or {}
            status: dict[str, Any] = pod.get("status") or {}
            name = str(meta.get("name"))
            is_ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            for condition in ("true", "false"):
                ready.add_metric(
                    [self.namespace, name, condition], float(is_ready == (condition == "true"))
                )
            phase.add_metric([self.namespace, name, str(status.get("phase", "Unknown"))], 1.0)
            for container in status.get("containerStatuses") or []:
                labels = [self.namespace, name, str(container.get("name"))]
                restarts.add_metric(labels, float(container.get("restartCount", 0)))
                terminated = (container.get("lastState") or {}).get("terminated")
                if terminated:
                    last_reason.add_metric([*labels, str(terminated.get("reason", ""))], 1.0)
        yield from (restarts, last_reason, ready, phase)
        yield from self._nodes()

    def _nodes(self) -> Iterator[Metric]:
        node_condition = GaugeMetricFamily(
            "kube_node_status_condition",
            "The condition of a cluster node.",
            labels=["node", "condition", "status"],
        )
        for node in self.sim.store.list(NODES):
            name = str((node.get("metadata") or {}).get("name"))
            for condition in (node.get("status") or {}).get("conditions") or []:
                for status in ("true", "false", "unknown"):
                    value = float(str(condition.get("status", "")).lower() == status)
                    node_condition.add_metric([name, str(condition.get("type")), status], value)
        yield node_condition


def metrics_app(sim: KubeSim, namespace: str) -> web.Application:
    registry = CollectorRegistry()
    registry.register(ClusterStateCollector(sim, namespace))

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app
