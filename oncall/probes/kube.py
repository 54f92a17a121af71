"""Kubernetes probes: pods, events, a deployment (with its vLLM max-num-seqs) and nodes.

    kubectl get pods -n NS -l SELECTOR --field-selector metadata.name=NAME,spec.nodeName=NODE
    kubectl get events -n NS --field-selector involvedObject.kind=KIND,involvedObject.name=NAME
    kubectl get deployment NAME -n NS -o yaml
    kubectl describe nodes -l SELECTOR

One `KubeReader` per `ProbeContext` (key "kubernetes"), built on first use. Durations are
seconds as floats; timestamps are the API server's RFC 3339 strings. A missing namespace
parameter means the settings' `kubernetes.namespace`.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime

from pydantic import Field

from oncall.backends.from_settings import kube_reader as kube_reader_of
from oncall.backends.kube import BACKEND, CLUSTER_SCOPED_KINDS, KubeReader, rollout_status_of
from oncall.errors import BackendError
from oncall.model.kube_names import DNS_SUBDOMAIN, FIELD_NAME, NAME_MAX
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext
from oncall.probes.kube_facts import (
    EPOCH,
    event_facts,
    node_facts,
    parse_time,
    pod_facts,
)


class NamespacedParams(ProbeParams):
    namespace: str | None = Field(None, description="Default: the settings' namespace.")


class PodsParams(NamespacedParams):
    selector: str | None = Field(None, description="Label selector, e.g. app=vllm.")
    name: str | None = Field(
        None, pattern=DNS_SUBDOMAIN, max_length=NAME_MAX, description="Only the pod of this name."
    )
    node: str | None = Field(
        None,
        pattern=DNS_SUBDOMAIN,
        max_length=NAME_MAX,
        description="Only the pods on this node (spec.nodeName).",
    )


class EventsParams(NamespacedParams):
    kind: str = Field(description="Kind of the involved object: Pod, Deployment, Node, …")
    name: str | None = Field(
        None, pattern=FIELD_NAME, description="Name of the involved object; default all."
    )
    limit: int = Field(20, ge=1, le=500, description="Newest events kept.")


class DeploymentParams(NamespacedParams):
    name: str = Field(description="Deployment name.")
    container: str | None = Field(None, description="Container whose max-num-seqs to report.")


class NodesParams(ProbeParams):
    selector: str | None = Field(None, description="Label selector, e.g. nvidia.com/gpu.count.")


async def kube_reader(ctx: ProbeContext) -> KubeReader:
    """The run's shared Kubernetes reader."""
    return await ctx.client("kubernetes", lambda: kube_reader_of(ctx.settings.kubernetes))


def _namespace(ctx: ProbeContext, params: NamespacedParams) -> str:
    return params.namespace or ctx.settings.kubernetes.namespace


def kubectl(ctx: ProbeContext, *words: str) -> str:
    """The kubectl command line of these settings' kubeconfig and context, then `words`."""
    settings = ctx.settings.kubernetes
    argv = ["kubectl"]
    if settings.kubeconfig is not None:
        argv += ["--kubeconfig", str(settings.kubeconfig)]
    if settings.context:
        argv += ["--context", settings.context]
    return shlex.join([*argv, *words])


# -- kube.pods --------------------------------------------------------------------------


async def run_pods(ctx: ProbeContext, params: PodsParams) -> Facts:
    """Facts:

    - `pods`: one per pod, sorted by name: `name`, `uid`, `namespace`, `phase`, `reason`
      (the pod's status reason, e.g. "Evicted"), `ready` (condition Ready is True),
      `terminating` (deletion requested), `restarts` (sum over containers),
      `last_termination_reason` / `last_termination_exit_code` / `last_terminated_at` (of the
      latest container termination, current or previous: "OOMKilled", 137, RFC 3339; None if
      none), `node`, `age_s`, `resource_version`, and `containers`: [{`name`, `ready`,
      `restarts`, `state` ("running", "waiting", "terminated"; None before the first status),
      `waiting_reason` (e.g. "CrashLoopBackOff"), `last_termination_reason`}].
    - `count`, `ready_count`, `not_ready_count`, `restarts_total`.
    - `oom_killed`: names of pods whose latest termination is OOMKilled.
    - `crash_looping`: names of pods with a container waiting in CrashLoopBackOff.

    `selector`, `name` and `node` are the list's label and field selectors: the API server
    filters (a fleet's namespace is not listed whole), and a missing pod is `count` 0.
    """
    reader = await kube_reader(ctx)
    field_selector = _pod_fields(params)
    items = await reader.list_pods(_namespace(ctx, params), params.selector, field_selector)
    now = datetime.now(UTC)
    pods = sorted((pod_facts(p, now) for p in items), key=lambda p: str(p["name"]))
    ready = sum(1 for p in pods if p["ready"])
    return {
        "pods": pods,
        "count": len(pods),
        "ready_count": ready,
        "not_ready_count": len(pods) - ready,
        "restarts_total": sum(p["restarts"] for p in pods),
        "oom_killed": [p["name"] for p in pods if p["last_termination_reason"] == "OOMKilled"],
        "crash_looping": [
            p["name"]
            for p in pods
            if any(c["waiting_reason"] == "CrashLoopBackOff" for c in p["containers"])
        ],
    }


def _pod_fields(params: PodsParams) -> str | None:
    """The field selector of `name` and `node`, as `kubectl --field-selector` takes it."""
    fields = [f"metadata.name={params.name}"] if params.name else []
    fields += [f"spec.nodeName={params.node}"] if params.node else []
    return ",".join(fields) or None


def pods_equivalent(ctx: ProbeContext, params: PodsParams) -> str:
    selector = ["-l", params.selector] if params.selector else []
    fields = _pod_fields(params)
    by_field = ["--field-selector", fields] if fields else []
    return kubectl(ctx, "get", "pods", "-n", _namespace(ctx, params), *selector, *by_field)


# -- kube.events ------------------------------------------------------------------------


def _events_namespace(ctx: ProbeContext, params: EventsParams) -> str | None:
    """None (all namespaces) for cluster-scoped kinds: a Node's events are not in `ai`."""
    return None if params.kind in CLUSTER_SCOPED_KINDS else _namespace(ctx, params)


async def run_events(ctx: ProbeContext, params: EventsParams) -> Facts:
    """Facts:

    - `events`: the newest `limit` events about the object(s), newest first: `type` ("Normal",
      "Warning"), `reason`, `message`, `count` (repeats), `last_seen` (RFC 3339), `age_s`,
      `object` ("Kind/name").
    - `count` (events listed), `total` (events matched before the limit), `warning_count`,
      `reasons` (distinct reasons, newest first).

    Events of cluster-scoped kinds (Node, …) are searched in every namespace.
    """
    reader = await kube_reader(ctx)
    items = await reader.list_events(_events_namespace(ctx, params), params.kind, params.name)
    now = datetime.now(UTC)
    everything = sorted(
        (event_facts(e, now) for e in items),
        key=lambda e: parse_time(e["last_seen"]) or EPOCH,
        reverse=True,
    )
    events = everything[: params.limit]
    return {
        "events": events,
        "count": len(events),
        "total": len(everything),
        "warning_count": sum(1 for e in events if e["type"] == "Warning"),
        "reasons": list(dict.fromkeys(e["reason"] for e in events if e["reason"])),
    }


def events_equivalent(ctx: ProbeContext, params: EventsParams) -> str:
    namespace = _events_namespace(ctx, params)
    where = ["-A"] if namespace is None else ["-n", namespace]
    selector = f"involvedObject.kind={params.kind}"
    if params.name:
        selector += f",involvedObject.name={params.name}"
    return kubectl(
        ctx, "get", "events", *where, "--field-selector", selector, "--sort-by=.lastTimestamp"
    )


# -- kube.deployment --------------------------------------------------------------------


def vllm_container(containers: list[Facts], wanted: str | None) -> Facts | None:
    """The named container, else the first that mentions vllm, else the first (the GPU
    probes pick the vLLM container the same way)."""
    if wanted is not None:
        return next((c for c in containers if c["name"] == wanted), None)
    for c in containers:
        words = [c["name"] or "", c["image"] or "", *c["command"], *c["args"]]
        if any("vllm" in str(w).lower() for w in words):
            return c
    return containers[0] if containers else None


async def run_deployment(ctx: ProbeContext, params: DeploymentParams) -> Facts:
    """Facts:

    - `name`, `uid`, `resource_version`, `generation`, `observed_generation`.
    - `replicas` (desired, spec), `ready_replicas`, `updated_replicas`, `available_replicas`,
      `unavailable_replicas` (0 when the status omits them).
    - `rollout_complete` (the rule of `kubectl rollout status`), `rollout_message` (its text).
    - `containers`: [{`name`, `image`, `command`, `args` (lists, empty when unset),
      `max_num_seqs` (int, None when not literal in the spec), `max_num_seqs_form` ("equals",
      "separate", "shell", "config", "default"; see `oncall.model.vllm_args`; `$(VAR)` is
      read from the container's `env`), `max_num_active_seqs` (int or None, the real cap on
      running sequences, ≤ max_num_seqs), `max_num_active_seqs_form`}].
    - `max_num_seqs`, `max_num_seqs_form`, `max_num_seqs_container`, `max_num_active_seqs`: of
      the `container` parameter, else the first container mentioning vllm, else the first.
    - `max_num_seqs_default`: when max_num_seqs is unset, vLLM's default as text, from the GPU
      feature discovery labels of the pod's nodeSelector ("default: 256 or 1024 depending on
      GPU" when it names no GPU); None when it is set.

    A `container` parameter naming no container of the deployment is a "not found" error.
    """
    # Imported here: only this probe reads vLLM's arguments (their rules and the $(VAR)
    # expansion, ~8 ms of a fresh check whose runbook has no deployment step).
    from oncall.model.kube_expansion import Env
    from oncall.model.vllm_args import parse_max_num_active_seqs, parse_max_num_seqs

    reader = await kube_reader(ctx)
    dep = await reader.get_deployment(_namespace(ctx, params), params.name)
    meta, spec = dep.get("metadata") or {}, dep.get("spec") or {}
    status = dep.get("status") or {}
    containers: list[Facts] = []
    for c in ((spec.get("template") or {}).get("spec") or {}).get("containers") or []:
        command, args = list(c.get("command") or []), list(c.get("args") or [])
        env = Env.of_container(c)
        parsed = parse_max_num_seqs(command, args, env)
        active = parse_max_num_active_seqs(command, args, env)
        containers.append(
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "command": command,
                "args": args,
                "max_num_seqs": parsed.value,
                "max_num_seqs_form": parsed.form,
                "max_num_active_seqs": active.value,
                "max_num_active_seqs_form": active.form,
            }
        )
    chosen = vllm_container(containers, params.container)
    if params.container is not None and chosen is None:
        detail = f'deployment "{params.name}" has no container "{params.container}"'
        raise BackendError(BACKEND, reader.target, "not found", detail)
    rollout = rollout_status_of(dep)
    complete, message = rollout.done, rollout.message
    replicas = spec.get("replicas")
    return {
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resource_version": meta.get("resourceVersion"),
        "generation": meta.get("generation"),
        "observed_generation": status.get("observedGeneration"),
        "replicas": 1 if replicas is None else int(replicas),
        "ready_replicas": int(status.get("readyReplicas") or 0),
        "updated_replicas": int(status.get("updatedReplicas") or 0),
        "available_replicas": int(status.get("availableReplicas") or 0),
        "unavailable_replicas": int(status.get("unavailableReplicas") or 0),
        "rollout_complete": complete,
        "rollout_message": message,
        "containers": containers,
        "max_num_seqs": chosen["max_num_seqs"] if chosen else None,
        "max_num_seqs_form": chosen["max_num_seqs_form"] if chosen else None,
        "max_num_seqs_container": chosen["name"] if chosen else None,
        "max_num_active_seqs": chosen["max_num_active_seqs"] if chosen else None,
        "max_num_seqs_default": _default_text(spec, chosen),
    }


def _default_text(spec: Facts, chosen: Facts | None) -> str | None:
    """vLLM's default max-num-seqs for this pod template, when the container sets none."""
    from oncall.model.max_num_seqs_rule import default_from_labels

    if chosen is None or chosen["max_num_seqs_form"] != "default":
        return None
    selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector")
    source = "the pod's nodeSelector (GPU feature discovery labels)"
    return default_from_labels(selector, source).text()


def deployment_equivalent(ctx: ProbeContext, params: DeploymentParams) -> str:
    return kubectl(
        ctx, "get", "deployment", params.name, "-n", _namespace(ctx, params), "-o", "yaml"
    )


# -- kube.nodes -------------------------------------------------------------------------


async def run_nodes(ctx: ProbeContext, params: NodesParams) -> Facts:
    """Facts:

    - `nodes`, sorted by name: `name`, `ready`, `memory_pressure`, `disk_pressure`,
      `pid_pressure`, `network_unavailable` (each: that condition is True; absent is False),
      `unschedulable` (cordoned), `gpu_capacity`, `gpu_allocatable` (nvidia.com/gpu, 0 if none).
    - `count`, `not_ready` (names), `under_pressure` (names with memory, disk or PID
      pressure), `gpu_capacity_total`, `gpu_allocatable_total`.
    """
    reader = await kube_reader(ctx)
    nodes = sorted(
        (node_facts(n) for n in await reader.list_nodes(params.selector)),
        key=lambda n: str(n["name"]),
    )
    return {
        "nodes": nodes,
        "count": len(nodes),
        "not_ready": [n["name"] for n in nodes if not n["ready"]],
        "under_pressure": [
            n["name"]
            for n in nodes
            if n["memory_pressure"] or n["disk_pressure"] or n["pid_pressure"]
        ],
        "gpu_capacity_total": sum(n["gpu_capacity"] for n in nodes),
        "gpu_allocatable_total": sum(n["gpu_allocatable"] for n in nodes),
    }


def nodes_equivalent(ctx: ProbeContext, params: NodesParams) -> str:
    selector = ["-l", params.selector] if params.selector else []
    return kubectl(ctx, "describe", "nodes", *selector)


PROBES = (
    Probe(
        name="kube.pods",
        backend=BACKEND,
        summary="Pods: phase, readiness, restarts, last termination (OOMKilled), crash loops.",
        params=PodsParams,
        run=run_pods,
        equivalent=pods_equivalent,
    ),
    Probe(
        name="kube.events",
        backend=BACKEND,
        summary="Newest events about an object or a kind of objects.",
        params=EventsParams,
        run=run_events,
        equivalent=events_equivalent,
    ),
    Probe(
        name="kube.deployment",
        backend=BACKEND,
        summary="A deployment: replicas, rollout state, container args and max-num-seqs.",
        params=DeploymentParams,
        run=run_deployment,
        equivalent=deployment_equivalent,
    ),
    Probe(
        name="kube.nodes",
        backend=BACKEND,
        summary="Nodes: readiness, pressure conditions, cordons and GPUs.",
        params=NodesParams,
        run=run_nodes,
        equivalent=nodes_equivalent,
    ),
)
