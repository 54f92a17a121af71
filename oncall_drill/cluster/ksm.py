"""kube-state-metrics-style series about the simulated cluster, rendered on each scrape.

The names and labels are kube-state-metrics' own (internal/store/pod.go, v2): every pod series
carries `namespace`, `pod` and `uid`; `kube_pod_status_phase` has all five phases at 0/1,
`kube_pod_status_ready` the conditions true/false/unknown, `kube_pod_owner` the controller; see
`fixtures/kube-state-metrics/pod_metrics.txt`. So alert rules written for a real cluster
(`kube_pod_container_status_last_terminated_reason{reason="OOMKilled"}`,
`kube_pod_container_status_restarts_total`, ...) work unchanged against the drill.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from oncall_drill.kube_sim import KubeSim
from oncall_drill.kube_sim.resources import NODES, PODS
from oncall_drill.kube_sim.selectors import labels_match, parse_label_selector

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
CONDITION_VALUES = ("true", "false", "unknown")
PodFilter = Callable[[dict[str, Any]], bool]


class ClusterStateCollector(Collector):
    """Pod series of the pods `select` accepts (node series too, with `nodes`)."""

    def __init__(self, sim: KubeSim, select: PodFilter, *, nodes: bool = True) -> None:
        self.sim = sim
        self.select = select
        self.nodes = nodes

    def collect(self) -> Iterator[Metric]:
        pod_labels = ["namespace", "pod", "uid"]  # descPodLabelsDefaultLabels
        restarts = CounterMetricFamily(
            "kube_pod_container_status_restarts",
            "The number of container restarts per container.",
            labels=[*pod_labels, "container"],
        )
        last_reason = GaugeMetricFamily(
            "kube_pod_container_status_last_terminated_reason",
            "Describes the last reason the container was in terminated state.",
            labels=[*pod_labels, "container", "reason"],
        )
        ready = GaugeMetricFamily(
            "kube_pod_status_ready",
            "Describes whether the pod is ready to serve requests.",
            labels=[*pod_labels, "condition"],
        )
        phase = GaugeMetricFamily(
            "kube_pod_status_phase",
            "The pods current phase.",
            labels=[*pod_labels, "phase"],
        )
        # kube-prometheus' KubePodNotReady joins on it (`owner_kind!="Job"`).
        owner = GaugeMetricFamily(
            "kube_pod_owner",
            "Information about the Pod's owner.",
            labels=[*pod_labels, "owner_kind", "owner_name", "owner_is_controller"],
        )
        # The stored pods, read-only (a fleet has thousands: no copies).
        for pod in self.sim.store.scan(PODS):
            if not self.select(pod):
                continue
            meta: dict[str, Any] = pod.get("metadata") or {}
            status: dict[str, Any] = pod.get("status") or {}
            base = [str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid", ""))]
            refs = meta.get("ownerReferences") or []
            for ref in refs:  # none: one series with "<none>" labels, as kube-state-metrics
                controller = str(bool(ref.get("controller"))).lower()
                owner.add_metric([*base, str(ref.get("kind")), str(ref.get("name")), controller], 1)
            if not refs:
                owner.add_metric([*base, "<none>", "<none>", "<none>"], 1)
            # One series per status of the Ready condition, 1 on the pod's (addConditionMetrics);
            # none while the pod has no Ready condition yet.
            for cond in status.get("conditions") or []:
                if cond.get("type") == "Ready":
                    now = str(cond.get("status", "")).lower()
                    for value in CONDITION_VALUES:
                        ready.add_metric([*base, value], float(now == value))
            # All five phases, 1 on the current one; none while the phase is unset.
            if status.get("phase"):
                for name in PHASES:
                    phase.add_metric([*base, name], float(status["phase"] == name))
            for container in status.get("containerStatuses") or []:
                labels = [*base, str(container.get("name"))]
                restarts.add_metric(labels, float(container.get("restartCount", 0)))
                # lastState keeps the previous termination until the next one replaces it, so
                # the series stays 1 long after the restart (hours, days), as on a real cluster.
                terminated = (container.get("lastState") or {}).get("terminated")
                if terminated and terminated.get("reason"):
                    last_reason.add_metric([*labels, str(terminated["reason"])], 1.0)
        yield from (restarts, last_reason, ready, phase, owner)
        if self.nodes:
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


def in_namespace(namespace: str, selector: str = "") -> PodFilter:
    """The pods of one namespace (matching a label selector)."""
    wanted = parse_label_selector(selector)
    return lambda pod: (
        pod["metadata"].get("namespace") == namespace
        and labels_match(wanted, pod["metadata"].get("labels"))
    )


def metrics_app(
    sim: KubeSim, namespace: str, *, selector: str = "", fleet: bool = False
) -> web.Application:
    """`/metrics`: the namespace's pods (those matching selector) and the nodes, rendered on each
    scrape. With fleet, also `/metrics/fleet`: every other pod, re-rendered only after pods
    changed (a 5,000-pod exposition takes the event loop for a while; Prometheus scrapes it
    less often, as big clusters scrape kube-state-metrics)."""
    select = in_namespace(namespace, selector)
    registry = CollectorRegistry()
    registry.register(ClusterStateCollector(sim, select))

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    if fleet:
        others = CollectorRegistry()
        others.register(ClusterStateCollector(sim, lambda pod: not select(pod), nodes=False))
        cache: dict[str, Any] = {"seen": -1, "body": b""}

        async def fleet_metrics(_request: web.Request) -> web.Response:
            seen = sim.store.changed(PODS)
            if seen != cache["seen"]:
                cache["seen"], cache["body"] = seen, generate_latest(others)
            return web.Response(body=cache["body"], headers={"Content-Type": CONTENT_TYPE})

        app.router.add_get("/metrics/fleet", fleet_metrics)
    return app
