"""The fleet topology (`drill up --fleet`): 5,000 pods over 50 GPU nodes and 20 Deployments.

Most of the fleet is not vLLM: gateways and auth proxies in `edge`, queue workers in `jobs`,
batch inference and ETL in `batch`, embedding/reranker/tokenizer services beside vLLM in `ai`,
and relays in `monitoring`, each with the labels a Helm chart gives them
(`app.kubernetes.io/name|instance|component|part-of|managed-by`, `app`) and a real owner chain
Deployment -> ReplicaSet (`<deployment>-<pod-template-hash>`) -> Pod. Only `ai/vllm` runs
processes (2 replicas, created by the controller as in the default drill; the scheduler puts them
on `gpu-node-1`, the first node by name with free GPUs, the one whose exporter maps them); the
other 4,998 pods are seeded already Running on nodes 2-50, so that start-up stays a second and
no process is spawned for them. A few are unhealthy the way a big fleet always has some:
restarting queue workers, OOM-killed batch pods, not-ready gateway pods.

Everything is deterministic (a seeded RNG): the same fleet every time.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from oncall_drill.kube_sim import podstatus
from oncall_drill.kube_sim.deployments import HASH_LABEL, REVISION, owner_ref, template_hash
from oncall_drill.kube_sim.resources import DEPLOYMENTS, PODS, REPLICASETS
from oncall_drill.kube_sim.seed import deployment, gpu_node, namespace, vllm_deployment, vllm_pdb
from oncall_drill.kube_sim.store import Obj, Store

NODES = 50
GPUS_PER_NODE = 8
VLLM_NODE = "gpu-node-1"  # the node whose GPUs the vLLM pods get (and its exporter maps)
TOTAL_PODS = 5_000
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class Workload:
    """One non-vLLM Deployment of the fleet."""

    namespace: str
    name: str
    component: str
    part_of: str
    replicas: int
    image: str
    gpus: int = 0
    memory: str = "2Gi"
    #: Share of pods restarting (restartCount > 3, last reason Error), OOM-killed, not Ready.
    restarting: float = 0.0
    oom_killed: float = 0.0
    not_ready: float = 0.0


WORKLOADS = (
    Workload("ai", "embeddings", "embedding-server", "rag", 150, "ghcr.io/acme/tei:1.7", gpus=1),
    Workload("ai", "reranker", "reranker", "rag", 60, "ghcr.io/acme/tei:1.7", gpus=1),
    Workload("ai", "tokenizer", "tokenizer", "inference", 570, "ghcr.io/acme/tokenizer:3.2"),
    Workload("ai", "rag-retriever", "retriever", "rag", 400, "ghcr.io/acme/retriever:2.9"),
    Workload("ai", "feature-store", "feature-store", "rag", 200, "ghcr.io/acme/feast:0.40"),
    Workload("ai", "model-cache", "cache", "inference", 150, "ghcr.io/acme/model-cache:1.1"),
    Workload("edge", "api-gateway", "gateway", "edge", 500, "envoyproxy/envoy:v1.33.0",
             not_ready=0.02),
    Workload("edge", "auth-proxy", "auth", "edge", 250, "quay.io/oauth2-proxy/oauth2-proxy:v7.8"),
    Workload("edge", "rate-limiter", "rate-limiter", "edge", 150, "envoyproxy/ratelimit:3e085e5b"),
    Workload("edge", "ws-gateway", "gateway", "edge", 150, "ghcr.io/acme/ws-gateway:0.9"),
    Workload("jobs", "queue-worker", "worker", "jobs", 650, "ghcr.io/acme/worker:5.4",
             restarting=0.05),
    Workload("jobs", "webhook-worker", "worker", "jobs", 300, "ghcr.io/acme/worker:5.4"),
    Workload("jobs", "email-worker", "worker", "jobs", 150, "ghcr.io/acme/mailer:2.0"),
    Workload("batch", "batch-inference", "batch", "inference", 120, "vllm/vllm-openai:v0.33.0",
             gpus=1, memory="64Gi", oom_killed=0.05),
    Workload("batch", "eval-runner", "batch", "evals", 300, "ghcr.io/acme/evals:0.12"),
    Workload("batch", "etl", "etl", "data", 250, "ghcr.io/acme/etl:4.1"),
    Workload("monitoring", "log-shipper", "logging", "observability", 300,
             "fluent/fluent-bit:3.2"),
    Workload("monitoring", "metrics-relay", "metrics", "observability", 198,
             "ghcr.io/acme/relay:1.0"),
    Workload("monitoring", "alert-router", "alerting", "observability", 150,
             "ghcr.io/acme/router:0.3"),
)  # fmt: skip
NAMESPACES = ("default", "kube-system", "ai", "edge", "jobs", "batch", "monitoring")
VLLM_REPLICAS = 2
assert sum(w.replicas for w in WORKLOADS) + VLLM_REPLICAS == TOTAL_PODS
assert len(WORKLOADS) + 1 == 20


def node_name(index: int) -> str:
    return f"gpu-node-{index}"


def node_names() -> list[str]:
    """gpu-node-1 .. gpu-node-50 (the first is the vLLM pods')."""
    return [node_name(i) for i in range(1, NODES + 1)]


def base_objects(*, vllm_args: list[str] | None = None, replicas: int = VLLM_REPLICAS) -> list[Obj]:
    """What `KubeSim(objects)` loads: namespaces, nodes, the vLLM Deployment and its PDB."""
    objects = [namespace(name) for name in NAMESPACES]
    objects += [
        gpu_node(node_name(i), gpus=GPUS_PER_NODE, ip=f"10.0.{i // 250}.{i % 250 + 1}")
        for i in range(1, NODES + 1)
    ]
    vllm = vllm_deployment(replicas=replicas)
    if vllm_args is not None:
        vllm["spec"]["template"]["spec"]["containers"][0]["args"] = list(vllm_args)
    objects += [vllm, vllm_pdb()]
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ai-gateway", "namespace": "ai"},
            "data": {"degraded-mode": "false", "upstream": "http://vllm:8000"},
        }
    )
    return objects


def _labels(w: Workload) -> dict[str, str]:
    return {
        "app": w.name,
        "app.kubernetes.io/name": w.name,
        "app.kubernetes.io/instance": f"{w.name}-prod",
        "app.kubernetes.io/component": w.component,
        "app.kubernetes.io/part-of": w.part_of,
    }


def workload_deployment(w: Workload) -> Obj:
    selector = {"app.kubernetes.io/name": w.name, "app.kubernetes.io/instance": f"{w.name}-prod"}
    resources: dict[str, Any] = {
        "requests": {"cpu": "500m", "memory": w.memory},
        "limits": {"memory": w.memory},
    }
    if w.gpus:
        resources["requests"]["nvidia.com/gpu"] = str(w.gpus)
        resources["limits"]["nvidia.com/gpu"] = str(w.gpus)
    container = {
        "name": w.name,
        "image": w.image,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": resources,
    }
    dep = deployment(
        w.name, w.namespace, container, labels=_labels(w), selector=selector, replicas=w.replicas
    )
    dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "Helm"
    dep["metadata"]["annotations"] = {"meta.helm.sh/release-name": f"{w.name}-prod"}
    return dep


def _placements() -> Iterator[str]:
    """Nodes 2-50 round-robin (GPU pods take at most GPUS_PER_NODE of a node's GPUs)."""
    while True:
        for i in range(2, NODES + 1):
            yield node_name(i)


class _GpuBook:
    """Which node still has free GPUs for a GPU pod (nodes 2-50; gpu-node-1 is vLLM's)."""

    def __init__(self) -> None:
        self.free = {node_name(i): GPUS_PER_NODE for i in range(2, NODES + 1)}

    def take(self, wanted: int, preferred: str) -> str:
        for name in (preferred, *self.free):
            if self.free[name] >= wanted:
                self.free[name] -= wanted
                return name
        raise ValueError("the fleet's GPU pods do not fit its nodes")


def _pod(rs: Obj, w: Workload, *, node: str, ip: str, rng: random.Random, health: str) -> Obj:
    template = rs["spec"]["template"]
    name = f"{rs['metadata']['name']}-{''.join(rng.choice(_SUFFIX) for _ in range(5))}"
    spec = dict(template["spec"])
    spec.update(restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
    pod: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": f"{rs['metadata']['name']}-",
            "namespace": w.namespace,
            "labels": dict(template["metadata"]["labels"]),
            "ownerReferences": [owner_ref(rs)],
        },
        "spec": spec,
        "status": {"phase": "Pending", "qosClass": podstatus.qos_class(spec)},
    }
    podstatus.mark_scheduled(pod, node)
    podstatus.mark_running(pod, f"10.0.0.{node.rpartition('-')[2]}", ip)
    container = pod["status"]["containerStatuses"][0]
    if health == "oom":
        _terminated_before(container, 137, "OOMKilled", 1 + rng.randrange(3))
    if health == "restarting":
        _terminated_before(container, 1, "Error", 4 + rng.randrange(20))
    if health != "not-ready":
        podstatus.mark_ready(pod)
    return pod


def _terminated_before(container: dict[str, Any], code: int, reason: str, restarts: int) -> None:
    """The container restarted `restarts` times, last after exiting `code` (`reason`)."""
    container["restartCount"] = restarts
    container["lastState"] = {
        "terminated": {"exitCode": code, "reason": reason, "startedAt": None,
                       "finishedAt": None, "containerID": container["containerID"]}
    }  # fmt: skip


def _health(w: Workload, i: int) -> str:
    """Which of the workload's pods are unhealthy (the first shares of its replicas)."""
    for share, kind in ((w.oom_killed, "oom"), (w.restarting, "restarting")):
        if i < round(w.replicas * share):
            return kind
    if i >= w.replicas - round(w.replicas * w.not_ready):
        return "not-ready"
    return "ok"


def populate(store: Store, *, seed: int = 15) -> int:
    """Create the 19 non-vLLM Deployments, their ReplicaSets and 4,998 Running pods; returns the
    number of pods created. Deployment and ReplicaSet status are left to the controller, which
    writes them on its first pass (it finds every pod it wants already there)."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible fleet, not a secret
    gpus = _GpuBook()
    nodes = _placements()
    created = 0
    for index, w in enumerate(WORKLOADS):
        dep = store.create(DEPLOYMENTS, workload_deployment(w), w.namespace, owned=True)
        pod_hash = template_hash(dep["spec"]["template"])
        template = dict(dep["spec"]["template"])
        template["metadata"] = {"labels": {**template["metadata"]["labels"], HASH_LABEL: pod_hash}}
        rs = store.create(
            REPLICASETS,
            {
                "metadata": {
                    "name": f"{w.name}-{pod_hash}",
                    "labels": dict(template["metadata"]["labels"]),
                    "annotations": {REVISION: "1"},
                    "ownerReferences": [owner_ref(dep)],
                },
                "spec": {
                    "replicas": w.replicas,
                    "selector": {
                        "matchLabels": {
                            **dep["spec"]["selector"]["matchLabels"],
                            HASH_LABEL: pod_hash,
                        }
                    },
                    "template": template,
                },
                "status": {"replicas": 0},
            },
            w.namespace,
            owned=True,
        )
        for i in range(w.replicas):
            node = gpus.take(w.gpus, next(nodes)) if w.gpus else next(nodes)
            ip = f"10.{64 + index}.{i // 250}.{i % 250 + 2}"
            pod = _pod(rs, w, node=node, ip=ip, rng=rng, health=_health(w, i))
            store.create(PODS, pod, w.namespace, owned=True)
            created += 1
    return created
