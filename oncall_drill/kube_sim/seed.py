"""The objects a drill cluster starts with: a Python builder and a YAML/JSON loader.

The default cluster: namespaces `default`, `kube-system` and `ai`; one GPU node with allocatable
`nvidia.com/gpu` and the kubelet's conditions; Deployment `ai/vllm` (container `vllm`, vLLM args)
whose pods the controller creates; and a ConfigMap for the gateway. A seed file holds the same
kind of objects, as a YAML stream, a YAML/JSON list, or a `{"items": [...]}` document.

Seed Deployments, not Pods: the controller creates a Deployment's pods and runs them through the
pod hook. A seeded Pod in phase Pending is run too; one already Running is left as it is (no hook),
and pods without an ownerReference to a ReplicaSet of a Deployment are never adopted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from oncall_drill.kube_sim.store import Obj, now_rfc3339


def namespace(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def gpu_node(name: str = "gpu-node-1", *, gpus: int = 4, ip: str = "10.0.3.17") -> Obj:
    now = now_rfc3339()
    resources = {
        "cpu": "64",
        "memory": "1056440320Ki",
        "ephemeral-storage": "1844284764Ki",
        "nvidia.com/gpu": str(gpus),
        "pods": "110",
    }

    def condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
            "reason": reason,
            "message": message,
        }

    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.count": str(gpus),
            },
        },
        "spec": {"podCIDR": "10.244.0.0/24"},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [
                condition(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                ),
                condition(
                    "DiskPressure",
                    "False",
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                ),
                condition(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                ),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": "0" * 32,
                "systemUUID": "00000000-0000-0000-0000-000000000000",
                "bootID": "00000000-0000-0000-0000-000000000001",
                "kernelVersion": "6.8.0-51-generic",
                "osImage": "Ubuntu 24.04.1 LTS",
                "containerRuntimeVersion": "containerd://1.7.24",
                "kubeletVersion": "v1.33.1",
                "kubeProxyVersion": "v1.33.1",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def deployment(
    name: str, namespace: str, container: dict[str, Any], *, labels: dict[str, str],
    selector: dict[str, str], replicas: int,
) -> Obj:  # fmt: skip
    """An apps/v1 Deployment with one container, rolling updates at 25% / 25%."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector)},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
            "progressDeadlineSeconds": 600,
            "revisionHistoryLimit": 10,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [container], "terminationGracePeriodSeconds": 30},
            },
        },
    }


def vllm_deployment(
    *,
    name: str = "vllm",
    namespace: str = "ai",
    replicas: int = 2,
    model: str = "qwen",
    max_num_seqs: int = 256,
    image: str = "vllm/vllm-openai:v0.33.0",
) -> Obj:
    labels = {"app": name}
    resources = {
        "limits": {"nvidia.com/gpu": "1", "memory": "64Gi"},
        "requests": {"nvidia.com/gpu": "1", "memory": "64Gi"},
    }
    container = {
        "name": "vllm",
        "image": image,
        "args": ["--model", model, "--max-num-seqs", str(max_num_seqs)],
        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
        "resources": resources,
    }
    return deployment(name, namespace, container, labels=labels, selector=labels, replicas=replicas)


def vllm_pdb(*, name: str = "vllm", namespace: str = "ai") -> Obj:
    """The vLLM Deployment's PodDisruptionBudget: at most one replica evicted at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}},
    }


def default_objects(*, namespace_name: str = "ai", replicas: int = 2, gpus: int = 4) -> list[Obj]:
    """The default drill cluster."""
    return [
        namespace("default"),
        namespace("kube-system"),
        namespace(namespace_name),
        gpu_node(gpus=gpus),
        vllm_deployment(namespace=namespace_name, replicas=replicas),
        vllm_pdb(namespace=namespace_name),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ai-gateway", "namespace": namespace_name},
            "data": {"degraded-mode": "false", "upstream": "http://vllm:8000"},
        },
    ]


def load_objects(path: Path) -> list[Obj]:
    """Objects from a seed file (YAML stream, list, or a List document)."""
    docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    objects: list[Obj] = []
    for doc in docs:
        if isinstance(doc, list):
            objects.extend(doc)
        elif isinstance(doc, dict) and isinstance(doc.get("items"), list):
            objects.extend(doc["items"])
        elif isinstance(doc, dict):
            objects.append(doc)
        else:
            raise ValueError(f"{path}: a seed document must be an object or a list of objects")
    for i, obj in enumerate(objects):
        if (
            not isinstance(obj, dict)
            or not obj.get("kind")
            or not (obj.get("metadata") or {}).get("name")
        ):
            raise ValueError(f"{path}: object #{i + 1} needs kind and metadata.name")
    return objects
