"""scale-deployment declares to the capacity preflight what it takes away: a scale down, the
busiest serving pod; a scale up (or raising an HPA's minReplicas), nothing."""

from __future__ import annotations

from oncall.model.write_path import Plan, Target
from oncall.remediation.actions.scale_deployment import ACTION
from oncall.remediation.capacity import PodsTaken


def _plan(current: int, wanted: int, kind: str = "Deployment") -> Plan:
    undo = {"deployment": "vllm", "replicas": current} if kind == "Deployment" else None
    return Plan(action="scale-deployment", params={"deployment": "vllm", "replicas": wanted},
                target=Target(kind, "vllm", "ai"), before="", after="", request={},
                dangerous=True, confirm_word="vllm", undo=undo)  # fmt: skip


def test_a_scale_down_takes_the_busiest_pod_away() -> None:
    assert ACTION.pods_taken(_plan(3, 2)) == PodsTaken(busiest=1)


def test_a_scale_up_takes_nothing_away() -> None:
    assert ACTION.pods_taken(_plan(2, 3)) is None
    assert ACTION.pods_taken(_plan(2, 3, kind="HorizontalPodAutoscaler")) is None
