"""Threat: a lying Prometheus picks the pod to rebuild (docs/audit.md). GPUXidError's
proposal takes its pod and namespace from dcgm-exporter's labels; any pod in any namespace
could be proposed. The plan now checks the target against the Kubernetes API before any
preview: the namespace remediations may act in and the node the GPU with the Xid is on (and a
controller that replaces the pod: not tested here, the drill's API creates no bare pods).

Against the drill's Kubernetes API through the rebuild-pod action's own plan.
"""

from __future__ import annotations

import pytest

from oncall.remediation.action import PlanError
from oncall.remediation.actions.rebuild_pod import ACTION as REBUILD
from tests.drill.kube.conftest import Cluster, kube_clients


async def test_a_pod_in_a_namespace_oncall_does_not_act_in_is_refused(drill: Cluster) -> None:
    async with kube_clients(drill) as c:
        with pytest.raises(PlanError, match="remediations act only in ai"):
            await REBUILD.plan(REBUILD.params(pod="coredns-0", namespace="kube-system"), c)


async def test_a_pod_on_another_node_than_the_gpu_is_refused(drill: Cluster) -> None:
    pod = drill.ready_pods(2)[0]
    node = pod.spec.node_name
    async with kube_clients(drill) as c:
        plan = await REBUILD.plan(REBUILD.params(pod=pod.metadata.name, node=node), c)
        assert plan.target.name == pod.metadata.name  # the telemetry agrees: planned
        with pytest.raises(PlanError, match=f"runs on node {node} by the Kubernetes API"):
            await REBUILD.plan(REBUILD.params(pod=pod.metadata.name, node="gpu-node-9"), c)
