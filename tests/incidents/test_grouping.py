"""The grouping and the merge, as data: the kv-cache storm is one incident with its cause in
words, an unrelated target stays apart, input order never matters, ids stay put as an incident
grows, and an incident closes only after every member has resolved for `close_after`."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from oncall.incidents.grouping import Observed, group
from oncall.incidents.merge import merge
from oncall.incidents.targets import Scope, failing_targets, step_target
from oncall.model.incidents import Member
from oncall.service.incidents import observed

T0 = 1_800_000_000.0
VLLM = "Deployment ai/vllm"
SCOPE = Scope(namespace="ai", redis="127.0.0.1:6379")


def step(id_: str, probe: str, status: str = "fail", **params: object) -> dict[str, Any]:
    return {"id": id_, "probe": probe, "status": status, "params": params, "facts": {}}


def kv_checklist() -> list[dict[str, Any]]:
    return [
        step("deployment", "kube.deployment", "ok", name="vllm"),
        step("kv_cache", "vllm.rates", window="2m"),
        step("latency", "prometheus.query", query="histogram_quantile(0.99, …)"),
    ]


def seen(alert: str, at: float, failing: Mapping[str, Sequence[str]], **labels: str) -> Observed:
    return Observed(Member("eu", alert, labels, T0 + at), failing, checked=True)


def storm() -> list[Observed]:
    """Seven alerts failing kv_cache on the vLLM Deployment, two whose checklists find nothing
    of their own but that Alertmanager grouped with one of them, and a gateway alert failing
    on Redis only, all within a minute."""
    kv = failing_targets(kv_checklist(), SCOPE)
    names = ["LLMHighP99Latency", "LatencyP95High", "ErrorRateHigh", "VllmKVCacheSaturated",
             "VllmQueueTimeP99High", "VllmTTFTP99High", "VllmInterTokenLatencyP99High"]  # fmt: skip
    out = [seen(name, 5.0 * n, kv, namespace="ai") for n, name in enumerate(names)]
    # Fails on both: joins the target most alerts implicate, and does not chain Redis in.
    both: dict[str, Sequence[str]] = {**kv, "Redis 127.0.0.1:6379": ("hit_rate",)}
    out.append(seen("RedisHitRateLow", 40, both))
    lone = Member("eu", "AIServiceUnavailable", {"namespace": "ai"}, T0 + 50, group_key="{}:{ai}")
    out.append(Observed(lone, {}, checked=True))
    grouped = Member("eu", "LLMHighP99Latency", {"namespace": "ai"}, T0, group_key="{}:{ai}")
    out[0] = Observed(grouped, kv, checked=True)
    out.append(seen("GatewayDown", 30, {"Redis 10.0.0.9:6379": ("redis_latency",)}))
    return out


def test_targets_are_read_from_probes_params_and_facts() -> None:
    assert failing_targets(kv_checklist(), SCOPE) == {VLLM: ("kv_cache",)}
    no_deployment = [step("kv_cache", "vllm.rates")]
    assert failing_targets(no_deployment, SCOPE) == {"vLLM servers in ai": ("kv_cache",)}
    assert step_target(step("p", "kube.pods", node="gpu-1"), SCOPE) == "node gpu-1"
    assert step_target(step("p", "kube.pods", name="vllm-0"), SCOPE) == "pod ai/vllm-0"
    assert step_target(step("s", "redis.stats"), SCOPE) == "Redis 127.0.0.1:6379"
    # A key's value is the service's state (its degradation switch), not Redis' health.
    assert step_target(step("k", "redis.key", key="x"), SCOPE) is None
    assert step_target(step("q", "prometheus.query", query="up"), SCOPE) is None
    mem = step("m", "gpu.vllm_memory", deployment="vllm", namespace="llm")
    assert step_target(mem, SCOPE) == "Deployment llm/vllm"
    # unknown / error / warn could not tell or are not failures: they implicate nothing.
    assert failing_targets([step("kv", "vllm.rates", "unknown")], SCOPE) == {}
    assert failing_targets([step("kv", "vllm.rates", "warn")], SCOPE) == {}


def test_the_storm_is_one_incident_with_its_cause_in_words() -> None:
    incidents = group(storm(), window=120)
    assert len(incidents) == 2
    kv, gateway = sorted(incidents, key=lambda i: -len(i.members))
    assert len(kv.members) == 9
    assert kv.explanation == f"grouped: kv_cache fails on {VLLM} in 8 of 9 checklists"
    assert kv.cause is not None and (kv.cause.step, kv.cause.target) == ("kv_cache", VLLM)
    assert kv.opened_at == T0 and kv.id.startswith("inc-")
    assert [m.alert for m in gateway.members] == ["GatewayDown"]
    assert gateway.explanation.startswith("alone: redis_latency fails on Redis 10.0.0.9")


def test_shuffled_input_gives_the_same_incidents() -> None:
    expected = group(storm(), window=120)
    rng = random.Random(32)  # noqa: S311 - a reproducible shuffle, not a secret
    for _ in range(20):
        shuffled = storm() + storm()[:3]  # repeats of an instance change nothing either
        rng.shuffle(shuffled)
        assert group(shuffled, window=120) == expected


def test_instances_further_apart_than_the_window_are_separate_incidents() -> None:
    kv = {VLLM: ("kv_cache",)}
    found = group([seen("A", 0, kv), seen("B", 100, kv), seen("C", 400, kv)], window=120)
    assert [[m.alert for m in i.members] for i in found] == [["A", "B"], ["C"]]


def test_alertmanager_group_key_groups_instances_without_a_target() -> None:
    a = Observed(Member("eu", "A", {}, T0, group_key="g"), {}, checked=False)
    b = Observed(Member("eu", "B", {}, T0 + 10, group_key="g"), {}, checked=True)
    c = Observed(Member("eu", "C", {}, T0 + 10), {}, checked=True)
    found = group([a, b, c], window=120)
    assert [i.explanation for i in found] == [
        "grouped: Alertmanager groups these 2 alerts (g)",
        "alone: its checklist finds no failing target",
    ]


def test_merge_keeps_the_id_as_the_incident_grows_and_closes_it_after_close_after() -> None:
    kv = {VLLM: ("kv_cache",)}
    first = group([seen("B", 10, kv)], window=120)
    kept = merge([], first, now=T0 + 10, close_after=300, seen_contexts={"eu"})
    # An earlier-firing instance whose checklist ran later joins without changing the id.
    grown = group([seen("A", 0, kv), seen("B", 10, kv)], window=120)
    assert grown[0].id != kept[0].id
    kept = merge(kept, grown, now=T0 + 20, close_after=300, seen_contexts={"eu"})
    assert [i.id for i in kept] == [first[0].id]
    assert [m.alert for m in kept[0].members] == ["A", "B"]
    assert kept[0].opened_at == first[0].opened_at
    # Both stop firing: resolved now, closed only close_after later.
    kept = merge(kept, [], now=T0 + 30, close_after=300, seen_contexts={"eu"})
    assert kept[0].ongoing and all(m.resolved_at == T0 + 30 for m in kept[0].members)
    kept = merge(kept, [], now=T0 + 329, close_after=300, seen_contexts={"eu"})
    assert kept[0].ongoing
    kept = merge(kept, [], now=T0 + 330, close_after=300, seen_contexts={"eu"})
    assert kept[0].closed_at == T0 + 330
    # A closed incident never reopens: the same instance firing again is a new incident.
    again = merge(
        kept,
        group([seen("A", 1000, kv)], window=120),
        now=T0 + 1000,
        close_after=300,
        seen_contexts={"eu"},
    )
    assert [i.id for i in again if i.ongoing] != [first[0].id]
    assert len([i for i in again if i.ongoing]) == 1


def test_merge_never_joins_two_open_incidents_of_several_alerts() -> None:
    kv = {VLLM: ("kv_cache",)}
    early = group([seen("A", 0, kv), seen("B", 10, kv)], window=120)
    one = merge([], early, now=T0 + 10, close_after=300, seen_contexts={"eu"})
    late = group([seen("A", 0, kv), seen("B", 10, kv), seen("Y", 500, kv), seen("Z", 510, kv)],
                 window=120)  # fmt: skip
    two = merge(one, late, now=T0 + 510, close_after=300, seen_contexts={"eu"})
    # A bridging instance now groups all of them: each keeps its home, the newcomer joins the
    # incident holding most of them (a tie: the earliest opened).
    bridged = group([seen("A", 0, kv), seen("B", 10, kv), seen("M", 250, kv),
                     seen("Y", 500, kv), seen("Z", 510, kv)], window=300)  # fmt: skip
    three = merge(two, bridged, now=T0 + 520, close_after=300, seen_contexts={"eu"})
    assert sorted(len(i.members) for i in three if i.ongoing) == [2, 3]
    first = next(i for i in three if i.id == one[0].id)
    assert [m.alert for m in first.members] == ["A", "B", "M"]


def test_an_alert_alone_until_its_checklist_ran_joins_the_others() -> None:
    kv = {VLLM: ("kv_cache",)}
    unchecked = Observed(Member("eu", "B", {}, T0 + 10))
    kept = merge([], group([seen("A", 0, kv), unchecked], window=120), now=T0 + 10,
                 close_after=300, seen_contexts={"eu"})  # fmt: skip
    assert len(kept) == 2  # B alone: no checklist has run for it yet
    b_alone = next(i for i in kept if i.members[0].alert == "B")
    kept = merge(kept, group([seen("A", 0, kv), seen("B", 10, kv)], window=120),
                 now=T0 + 20, close_after=300, seen_contexts={"eu"})  # fmt: skip
    (joined,) = [i for i in kept if i.ongoing]
    assert [m.alert for m in joined.members] == ["A", "B"]
    assert joined.explanation == f"grouped: kv_cache fails on {VLLM} in 2 of 2 checklists"
    merged = next(i for i in kept if i.id == b_alone.id)
    assert merged.closed_at == T0 + 20 and merged.extra == {"merged_into": joined.id}


def test_different_steps_failing_on_one_target_are_named_and_counted_once() -> None:
    found = group([seen("A", 0, {VLLM: ("kv_fit",)}), seen("B", 5, {VLLM: ("kv_cache",)}),
                   seen("C", 9, {VLLM: ("kv_cache", "kv_fit")})], window=120)  # fmt: skip
    (incident,) = found
    assert incident.explanation == f"grouped: kv_cache, kv_fit fail on {VLLM} in 3 of 3 checklists"
    assert incident.cause is not None and (incident.cause.step, incident.cause.count) == (
        "kv_cache", 3)  # fmt: skip


def test_a_writer_that_sees_some_firings_resolves_nothing_else() -> None:
    kv = {VLLM: ("kv_cache",)}
    kept = merge([], group([seen("A", 0, kv), seen("B", 5, kv)], window=120), now=T0 + 5,
                 close_after=300, seen_contexts={"eu"})  # fmt: skip
    # serve was told of C only: A and B stay firing; C joins them.
    partial = merge(kept, group([seen("A", 0, kv), seen("C", 9, kv)], window=120), now=T0 + 9,
                    close_after=300)  # fmt: skip
    (incident,) = partial
    assert [(m.alert, m.resolved_at) for m in incident.members] == [
        ("A", None), ("B", None), ("C", None)]  # fmt: skip
    # An app refresh of another context resolves nothing of "eu" either.
    other = merge(partial, [], now=T0 + 20, close_after=300, seen_contexts={"us"})
    assert all(m.resolved_at is None for m in other[0].members)


def test_a_vllm_step_without_a_deployment_step_implicates_the_one_deployment_read() -> None:
    with_deployment = Member("eu", "LLMHighP99Latency", {}, T0)
    without = Member("eu", "LatencyP95High", {}, T0 + 5)
    checked: dict[tuple[str, str, frozenset[tuple[str, str]]], list[dict[str, Any]]] = {
        ("eu", "LLMHighP99Latency", frozenset()): kv_checklist(),
        ("eu", "LatencyP95High", frozenset()): [step("vllm_queue", "vllm.rates")],
    }
    found = observed([with_deployment, without], checked, SCOPE)
    assert [dict(o.failing) for o in found] == [{VLLM: ("kv_cache",)}, {VLLM: ("vllm_queue",)}]
    (incident,) = group(found, window=120)
    assert (
        incident.explanation == f"grouped: kv_cache, vllm_queue fail on {VLLM} in 2 of 2 checklists"
    )
    # Two vLLM Deployments read in the namespace: which one is not known, no alias.
    other = [step("deployment", "kube.deployment", "ok", name="vllm-b"), step("x", "vllm.rates")]
    third = Member("eu", "VllmTTFTP99High", {}, T0 + 7)
    checked[("eu", "VllmTTFTP99High", frozenset())] = other
    found = observed([with_deployment, without, third], checked, SCOPE)
    assert dict(found[1].failing) == {"vLLM servers in ai": ("vllm_queue",)}


def test_serve_holding_a_stale_firing_neither_reopens_nor_recreates_a_closed_incident() -> None:
    """serve holds the firings of the last window and folds them with each new notification;
    an app's refresh has meanwhile resolved and closed their incident. Its stale "firing"
    must not undo the resolution, nor come back as a new incident under the closed one's id."""
    kv = {VLLM: ("kv_cache",)}
    stale = group([seen("A", 0, kv), seen("B", 5, kv)], window=120)
    kept = merge([], stale, now=T0 + 5, close_after=0, seen_contexts={"eu"})
    # An app's refresh: neither fires now; with close_after 0 the incident closes at once.
    kept = merge(kept, [], now=T0 + 60, close_after=0, seen_contexts={"eu"})
    (closed,) = kept
    assert closed.closed_at == T0 + 60
    # serve folds its stale view (A and B still firing as far as it was told).
    after = merge(kept, stale, now=T0 + 70, close_after=0)
    assert after == [] or all(i.id != closed.id for i in after)
    assert not [i for i in after if i.ongoing]
    # A later firing of A is news: a new incident.
    again = merge(kept, group([seen("A", 100, kv)], window=120), now=T0 + 100, close_after=0)
    (new,) = [i for i in again if i.ongoing]
    assert new.id != closed.id and [m.alert for m in new.members] == ["A"]


def test_a_partial_writer_does_not_undo_a_resolution_of_the_same_firing() -> None:
    kv = {VLLM: ("kv_cache",)}
    both = group([seen("A", 0, kv), seen("B", 5, kv)], window=120)
    kept = merge([], both, now=T0 + 5, close_after=300, seen_contexts={"eu"})
    # The app saw B only: A resolved at T0 + 50.
    kept = merge(kept, group([seen("B", 5, kv)], window=120), now=T0 + 50, close_after=300,
                 seen_contexts={"eu"})  # fmt: skip
    # serve still holds A as firing (same first firing): A stays resolved.
    kept = merge(kept, both, now=T0 + 60, close_after=300)
    (incident,) = kept
    assert dict((m.alert, m.resolved_at) for m in incident.members) == {"A": T0 + 50, "B": None}
    # serve is told A fired again (a later first firing): A fires again.
    refired = group([seen("A", 200, kv), seen("B", 5, kv)], window=300)
    kept = merge(kept, refired, now=T0 + 200, close_after=300)
    (incident,) = [i for i in kept if i.ongoing]
    assert dict((m.alert, m.resolved_at) for m in incident.members)["A"] is None
