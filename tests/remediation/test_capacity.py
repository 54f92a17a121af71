"""The capacity preflight as data (issue 31): facts -> ok / warn / refuse / unknown."""

from __future__ import annotations

import math

from oncall.remediation.capacity import (
    OVERRIDE_PHRASE,
    CapacityFacts,
    ReplicaLoad,
    assess,
    guard_verdict,
    recheck,
)


def _pod(
    name: str, running: float, waiting: float, kv: float, *, preempt: float = 0, cap: int = 64
) -> ReplicaLoad:
    return ReplicaLoad(name, running, waiting, kv, preempt, cap)


def _facts(affected: ReplicaLoad, *others: ReplicaLoad) -> CapacityFacts:
    return CapacityFacts((affected,), others, kv_threshold=0.95, time_to_ready_s=180)


def test_kv_pressure_with_two_replicas_refuses_with_its_numbers() -> None:
    # The drill's kv-cache-pressure: both pods full, preempting, requests waiting.
    verdict = assess(
        _facts(_pod("vllm-0", 48, 57, 0.99, preempt=3), _pod("vllm-1", 48, 40, 0.99, preempt=5))
    )
    assert verdict.verdict == "refuse"
    assert verdict.numbers["moved_sequences"] == 105
    assert verdict.numbers["saturated"] == ["vllm-1"]
    assert "180s" in verdict.reason


def test_light_load_on_four_replicas_is_ok() -> None:
    others = (_pod("vllm-1", 4, 0, 0.1), _pod("vllm-2", 3, 0, 0.1), _pod("vllm-3", 5, 0, 0.1))
    verdict = assess(_facts(_pod("vllm-0", 6, 0, 0.1), *others))
    assert verdict.verdict == "ok"
    assert verdict.numbers["free_slots"] == 180


def test_load_that_does_not_fit_unsaturated_others_warns() -> None:
    verdict = assess(_facts(_pod("vllm-0", 60, 10, 0.5), _pod("vllm-1", 30, 0, 0.5)))
    assert verdict.verdict == "warn"
    assert "70 sequences move onto 34 free slots" in verdict.reason


def test_removing_the_last_replica_refuses() -> None:
    assert assess(_facts(_pod("vllm-0", 1, 0, 0.1))).verdict == "refuse"


def test_running_at_the_cap_with_waiting_is_saturated_even_with_kv_room() -> None:
    verdict = assess(_facts(_pod("vllm-0", 2, 0, 0.2), _pod("vllm-1", 64, 1, 0.3)))
    assert verdict.verdict == "refuse"


def test_missing_vllm_endpoint_is_unknown_which_warns_and_never_passes_as_ok() -> None:
    gone = ReplicaLoad("vllm-1", None, None, None, None, 64)
    verdict = assess(_facts(_pod("vllm-0", 2, 0, 0.1), gone))
    assert verdict.verdict == "unknown"
    assert "vllm-1: running, waiting, kv_cache_usage, preemptions" in verdict.reason
    line = guard_verdict(verdict)
    assert line.ok and line.reason.startswith("unknown: capacity unknown")


def test_forged_metrics_are_unknown_not_ok() -> None:
    light = _pod("vllm-0", 2, 0, 0.1)
    for forged in (
        _pod("vllm-1", -5, 0, 0.1),
        _pod("vllm-1", 2, 0, 7.0),
        _pod("vllm-1", math.nan, 0, 0.1),
        _pod("vllm-1", 500, 0, 0.1),  # more running than the scheduler's cap allows
    ):
        verdict = assess(_facts(light, forged))
        assert verdict.verdict == "unknown", forged
        assert "implausible /metrics from vllm-1" in verdict.reason


def test_load_doubling_after_the_preview_makes_the_recheck_refuse() -> None:
    previewed = assess(_facts(_pod("vllm-0", 10, 0, 0.3), _pod("vllm-1", 10, 0, 0.3)))
    assert previewed.verdict == "ok"
    doubled = recheck(previewed, _facts(_pod("vllm-0", 20, 0, 0.5), _pod("vllm-1", 20, 0, 0.5)))
    assert doubled.verdict == "refuse"
    assert "grew from 10 to 20" in doubled.reason


def test_recheck_refuses_a_verdict_worse_than_the_one_previewed() -> None:
    previewed = assess(_facts(_pod("vllm-0", 10, 0, 0.3), _pod("vllm-1", 10, 0, 0.3)))
    worse = recheck(previewed, _facts(_pod("vllm-0", 10, 0, 0.3), _pod("vllm-1", 64, 3, 0.9)))
    assert worse.verdict == "refuse" and "ok -> refuse" in worse.reason


def test_recheck_keeps_unchanged_numbers() -> None:
    facts = _facts(_pod("vllm-0", 10, 0, 0.3), _pod("vllm-1", 10, 0, 0.3))
    assert recheck(assess(facts), facts).verdict == "ok"


def test_refuse_blocks_without_the_exact_override_phrase_and_records_it_with() -> None:
    verdict = assess(
        _facts(_pod("vllm-0", 48, 57, 0.99, preempt=3), _pod("vllm-1", 48, 40, 0.99, preempt=5))
    )
    for typed in (None, "", "override", OVERRIDE_PHRASE.upper(), OVERRIDE_PHRASE + " "):
        blocked = guard_verdict(verdict, typed)
        assert not blocked.ok and blocked.detail["overridden"] is False
    passed = guard_verdict(verdict, OVERRIDE_PHRASE)
    assert passed.ok and passed.detail["overridden"] is True
    assert passed.detail["verdict"] == "refuse" and passed.detail["moved_sequences"] == 105
    assert passed.reason.startswith("overridden refuse")


def test_the_override_phrase_does_not_turn_an_unknown_into_ok() -> None:
    verdict = assess(
        _facts(_pod("vllm-0", 2, 0, 0.1), ReplicaLoad("vllm-1", None, None, None, None, None))
    )
    line = guard_verdict(verdict, OVERRIDE_PHRASE)
    assert line.detail["verdict"] == "unknown" and line.detail["overridden"] is False
