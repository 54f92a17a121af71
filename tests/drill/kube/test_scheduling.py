"""The simulated scheduler's filters (oncall_drill/kube_sim/scheduling.py): resources against
allocatable minus what bound, not terminated pods request; taints and tolerations;
nodeSelector; and the FailedScheduling it leaves on a pod through the real kubernetes client."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from oncall_drill.kube_sim import KubeSim
from oncall_drill.kube_sim.scheduling import (
    NODE_SELECTOR,
    quantity,
    requested_by_node,
    unfit_reason,
)
from oncall_drill.kube_sim.seed import default_objects, gpu_node
from tests.drill.kube.conftest import DELAY_S, NS, start_cluster
from tests.harness.waiting import wait_until


def pod(gpu: str = "1", cpu: str = "4", memory: str = "64Gi", **spec: Any) -> dict[str, Any]:
    requests = {"nvidia.com/gpu": gpu, "cpu": cpu, "memory": memory}
    return {"spec": {"containers": [{"resources": {"requests": requests}}], **spec}}


def bound(node: str, phase: str = "Running", gpu: str = "1") -> dict[str, Any]:
    made = pod(gpu=gpu)
    made["spec"]["nodeName"] = node
    made["status"] = {"phase": phase}
    return made


def test_quantities() -> None:
    assert quantity("500m") == Decimal("0.5")
    assert quantity("64Gi") == Decimal(64 * 1024**3)
    assert quantity(4) == Decimal(4)
    assert quantity("garbage") == quantity(None) == quantity(True) == Decimal(0)


def test_resources_against_allocatable_minus_bound_pods() -> None:
    node = gpu_node("n", gpus=2)
    used = requested_by_node([bound("n"), bound("n", phase="Succeeded"), bound("other")])
    assert used["n"][("nvidia.com/gpu")] == 1
    assert unfit_reason(node, pod(), used["n"]) is None
    assert unfit_reason(node, pod(gpu="2"), used["n"]) == "Insufficient nvidia.com/gpu"
    assert unfit_reason(node, pod(cpu="65"), {}) == "Insufficient cpu"
    assert unfit_reason(node, pod(memory="2000Gi"), {}) == "Insufficient memory"


def test_taints_tolerations_and_selectors() -> None:
    node = gpu_node("n")
    node["spec"]["taints"] = [{"key": "gpu", "value": "h100", "effect": "NoSchedule"}]
    assert unfit_reason(node, pod(), {}) == "node(s) had untolerated taint {gpu: h100}"
    tolerated = pod(tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert unfit_reason(node, tolerated, {}) is None
    node["spec"]["taints"] = []
    wrong_pool = pod(nodeSelector={"pool": "a100"})
    assert unfit_reason(node, wrong_pool, {}) == NODE_SELECTOR
    right = pod(nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    assert unfit_reason(node, right, {}) is None


def test_two_full_nodes_leave_the_surge_pod_pending(tmp_path: Path) -> None:
    """The kube-scheduler's words on a GPU fleet with no GPU left: 2 nodes of 4 GPUs, 9 pods."""
    objects = default_objects(replicas=9, gpus=4)
    objects.append(gpu_node("gpu-node-2", gpus=4, ip="10.0.3.18"))
    running = start_cluster(tmp_path, KubeSim(objects, start_delay=DELAY_S, resync=0.2))
    cluster = next(running)
    try:
        core = cluster.core()

        def pending() -> Any:
            pods = core.list_namespaced_pod(NS, field_selector="status.phase=Pending").items
            unscheduled = [p for p in pods if not p.spec.node_name]
            return unscheduled[0] if unscheduled else None

        stuck = wait_until(pending, within=10, what="a Pending pod")
        events = core.list_namespaced_event(
            NS, field_selector=f"involvedObject.name={stuck.metadata.name}"
        ).items
        messages = [e.message for e in events if e.reason == "FailedScheduling"]
        assert messages == [
            "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
            "available: 2 No preemption victims found for incoming pod."
        ]
        nodes = {p.spec.node_name for p in core.list_namespaced_pod(NS).items}
        assert nodes == {"gpu-node-1", "gpu-node-2", None}  # 4 + 4 bound, 1 Pending
    finally:
        running.close()
