"""The capacity facts read from the Kubernetes API's JSON: the effective cap from the args, the
time to Ready from the pod's own history, which pods an action takes, and the strategy."""

from __future__ import annotations

from typing import Any

from oncall.remediation.capacity import PodsTaken
from oncall.remediation.capacity_facts import (
    Load,
    Loads,
    effective_cap,
    facts_of,
    load_queries,
    match_labels,
    serving,
    strategy,
    time_to_ready,
)


def pod(
    name: str,
    args: list[str],
    *,
    started: str | None = "2026-01-01T10:00:00Z",
    ready_at: str = "2026-01-01T10:02:05Z",
    ready: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:00:00Z"
    state = {"running": {"startedAt": started}} if started else {"waiting": {}}
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "vllm", "args": args}],
                 "terminationGracePeriodSeconds": 45},
        "status": {
            "containerStatuses": [{"state": state}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "lastTransitionTime": ready_at}],
        },
    }  # fmt: skip


def test_the_cap_is_the_lower_of_max_num_seqs_and_max_num_active_seqs() -> None:
    assert effective_cap(pod("a", ["--max-num-seqs", "128"])) == 128
    assert effective_cap(pod("a", ["--max-num-seqs=128", "--max-num-active-seqs", "48"])) == 48
    # Unset: vLLM's lower default (the cautious side), not "no cap".
    assert effective_cap(pod("a", ["--model", "qwen"])) == 256
    # A value Kubernetes expands from an unset variable cannot be read: no cap, not a guess.
    assert effective_cap(pod("a", ["--max-num-seqs", "$(SEQS)"])) is None


def test_time_to_ready_from_the_pods_own_history() -> None:
    assert time_to_ready(pod("a", [])) == 125.0
    assert time_to_ready(pod("a", [], started=None)) is None
    assert time_to_ready(pod("a", [], ready_at="2025-12-31T00:00:00Z")) is None  # before start
    assert time_to_ready(pod("a", [], ready_at="not a time")) is None


def test_a_deleting_or_unready_pod_is_not_serving() -> None:
    assert serving(pod("a", []))
    assert not serving(pod("a", [], ready=False))
    assert not serving(pod("a", [], deleting=True))


def test_named_pods_and_the_busiest_are_taken() -> None:
    pods = [pod(n, ["--max-num-seqs", "64"], ready_at=f"2026-01-01T10:0{i}:00Z")
            for i, n in enumerate(("a", "b", "c"), start=1)]  # fmt: skip
    pods.append(pod("d", ["--max-num-seqs", "64"], ready=False))
    loads = Loads({"a": Load(5, 0, 0.2, 0), "b": Load(30, 4, 0.9, 2), "c": Load(1, 0, 0.1, 0)}, 1.5)
    named = facts_of(pods, loads, PodsTaken(pods=("a",)), 0.9)
    assert [r.pod for r in named.affected] == ["a"]
    assert [r.pod for r in named.others] == ["b", "c"]  # d is not Ready
    assert named.others[0].cap == 64 and named.others[0].waiting == 4
    assert named.time_to_ready_s == 180.0 and named.grace_period_s == 45
    assert named.p99_latency_s == 1.5
    busiest = facts_of(pods, loads, PodsTaken(busiest=1), 0.9)
    assert [r.pod for r in busiest.affected] == ["b"]
    # A pod without series is passed on as not read (the assessment says unknown).
    unread = facts_of(pods, Loads({}), PodsTaken(pods=("a",)), 0.9)
    assert unread.others[0].running is None


def test_selector_strategy_and_queries() -> None:
    rolling = {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    labels = {"app": "vllm", "t": "x"}
    deployment = {"spec": {"replicas": 3, "selector": {"matchLabels": labels}, "strategy": rolling}}
    assert match_labels(deployment) == "app=vllm,t=x"
    assert match_labels({"spec": {}}) is None
    assert strategy(deployment) == {
        "replicas": 3,
        "type": "RollingUpdate",
        "max_surge": 1,
        "max_unavailable": 0,
    }
    queries = load_queries("ai", 90.5)
    assert queries["preemptions"].endswith('vllm:num_preemptions_total{namespace="ai"}[91s]))')
    assert "vllm:gpu_cache_usage_perc" in queries["kv_cache_usage"]  # vLLM 0.10's name too
