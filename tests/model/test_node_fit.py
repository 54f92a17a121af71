"""The node-fit check scale-deployment runs before a scale-up (oncall/model/node_fit.py):
resources, taints and tolerations, nodeSelector, terminated pods, and hostile quantities."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from oncall.model.node_fit import node_fit, pod_requests
from oncall.model.quantity import QuantityError, parse_quantity


def node(
    name: str,
    *,
    gpus: Any = "4",
    cpu: Any = "64",
    memory: Any = "1000Gi",
    ready: bool = True,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    cordoned: bool = False,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or [], **({"unschedulable": True} if cordoned else {})},
        "status": {
            "allocatable": {"nvidia.com/gpu": gpus, "cpu": cpu, "memory": memory},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def template(gpu: Any = "1", cpu: Any = "4", memory: Any = "64Gi", **spec: Any) -> dict[str, Any]:
    requests = {"nvidia.com/gpu": gpu, "cpu": cpu, "memory": memory}
    return {"containers": [{"name": "vllm", "resources": {"requests": requests}}], **spec}


def pod(on: str, gpu: Any = "1", phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"p-{on}", **meta},
        "spec": {"nodeName": on, **template(gpu=gpu, cpu="1", memory="1Gi")},
        "status": {"phase": phase},
    }


def test_a_free_gpu_fits_and_names_the_node() -> None:
    fit = node_fit(template(), [node("a", gpus="2")], [pod("a")])
    assert fit.fits, fit.reason
    assert fit.placed == ("a",)
    assert fit.free["a"]["nvidia.com/gpu"] == "1"


def test_no_free_gpu_is_refused_with_the_counts() -> None:
    nodes = [node("a"), node("b")]
    pods = [pod("a") for _ in range(4)] + [pod("b") for _ in range(4)]
    fit = node_fit(template(), nodes, pods)
    assert not fit.fits
    assert fit.reason == "no node has 1 free nvidia.com/gpu: 0 of 8 free on 2 nodes"


def test_new_pods_are_placed_one_after_the_other() -> None:
    # Two free GPUs: two new pods fit, a third does not.
    assert node_fit(template(), [node("a", gpus="2")], [], count=2).fits
    fit = node_fit(template(), [node("a", gpus="2")], [], count=3)
    assert not fit.fits
    assert fit.reason.startswith("only 2 of 3 new pods fit: no node has 1 free nvidia.com/gpu")


def test_gpus_spread_over_nodes_do_not_add_up_for_one_pod() -> None:
    fit = node_fit(template(gpu="2"), [node("a", gpus="1"), node("b", gpus="1")], [])
    assert fit.reason == "no node has 2 free nvidia.com/gpu: 2 of 2 free on 2 nodes"


def test_terminated_pods_hold_nothing_but_terminating_ones_do() -> None:
    done = [pod("a", phase="Succeeded"), pod("a", phase="Failed")]
    assert node_fit(template(), [node("a", gpus="1")], done).fits
    leaving = [pod("a", deletionTimestamp="2026-12-05T00:00:00Z")]
    assert not node_fit(template(), [node("a", gpus="1")], leaving).fits


def test_a_node_without_the_resource_has_none() -> None:
    bare = node("a")
    del bare["status"]["allocatable"]["nvidia.com/gpu"]
    assert node_fit(template(), [bare], []).reason == (
        "no node has 1 free nvidia.com/gpu: 0 of 0 free on 1 node"
    )


def test_unbound_pods_hold_nothing() -> None:
    pending = pod("a")
    pending["spec"].pop("nodeName")
    assert node_fit(template(), [node("a", gpus="1")], [pending]).fits


def test_cpu_and_memory_count_too() -> None:
    fit = node_fit(template(cpu="8"), [node("a", cpu="4")], [])
    assert fit.reason == "no node has 8 free cpu: 4 of 4 free on 1 node"
    fit = node_fit(template(memory="96Gi"), [node("a", memory="64Gi")], [])
    assert fit.reason == "no node has 96Gi free memory: 64Gi of 64Gi free on 1 node"
    assert node_fit(template(cpu="500m"), [node("a", cpu="1")], [pod("a")]).fits is False
    assert node_fit(template(cpu="500m"), [node("a", cpu="1.5")], [pod("a")]).fits


def test_a_limit_alone_is_the_request() -> None:
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    assert pod_requests(spec) == {"nvidia.com/gpu": Decimal(1)}
    assert not node_fit(spec, [node("a", gpus="0")], []).fits


def test_an_init_container_asks_its_own_maximum() -> None:
    spec = template(gpu="1", initContainers=[{"resources": {"requests": {"cpu": "32"}}}])
    assert pod_requests(spec)["cpu"] == Decimal(32)


def test_untolerated_taints_exclude_a_node() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [node("a", taints=[taint])]
    fit = node_fit(template(), nodes, [])
    assert not fit.fits
    assert fit.reason == (
        "no node takes the pod: 1 node(s) had untolerated taint {nvidia.com/gpu: present}"
    )
    equal = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}
    assert node_fit(template(tolerations=[equal]), nodes, []).fits
    wrong_value = {**equal, "value": "absent"}
    assert not node_fit(template(tolerations=[wrong_value]), nodes, []).fits
    wrong_effect = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}
    assert not node_fit(template(tolerations=[wrong_effect]), nodes, []).fits
    assert node_fit(template(tolerations=[{"operator": "Exists"}]), nodes, []).fits


def test_prefer_no_schedule_does_not_exclude() -> None:
    soft = {"key": "k", "value": "v", "effect": "PreferNoSchedule"}
    assert node_fit(template(), [node("a", taints=[soft])], []).fits


def test_node_selector_picks_nodes() -> None:
    h100 = {"nvidia.com/gpu.product": "H100"}
    nodes = [node("a", labels={"nvidia.com/gpu.product": "A100"}), node("b", labels=h100)]
    fit = node_fit(template(nodeSelector=h100), nodes, [])
    assert fit.placed == ("b",)
    fit = node_fit(template(nodeSelector={"pool": "big"}), nodes, [])
    assert fit.reason == "no node takes the pod: 2 node(s) without label pool=big (nodeSelector)"


def test_excluded_nodes_are_named_beside_the_shortage() -> None:
    nodes = [node("a", gpus="1"), node("b", cordoned=True), node("c", ready=False)]
    fit = node_fit(template(), nodes, [pod("a")])
    assert fit.reason == (
        "no node has 1 free nvidia.com/gpu: 0 of 1 free on 1 node; no node takes the pod: "
        "1 node(s) cordoned (unschedulable), 1 node(s) not Ready"
    )


def test_no_nodes_at_all() -> None:
    assert node_fit(template(), [], []).reason == "no nodes in the cluster"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("-1", "negative quantity '-1'"),
        ("lots", "not a quantity: 'lots'"),
        ("1.5.2", "not a quantity"),
        (1.5, "not a quantity: 1.5"),
        (True, "not a quantity: True"),
        ("9" * 100, "over 64 characters"),
        ("1e99999", "exponent out of range"),
        ("１", "not a quantity"),  # a full-width digit
    ],
)
def test_malformed_template_quantities_are_a_reason(raw: Any, why: str) -> None:
    fit = node_fit(template(gpu=raw), [node("a")], [])
    assert not fit.fits
    assert fit.reason.startswith("the pod template's requests are malformed: container vllm")
    assert why in fit.reason


@pytest.mark.parametrize("raw", ["-8", "eight", None, {"x": 1}])
def test_a_malformed_or_negative_allocatable_excludes_the_node(raw: Any) -> None:
    fit = node_fit(template(), [node("a", gpus=raw), node("b", gpus="1")], [])
    assert fit.placed == ("b",)
    assert fit.excluded["a"].startswith("malformed allocatable: nvidia.com/gpu")


def test_a_pod_with_malformed_requests_makes_its_node_unreadable_not_free() -> None:
    bad = pod("a", gpu="garbage")
    fit = node_fit(template(), [node("a", gpus="8")], [bad])
    assert not fit.fits
    assert fit.reason == "no node takes the pod: 1 node(s) with a pod whose requests are malformed"


def test_huge_quantities_compare_without_blowing_up() -> None:
    fit = node_fit(template(gpu="1e900"), [node("a", gpus="1e899")], [])
    assert not fit.fits
    assert "free nvidia.com/gpu" in fit.reason
    assert node_fit(template(gpu="1"), [node("a", gpus="1E900")], []).fits


def test_hostile_shapes_are_read_as_absent() -> None:
    spec: dict[str, Any] = {"containers": ["not a container", {"resources": "x"}]}
    assert pod_requests(spec) == {}
    weird_node = {"metadata": "x", "spec": [], "status": {"conditions": "Ready"}}
    fit = node_fit(template(), [weird_node], [])
    assert fit.reason == "no node takes the pod: 1 node(s) not Ready"


def test_quantities() -> None:
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("1Gi") == Decimal(1024**3)
    assert parse_quantity("1k") == Decimal(1000)
    assert parse_quantity(3) == Decimal(3)
    assert parse_quantity("2e3") == Decimal(2000)
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity("1 Gi")
