"""The scheduler's `FailedScheduling` message for a pod no node can take, as kube-scheduler
writes it (its `FitError.Error()`, kubernetes `pkg/scheduler/framework/types.go`).

    0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient nvidia.com/gpu.
    preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling,
    2 No preemption victims found for incoming pod.

(one line). Each node fails one filter; the reasons are counted, written "N reason" and sorted
as strings, zero counts left out. The DefaultPreemption post-filter adds its own count: a node
short of a resource could be freed by evicting lower-priority pods ("No preemption victims
found" when none can be), a cordoned or tainted node could not ("Preemption is not helpful").
The same text is the pod's `PodScheduled=False` condition message (reason `Unschedulable`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

#: What the NodeUnschedulable filter says of a cordoned node (spec.unschedulable).
CORDONED = "node(s) were unschedulable"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


def _histogram(reasons: Counter[str]) -> str:
    return ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items() if count))


def untolerated_taint(taint: dict[str, Any]) -> str:
    """The TaintToleration filter's reason: `node(s) had untolerated taint {key: value}`."""
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '')}}}"


def fit_error(node_reasons: list[str], resource_short: set[str]) -> str:
    """The message for nodes that each failed with the reason in node_reasons; a reason in
    resource_short is one preemption might resolve (an `Insufficient …`)."""
    total = len(node_reasons)
    if total == 0:
        return "no nodes available to schedule pods"
    filters = Counter(node_reasons)
    preemption = Counter(NO_VICTIMS if r in resource_short else NOT_HELPFUL for r in node_reasons)
    return (
        f"0/{total} nodes are available: {_histogram(filters)}. "
        f"preemption: 0/{total} nodes are available: {_histogram(preemption)}."
    )
