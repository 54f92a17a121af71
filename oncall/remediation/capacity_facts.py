"""Reading the capacity preflight's facts (docs/architecture.md §3, the write path): what
`oncall.remediation.capacity.assess` judges, read at preview time and again just before the
write.

From the Kubernetes API: the workload's pods (its Deployment's `selector.matchLabels`), which
are Ready and serving, each one's effective cap `min(--max-num-seqs, --max-num-active-seqs)`
from its own container args (`oncall.model.vllm_args`), the time a pod took from its
container's `startedAt` to its Ready condition (the slowest of the current pods: the
replacement is expected to take as long), `terminationGracePeriodSeconds` and the Deployment's
rollout strategy.

From Prometheus (the vLLM pack's series, labelled `pod` by Kubernetes discovery, as the
`vllm.rates` probe reads them): each pod's running and waiting sequences, KV-cache usage, the
increase of its preemptions over `guards.capacity_window`, and the service's P99 end-to-end
latency. A pod with no series (its /metrics not scraped: a missing vLLM endpoint) reads as
None, which the assessment calls `unknown`; nonsense values (a forged answer) are passed on as
read, for the assessment to find implausible. Prometheus not answering, or answering with
something that is not its API (an SSO login page), leaves every load unread.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.vllm_args import parse_max_num_active_seqs, parse_max_num_seqs
from oncall.remediation.capacity import CapacityFacts, PodsTaken, ReplicaLoad

Obj = dict[str, Any]
#: vLLM's --max-num-seqs when the args do not set it: 256 (1024 on some large GPUs). The
#: lower value is assumed: fewer free slots, and "at the cap" sooner: the cautious side.
DEFAULT_MAX_NUM_SEQS = 256


class PodReader(Protocol):
    """The Kubernetes reads the preflight needs (KubeWriter has them)."""

    async def get_deployment(self, namespace: str, name: str) -> Obj: ...

    async def list_pods(
        self,
        namespace: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]: ...


@dataclass(frozen=True)
class Load:
    """One pod's vLLM numbers as Prometheus has them (None: no series)."""

    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    preemptions: float | None = None


@dataclass(frozen=True)
class Loads:
    """Every pod's `Load`, the P99 latency, and why nothing could be read (or None)."""

    pods: Mapping[str, Load]
    p99_latency_s: float | None = None
    error: str | None = None


def load_queries(namespace: str, window_s: float) -> dict[str, str]:
    """fact -> PromQL, per pod (`by (pod)`), both vLLM generations' KV name (backends.md §1.5)."""
    sel = f'{{namespace="{namespace}"}}'
    window = f"{max(1, math.ceil(window_s))}s"
    kv = f"vllm:kv_cache_usage_perc{sel} or vllm:gpu_cache_usage_perc{sel}"
    return {
        "running": f"sum by (pod) (vllm:num_requests_running{sel})",
        "waiting": f"sum by (pod) (vllm:num_requests_waiting{sel})",
        "kv_cache_usage": f"max by (pod) ({kv})",
        "preemptions": f"sum by (pod) (increase(vllm:num_preemptions_total{sel}[{window}]))",
        "p99": "histogram_quantile(0.99, sum by (le) "
        f"(rate(vllm:e2e_request_latency_seconds_bucket{sel}[{window}])))",
    }


async def read_loads(prometheus: PrometheusClient, namespace: str, window_s: float) -> Loads:
    """Each pod's load in `namespace`, and the P99 end-to-end latency, from Prometheus."""
    queries = load_queries(namespace, window_s)
    try:
        answers = await asyncio.gather(*(prometheus.query(q) for q in queries.values()))
    except BackendError as exc:
        return Loads({}, None, f"Prometheus did not answer the load queries: {exc}")
    by_fact = dict(zip(queries, answers, strict=True))
    values: dict[str, dict[str, float]] = {}
    for fact, samples in by_fact.items():
        if fact == "p99":
            continue
        for sample in samples:
            pod = sample.labels.get("pod")
            if pod:
                values.setdefault(pod, {})[fact] = float(sample.value)
    p99 = next((float(s.value) for s in by_fact["p99"]), None)
    if p99 is not None and not math.isfinite(p99):
        p99 = None  # NaN: no requests finished in the window
    pods = {pod: Load(**facts) for pod, facts in values.items()}
    return Loads(pods, p99)


def match_labels(deployment: Obj) -> str | None:
    """The Deployment's `selector.matchLabels` as a label selector ("app=vllm")."""
    labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or None


def _condition(pod: Obj, kind: str) -> Obj | None:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), None)


def serving(pod: Obj) -> bool:
    """Ready and not on its way out."""
    ready = _condition(pod, "Ready")
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    return bool(ready and ready.get("status") == "True" and not deleting)


def _time(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def time_to_ready(pod: Obj) -> float | None:
    """Seconds from the first container's `startedAt` to the pod's Ready condition."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    started = _time(((statuses[0].get("state") or {}).get("running") or {}).get("startedAt")) \
        if statuses else None  # fmt: skip
    ready = _condition(pod, "Ready")
    became = _time(ready.get("lastTransitionTime")) if ready else None
    if started is None or became is None or became < started:
        return None
    return (became - started).total_seconds()


def effective_cap(pod: Obj) -> int | None:
    """min(--max-num-seqs, --max-num-active-seqs) of the pod's first container."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers:
        return None
    command, args = containers[0].get("command"), containers[0].get("args")
    seqs = parse_max_num_seqs(command, args)
    active = parse_max_num_active_seqs(command, args)
    cap = seqs.value
    if cap is None and seqs.form == "default":
        cap = DEFAULT_MAX_NUM_SEQS
    if cap is None:
        return None
    return min(cap, active.value) if active.value is not None else cap


def _name(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


def strategy(deployment: Obj) -> dict[str, Any]:
    """The Deployment's replicas and rolling-update strategy, as written."""
    spec = deployment.get("spec") or {}
    rolling = (spec.get("strategy") or {}).get("rollingUpdate") or {}
    return {
        "replicas": spec.get("replicas"),
        "type": (spec.get("strategy") or {}).get("type", "RollingUpdate"),
        "max_surge": rolling.get("maxSurge"),
        "max_unavailable": rolling.get("maxUnavailable"),
    }


def facts_of(
    pods: Sequence[Obj],
    loads: Loads,
    taken: PodsTaken,
    kv_threshold: float,
) -> CapacityFacts:
    """The assessment's facts: the taken pods and the other serving ones, with their loads."""
    ready = [p for p in pods if serving(p)]

    def replica(pod: Obj) -> ReplicaLoad:
        load = loads.pods.get(_name(pod)) or Load()
        return ReplicaLoad(
            _name(pod), load.running, load.waiting, load.kv_cache_usage, load.preemptions,
            effective_cap(pod),
        )  # fmt: skip

    names = set(taken.pods)
    if not names and taken.busiest:
        busiest = sorted(ready, key=lambda p: _busy(loads.pods.get(_name(p))), reverse=True)
        names = {_name(p) for p in busiest[: taken.busiest]}
    affected = [p for p in pods if _name(p) in names]
    others = [p for p in ready if _name(p) not in names]
    readiness = [t for t in (time_to_ready(p) for p in ready) if t is not None]
    graces = [(p.get("spec") or {}).get("terminationGracePeriodSeconds") for p in affected]
    grace = max((float(g) for g in graces if isinstance(g, int | float)), default=None)
    return CapacityFacts(
        affected=tuple(replica(p) for p in affected),
        others=tuple(replica(p) for p in others),
        kv_threshold=kv_threshold,
        time_to_ready_s=max(readiness) if readiness else None,
        grace_period_s=grace,
        p99_latency_s=loads.p99_latency_s,
    )


def _busy(load: Load | None) -> float:
    if load is None:
        return -1.0
    return (load.running or 0) + (load.waiting or 0)


def loads_numbers(facts: CapacityFacts) -> list[dict[str, Any]]:
    """Every replica's numbers, for the preview and the audit record."""
    rows: Iterable[tuple[str, ReplicaLoad]] = [
        *(("taken", r) for r in facts.affected),
        *(("other", r) for r in facts.others),
    ]
    return [
        {
            "pod": r.pod, "role": role, "running": r.running, "waiting": r.waiting,
            "kv_cache_usage": r.kv_cache_usage, "preemptions": r.preemptions, "cap": r.cap,
        }
        for role, r in rows
    ]  # fmt: skip
