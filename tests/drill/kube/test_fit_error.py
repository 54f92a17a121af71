"""The simulated scheduler words FailedScheduling as kube-scheduler does (FitError.Error():
counted reasons sorted as text, zero counts left out, the DefaultPreemption post-filter)."""

from __future__ import annotations

from oncall_drill.kube_sim.fit_error import CORDONED, fit_error, untolerated_taint

GPU_SHORT = "Insufficient nvidia.com/gpu"


def test_every_node_short_of_a_gpu() -> None:
    assert fit_error([GPU_SHORT] * 3, {GPU_SHORT}) == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are "
        "available: 3 No preemption victims found for incoming pod."
    )


def test_mixed_reasons_are_counted_and_sorted_and_preemption_says_what_could_help() -> None:
    not_ready = untolerated_taint({"key": "node.kubernetes.io/not-ready"})
    assert not_ready == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    message = fit_error([GPU_SHORT, CORDONED, GPU_SHORT, not_ready], {GPU_SHORT})
    assert message == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
        ", 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu. preemption: 0/4 nodes "
        "are available: 2 No preemption victims found for incoming pod, 2 Preemption is not "
        "helpful for scheduling."
    )
    assert "0 " not in message.replace("0/4", "")  # no zero counts


def test_no_nodes_at_all() -> None:
    assert fit_error([], {GPU_SHORT}) == "no nodes available to schedule pods"
