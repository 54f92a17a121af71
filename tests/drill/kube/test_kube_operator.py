"""The simulated VLLMRuntime operator (`drill up --managed`), through the real kubernetes client:
it owns the Deployment by a controller reference and writes its own args back after a patch."""

from __future__ import annotations

from typing import Any

import pytest

from oncall_drill.kube_sim.operator import API_VERSION, KIND, SimOperator
from tests.drill.kube.conftest import NS, Cluster
from tests.harness.waiting import wait_until

ARG = "/spec/template/spec/containers/0/args/3"


def _operator(cluster: Cluster, delay: float) -> SimOperator:
    def make() -> SimOperator:
        operator = SimOperator(cluster.sim.store, cluster.sim.events, NS, "vllm", delay=delay)
        operator.start()
        return operator

    return cluster.call(make)


def _cap(cluster: Cluster) -> Any:
    return cluster.apps().read_namespaced_deployment("vllm", NS).spec.template.spec.containers[0]


def test_the_deployment_is_owned_by_a_controller_reference_to_the_runtime(
    cluster: Cluster,
) -> None:
    _operator(cluster, delay=0.05)
    (ref,) = cluster.apps().read_namespaced_deployment("vllm", NS).metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name) == (API_VERSION, KIND, "vllm")
    assert ref.controller is True and ref.block_owner_deletion is True


def test_a_patch_of_the_args_is_reverted_after_the_delay_as_a_new_generation(
    cluster: Cluster,
) -> None:
    operator = _operator(cluster, delay=0.3)
    apps = cluster.apps()
    patched = apps.patch_namespaced_deployment(
        "vllm", NS, [{"op": "replace", "path": ARG, "value": "64"}]
    )
    assert patched.spec.template.spec.containers[0].args[3] == "64"

    def back() -> Any:
        now = apps.read_namespaced_deployment("vllm", NS)
        return now if now.spec.template.spec.containers[0].args[3] == "256" else None

    reverted = wait_until(back, within=10, what="the operator's revert")
    assert reverted.metadata.generation == patched.metadata.generation + 1
    assert operator.reverts == 1
    events = cluster.core().list_namespaced_event(NS).items
    assert any(
        e.reason == "Updated" and e.involved_object.kind == "Deployment"
        and e.reporting_component == "vllmruntime-controller"
        for e in events
    )  # fmt: skip


def test_a_change_it_agrees_with_is_left_alone(cluster: Cluster) -> None:
    operator = _operator(cluster, delay=0.05)
    apps = cluster.apps()
    apps.patch_namespaced_deployment("vllm", NS, {"metadata": {"labels": {"team": "ml"}}})
    # The label write was seen (the store notified the operator) and nothing was pending.
    assert cluster.call(lambda: operator._pending) is None
    assert _cap(cluster).args[3] == "256" and operator.reverts == 0


def test_owning_a_missing_deployment_is_a_clear_error(cluster: Cluster) -> None:
    with pytest.raises(ValueError, match="no Deployment ai/nope"):
        cluster.call(lambda: SimOperator(cluster.sim.store, cluster.sim.events, NS, "nope"))
