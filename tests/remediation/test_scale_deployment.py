"""scale-deployment's steps against the drill's Kubernetes API (one 4-GPU node, two vLLM
replicas of one GPU each): the node-fit check, down by one only, the HPA policy, the server's
test of the planned count, and verification by the new pods' readiness."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from oncall.errors import BackendError
from oncall.model.write_path import Plan
from oncall.remediation.action import PlanError
from oncall.remediation.actions.scale_deployment import ACTION, _hpa_verdict
from oncall.remediation.clients import Clients
from oncall.settings import Settings
from oncall.settings.model import GuardsSettings, KubernetesSettings
from tests.drill.kube.conftest import NS, Cluster
from tests.drill.kube.test_kube_hpa import autoscaling, hpa
from tests.harness.waiting import wait_until


@asynccontextmanager
async def clients(cluster: Cluster, **guards: Any) -> AsyncIterator[Clients]:
    kube = KubernetesSettings(kubeconfig=cluster.kubeconfig, namespace=NS)
    made = Clients.from_settings(Settings(kubernetes=kube, guards=GuardsSettings(**guards)))
    try:
        yield made
    finally:
        await made.aclose()


async def plan(c: Clients, replicas: int) -> Plan:
    return await ACTION.plan(ACTION.params(deployment="vllm", replicas=replicas), c)


async def run(c: Clients, p: Plan) -> tuple[bool, str]:
    assert await ACTION.changed_since_plan(p, c) is None
    result = await ACTION.execute(p, c)
    said: list[str] = []
    return await ACTION.verify(p, c, result, said.append)


def verdicts(p: Plan) -> dict[str, tuple[bool, str]]:
    return {v.guard: (v.ok, v.reason) for v in p.checks}


def refusal(p: Plan, guard: str) -> str:
    """Why `guard` refused plan `p` (it must have refused)."""
    ok, reason = verdicts(p)[guard]
    assert not ok, reason
    return reason


async def test_up_with_a_free_gpu_is_verified_when_the_new_pod_is_ready(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with clients(drill) as c:
        p = await plan(c, 3)
        assert verdicts(p) == {"node-fit": (True, "1 new pod(s) fit on gpu-node-1")}
        assert p.request["body"] == [
            {"op": "test", "path": "/spec/replicas", "value": 2},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
        ]
        assert p.undo == {"deployment": "vllm", "replicas": 2}
        dry = await ACTION.dry_run(p, c)
        assert dry["spec"] == {"replicas": 3}
        assert len(drill.ready_pods(2)) == 2  # the dry run changed nothing
        ok, seen = await run(c, p)
    assert ok, seen
    assert seen.startswith("3 replica(s) Ready; new: vllm-")
    drill.ready_pods(3)


async def test_up_without_a_free_gpu_is_refused_with_the_reason(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with clients(drill) as c:
        ok, seen = await run(c, await plan(c, 4))
        assert ok, seen
        p = await plan(c, 5)
    assert refusal(p, "node-fit") == "no node has 1 free nvidia.com/gpu: 0 of 4 free on 1 node"


async def test_pods_already_pending_are_counted(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with clients(drill) as c:
        ops = [{"op": "replace", "path": "/spec/replicas", "value": 5}]  # 4 GPUs: one Pending
        await (await c.kube_writer()).patch_deployment_json(NS, "vllm", ops, dry_run=False)

        def placed() -> list[Any] | None:
            pods = drill.core().list_namespaced_pod(NS, label_selector="app=vllm").items
            nodes = sorted(str(p.spec.node_name) for p in pods)
            return nodes if nodes == ["None"] + ["gpu-node-1"] * 4 else None

        wait_until(placed, within=10, what="4 pods bound and 1 Pending")
        p = await plan(c, 6)
    assert refusal(p, "node-fit").startswith(
        "no node has 1 free nvidia.com/gpu: 0 of 4 free on 1 node; counting 1 pod(s) of it "
        "Pending already (vllm-"
    )


async def test_the_fit_is_checked_again_before_the_write(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with clients(drill) as c:
        p = await plan(c, 4)
        assert verdicts(p)["node-fit"][0]
        # Someone else takes the free GPUs (and the replica count) after the preview.
        ops = [{"op": "replace", "path": "/spec/replicas", "value": 4}]
        await (await c.kube_writer()).patch_deployment_json(NS, "vllm", ops, dry_run=False)
        changed = await ACTION.changed_since_plan(p, c)
    assert changed is not None
    assert changed.startswith("the Deployment's replicas changed since the preview")


async def test_down_is_one_replica_at_a_time(drill: Cluster) -> None:
    drill.ready_pods(2)
    async with clients(drill) as c:
        with pytest.raises(ValueError, match="greater than or equal to 1"):
            await plan(c, 0)  # never to zero: the parameters refuse it
        with pytest.raises(PlanError, match="has 2 already"):
            await plan(c, 2)
        ok, seen = await run(c, await plan(c, 3))
        assert ok, seen
        with pytest.raises(PlanError, match="one at a time: 3 → 2, not 1"):
            await plan(c, 1)
        p = await plan(c, 2)
        assert p.checks == ()  # no node-fit on the way down
        ok, seen = await run(c, p)
    assert ok, seen
    assert seen == "2 replica(s) (2 Ready); the removed pod is gone"
    drill.ready_pods(2)


async def test_an_hpa_refuses_by_default_and_is_named(drill: Cluster) -> None:
    drill.ready_pods(2)
    autoscaling(drill).create_namespaced_horizontal_pod_autoscaler(NS, hpa(2, 4))
    async with clients(drill) as c:
        p = await plan(c, 3)
    assert refusal(p, "hpa").startswith(
        "HorizontalPodAutoscaler ai/vllm scales this Deployment (minReplicas 2, "
        "maxReplicas 4); guards.scale_with_hpa is refuse"
    )
    assert p.target.kind == "Deployment"


async def test_raise_min_scales_through_the_hpa(drill: Cluster) -> None:
    drill.ready_pods(2)
    autoscaling(drill).create_namespaced_horizontal_pod_autoscaler(NS, hpa(2, 4))
    async with clients(drill, scale_with_hpa="raise-min") as c:
        p = await plan(c, 3)
        assert verdicts(p)["hpa"][0], verdicts(p)
        assert (p.target.kind, p.target.name) == ("HorizontalPodAutoscaler", "vllm")
        assert p.workload is not None and p.workload.kind == "Deployment"
        path = "/apis/autoscaling/v2/namespaces/ai/horizontalpodautoscalers/vllm"
        assert p.request["path"] == path
        assert p.request["body"][-1] == {"op": "replace", "path": "/spec/minReplicas", "value": 3}
        ok, seen = await run(c, p)
        assert ok, seen
        read = autoscaling(drill).read_namespaced_horizontal_pod_autoscaler("vllm", NS)
        assert read.spec.min_replicas == 3
        # Above the HPA's maximum, and down under it: refused whatever the policy.
        over = await plan(c, 5)
        assert not verdicts(over)["hpa"][0]
        assert "5 is above its maxReplicas" in verdicts(over)["hpa"][1]
        down = await plan(c, 2)
        assert not verdicts(down)["hpa"][0]
    drill.ready_pods(3)


async def test_a_namespace_outside_the_guard_is_refused(drill: Cluster) -> None:
    async with clients(drill) as c:
        with pytest.raises(PlanError, match="remediations act only in ai"):
            await ACTION.plan(
                ACTION.params(deployment="vllm", replicas=3, namespace="kube-system"), c
            )


async def test_a_missing_deployment_is_the_servers_not_found(drill: Cluster) -> None:
    async with clients(drill) as c:
        with pytest.raises(BackendError) as err:
            await ACTION.plan(ACTION.params(deployment="nope", replicas=3), c)
    assert err.value.reason == "not found"


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"minReplicas": 2, "maxReplicas": "4"}, "its maxReplicas '4' is not a replica count"),
        ({"minReplicas": 2}, "its maxReplicas None is not a replica count"),
        ({"minReplicas": True, "maxReplicas": 4}, "its minReplicas True is not below 3"),
        ({"minReplicas": 3, "maxReplicas": 4}, "its minReplicas 3 is not below 3"),
        ({"minReplicas": 1, "maxReplicas": 2}, "3 is above its maxReplicas"),
    ],
)
def test_a_hostile_or_odd_hpa_is_refused_with_its_value(spec: dict[str, Any], why: str) -> None:
    hostile = {"metadata": {"name": "vllm", "namespace": NS}, "spec": spec}
    made = Clients.from_settings(Settings(guards=GuardsSettings(scale_with_hpa="raise-min")))
    verdict, ops = _hpa_verdict(hostile, 2, 3, made)
    assert not verdict.ok and ops is None
    assert why in verdict.reason


def test_an_hpa_without_min_replicas_gets_one_added() -> None:
    hpa_obj = {"metadata": {"name": "vllm", "namespace": NS}, "spec": {"maxReplicas": 4}}
    made = Clients.from_settings(Settings(guards=GuardsSettings(scale_with_hpa="raise-min")))
    verdict, ops = _hpa_verdict(hpa_obj, 1, 2, made)
    assert verdict.ok, verdict.reason
    assert "(minReplicas 1, maxReplicas 4)" in verdict.reason
    assert ops == [
        {"op": "test", "path": "/spec/maxReplicas", "value": 4},
        {"op": "add", "path": "/spec/minReplicas", "value": 2},
    ]
