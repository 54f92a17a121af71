"""The local alert state machine: every transition with explicit times, a property over
arbitrary presence sequences, and agreement with a real Prometheus evaluating the same rule."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oncall.alerts.local_eval import (
    BATCH_LABEL,
    LocalEvaluator,
    LocalRuleState,
    batch_expression,
    overall_state,
)
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import AlertInstance, AlertRule, AlertStateName
from oncall.model.metrics import Sample
from tests.harness.faults import refused_port
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually

T0 = 1_000_000.0


def rule(
    for_s: float = 0.0,
    keep_firing_for_s: float = 0.0,
    labels: dict[str, str] | None = None,
    name: str = "KvCacheFull",
    expr: str = "kv > 0.9",
) -> AlertRule:
    return AlertRule(
        name=name,
        expr=expr,
        group="g",
        file="rules.yml",
        line=3,
        for_s=for_s,
        keep_firing_for_s=keep_firing_for_s,
        labels=labels if labels is not None else {"severity": "page"},
    )


def sample(value: float = 0.95, **labels: str) -> Sample:
    return Sample({"__name__": "kv", **labels}, T0, value)


def rule_state(state: LocalRuleState) -> str:
    """The rule's state now (a call, so that type narrowing does not outlive an evaluation)."""
    return state.state


def only(instances: list[AlertInstance]) -> AlertInstance:
    assert len(instances) == 1, instances
    return instances[0]


def expected(state: AlertStateName, **known: Any) -> AlertInstance:
    """The whole instance of `rule()` in `state`: no labels, the `known` fields, and every
    other value and time None."""
    unknown = ("value", "active_since", "fires_in_s", "firing_for_s", "last_evaluation")
    fields = {"labels": {}, **dict.fromkeys(unknown), **known}
    return AlertInstance(rule="KvCacheFull", state=state, source="local", **fields)


# --- transitions, with explicit times ------------------------------------------------------


def test_new_label_set_is_pending_with_a_countdown() -> None:
    state = LocalRuleState(rule(for_s=60, labels={"severity": "page", "instance": "rule-wins"}))
    got = only(state.evaluate([sample(0.95, instance="i1", model="m")], T0))
    assert got == expected(
        "pending",
        labels={"instance": "rule-wins", "model": "m", "severity": "page"},
        value=0.95,
        active_since=T0,
        fires_in_s=60.0,
        last_evaluation=T0,
    )
    assert state.state == "pending"


def test_countdown_and_firing_exactly_at_for() -> None:
    state = LocalRuleState(rule(for_s=60))
    state.evaluate([sample(0.91)], T0)
    later = only(state.evaluate([sample(0.93)], T0 + 45))
    assert (later.state, later.fires_in_s, later.value, later.active_since) == (
        "pending", 15.0, 0.93, T0,
    )  # fmt: skip
    just_before = only(state.evaluate([sample()], T0 + 59.999))
    assert just_before.state == "pending"
    assert just_before.fires_in_s == pytest.approx(0.001)
    fired = only(state.evaluate([sample()], T0 + 60))
    assert (fired.state, fired.fires_in_s, fired.firing_for_s) == ("firing", None, 0.0)
    assert fired.active_since == T0
    still = only(state.evaluate([sample(0.99)], T0 + 90))
    assert (still.state, still.firing_for_s, still.value) == ("firing", 30.0, 0.99)
    assert state.state == "firing"


def test_for_is_reached_despite_float_sums() -> None:
    # 0.1 + 0.2 style rounding: 1000.1 + 3 - 1000.1 is not exactly 3.0 in floats.
    start = 1000.1
    state = LocalRuleState(rule(for_s=0.3))
    state.evaluate([sample()], start)
    assert only(state.evaluate([sample()], start + 0.1 + 0.2)).state == "firing"


def test_for_zero_fires_at_the_first_evaluation() -> None:
    state = LocalRuleState(rule(for_s=0))
    got = only(state.evaluate([sample()], T0))
    assert (got.state, got.active_since, got.firing_for_s, got.fires_in_s) == (
        "firing", T0, 0.0, None,
    )  # fmt: skip


def test_disappearing_while_pending_is_dropped_and_restarts_later() -> None:
    state = LocalRuleState(rule(for_s=60, keep_firing_for_s=300))
    state.evaluate([sample()], T0)
    assert state.evaluate([], T0 + 30) == []  # keep_firing_for is for firing alerts only
    assert state.state == "inactive"
    back = only(state.evaluate([sample()], T0 + 40))
    assert (back.state, back.active_since, back.fires_in_s) == ("pending", T0 + 40, 60.0)


def test_firing_resolves_when_gone_and_a_return_starts_pending() -> None:
    state = LocalRuleState(rule(for_s=10))
    state.evaluate([sample()], T0)
    assert only(state.evaluate([sample()], T0 + 10)).state == "firing"
    assert state.evaluate([], T0 + 20) == []
    assert state.state == "inactive"
    again = only(state.evaluate([sample()], T0 + 30))
    assert (again.state, again.active_since, again.fires_in_s) == ("pending", T0 + 30, 10.0)


def test_keep_firing_for_holds_then_resolves() -> None:
    state = LocalRuleState(rule(for_s=10, keep_firing_for_s=60))
    state.evaluate([sample(0.95)], T0)
    state.evaluate([sample(0.97)], T0 + 10)
    # Gone at T0+20: keeps firing, with the last value, until 60 s after that evaluation.
    kept = only(state.evaluate([], T0 + 20))
    assert (kept.state, kept.value, kept.active_since, kept.firing_for_s) == (
        "firing", 0.97, T0, 10.0,
    )  # fmt: skip
    assert only(state.evaluate([], T0 + 79.999)).state == "firing"
    assert state.evaluate([], T0 + 80) == []
    back = only(state.evaluate([sample()], T0 + 90))
    assert (back.state, back.active_since) == ("pending", T0 + 90)


def test_keep_firing_countdown_restarts_when_the_expression_returns_it() -> None:
    state = LocalRuleState(rule(for_s=0, keep_firing_for_s=60))
    state.evaluate([sample()], T0)
    state.evaluate([], T0 + 50)  # kept since T0+50
    returned = only(state.evaluate([sample(0.99)], T0 + 100))  # before T0+110: still active
    assert (returned.state, returned.active_since, returned.value) == ("firing", T0, 0.99)
    assert only(state.evaluate([], T0 + 120)).state == "firing"  # kept since T0+120 now
    assert only(state.evaluate([], T0 + 179)).state == "firing"
    assert state.evaluate([], T0 + 180) == []


def test_label_sets_are_independent() -> None:
    state = LocalRuleState(rule(for_s=30))
    a, b = sample(0.91, instance="a"), sample(0.92, instance="b")
    state.evaluate([a], T0)
    got = state.evaluate([b, a], T0 + 20)
    assert [(i.labels["instance"], i.state, i.fires_in_s) for i in got] == [
        ("a", "pending", 10.0),
        ("b", "pending", 30.0),
    ]
    got = state.evaluate([a, b], T0 + 30)
    assert [(i.labels["instance"], i.state) for i in got] == [("a", "firing"), ("b", "pending")]
    assert overall_state(got) == rule_state(state) == "firing"
    got = state.evaluate([b], T0 + 40)
    assert [(i.labels["instance"], i.state) for i in got] == [("b", "pending")]
    assert rule_state(state) == "pending"
    assert [i.state for i in state.evaluate([b], T0 + 50)] == ["firing"]


def test_duplicate_label_sets_fail_the_evaluation_like_prometheus() -> None:
    state = LocalRuleState(rule(for_s=30, labels={"severity": "page"}))
    state.evaluate([sample(instance="a")], T0)
    # Two series that differ only in __name__ collide once it is dropped.
    clash = [sample(instance="a"), Sample({"__name__": "other", "instance": "a"}, T0, 1.0)]
    got = only(state.evaluate(clash, T0 + 30))
    assert (got.state, got.active_since, got.stale_since) == ("pending", T0, T0 + 30)
    assert got.error is not None
    assert "same labelset" in got.error
    assert state.state == "unknown"


def test_failure_keeps_last_instances_marked_stale() -> None:
    state = LocalRuleState(rule(for_s=60))
    state.evaluate([sample(0.95, instance="a")], T0)
    before = only(state.evaluate([sample(0.96, instance="a")], T0 + 20))
    first = only(state.fail("timeout: no answer within 2s", T0 + 40))
    assert first.error == "timeout: no answer within 2s"
    assert first.stale_since == T0 + 40
    # Everything else is the last known state, unchanged (the caller shows it as stale).
    assert first == AlertInstance(
        **{**before.__dict__, "error": first.error, "stale_since": T0 + 40}
    )
    assert state.state == "unknown"
    second = only(state.fail("refused: connection refused", T0 + 60))
    assert (second.stale_since, second.error) == (T0 + 40, "refused: connection refused")
    # Back: the state machine continues from the state kept through the failures.
    recovered = only(state.evaluate([sample(0.97, instance="a")], T0 + 70))
    assert (recovered.state, recovered.active_since, recovered.firing_for_s) == (
        "firing", T0, 0.0,
    )  # fmt: skip
    assert (recovered.error, recovered.stale_since) == (None, None)
    # A later failure starts a new stale period.
    assert only(state.fail("timeout", T0 + 90)).stale_since == T0 + 90


def test_failure_before_any_success_is_unknown() -> None:
    state = LocalRuleState(rule(for_s=60))
    got = only(state.fail("refused", T0))
    assert got == expected("unknown", error="refused", stale_since=T0)
    assert state.state == "unknown"


def test_failure_after_an_inactive_evaluation_is_unknown_with_the_last_evaluation() -> None:
    state = LocalRuleState(rule())
    assert state.evaluate([], T0) == []
    assert state.state == "inactive"
    got = only(state.fail("http 503", T0 + 15))
    assert (got.state, got.last_evaluation, got.stale_since) == ("unknown", T0, T0 + 15)


# --- properties ----------------------------------------------------------------------------

steps = st.lists(st.tuples(st.booleans(), st.integers(1, 20)), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(for_s=st.integers(0, 60), history=steps)
def test_fires_iff_continuously_present_for_at_least_for(
    for_s: int, history: list[tuple[bool, int]]
) -> None:
    state = LocalRuleState(rule(for_s=for_s))
    now, run_start, fired_at = T0, None, None
    for present, step in history:
        now += step
        got = state.evaluate([sample(instance="x")] if present else [], now)
        if not present:
            run_start = fired_at = None
            assert got == []
            continue
        run_start = now if run_start is None else run_start
        instance = only(got)
        assert instance.active_since == run_start
        if now - run_start >= for_s:
            fired_at = now if fired_at is None else fired_at
            assert instance.state == "firing"
            assert instance.firing_for_s == now - fired_at
        else:
            assert instance.state == "pending"
            assert instance.fires_in_s == for_s - (now - run_start)


@settings(max_examples=300, deadline=None)
@given(for_s=st.integers(0, 30), keep_s=st.integers(1, 60), history=steps)
def test_keep_firing_for_only_extends_firing(
    for_s: int, keep_s: int, history: list[tuple[bool, int]]
) -> None:
    state = LocalRuleState(rule(for_s=for_s, keep_firing_for_s=keep_s))
    now, previous, absent_since = T0, "inactive", None
    for present, step in history:
        now += step
        got = state.evaluate([sample(instance="x")] if present else [], now)
        current = overall_state(got)
        if present:
            absent_since = None
            # Present: at least pending; firing continues once firing.
            assert current in (("firing",) if previous == "firing" else ("pending", "firing"))
        else:
            absent_since = now if absent_since is None else absent_since
            held = previous == "firing" and now - absent_since < keep_s
            assert current == ("firing" if held else "inactive")
        previous = current


# --- LocalEvaluator ------------------------------------------------------------------------


class GatheringTransport(httpx.AsyncBaseTransport):
    """Rejects the batched query (one of its expressions is broken), then answers no single
    query until all `expected` are in flight: only concurrent queries finish."""

    def __init__(self, expected: int, answers: dict[str, httpx.Response]) -> None:
        self.expected = expected
        self.answers = answers
        self.in_flight = 0
        self.all_there = asyncio.Event()
        self.batches: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        if BATCH_LABEL in query:
            self.batches.append(query)
            error = {"status": "error", "errorType": "bad_data", "error": "parse error"}
            return httpx.Response(400, json=error)
        self.in_flight += 1
        if self.in_flight >= self.expected:
            self.all_there.set()
        await self.all_there.wait()
        return self.answers[request.url.params["query"]]


def vector(*items: tuple[dict[str, str], float]) -> httpx.Response:
    result = [{"metric": labels, "value": [T0, str(value)]} for labels, value in items]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return httpx.Response(200, json=body)


async def test_evaluator_queries_concurrently_and_isolates_failures() -> None:
    ok = rule(name="Ok", expr="ok", for_s=0)
    broken = rule(name="Broken", expr="broken")
    quiet = rule(name="Quiet", expr="quiet")
    error = {"status": "error", "errorType": "bad_data", "error": "parse error"}
    transport = GatheringTransport(
        3,
        {
            "ok": vector(({"__name__": "up", "job": "vllm"}, 1.0)),
            "broken": httpx.Response(400, json=error),
            "quiet": vector(),
        },
    )
    evaluator = LocalEvaluator()
    async with PrometheusClient("http://prom.test", timeout=5.0, transport=transport) as prom:
        got = await evaluator.evaluate(prom, [ok, broken, quiet], now=T0)
    assert transport.batches == [batch_expression(["ok", "broken", "quiet"])]
    assert transport.in_flight == 3
    assert [(i.state, i.labels, i.value) for i in got["Ok"]] == [
        ("firing", {"job": "vllm", "severity": "page"}, 1.0)
    ]
    assert got["Quiet"] == []
    failed = only(got["Broken"])
    assert (failed.state, failed.stale_since) == ("unknown", T0)
    assert failed.error == "query error: bad_data: parse error"
    assert evaluator.state_of(ok).state == "firing"
    assert evaluator.state_of(broken).state == "unknown"


async def test_healthy_rules_are_evaluated_in_one_query(prometheus_srv: RunningServer) -> None:
    rules = [
        rule(name="Two", expr='label_replace(vector(2), "job", "a", "", "") > 1', for_s=0),
        rule(name="Zero", expr="vector(0) > 1", for_s=0),
        rule(name="Three", expr="vector(3)", for_s=60, labels={}),
    ]
    async with PrometheusClient(prometheus_srv.url, timeout=5.0) as prom:
        got = await LocalEvaluator().evaluate(prom, rules, now=time.time())
        assert prom.requests == 1
    assert [(i.state, i.labels, i.value) for i in got["Two"]] == [
        ("firing", {"job": "a", "severity": "page"}, 2.0)
    ]
    assert got["Zero"] == []
    assert [(i.state, i.labels, i.value) for i in got["Three"]] == [("pending", {}, 3.0)]


async def test_evaluator_keeps_state_per_rule_and_forgets_removed_rules(
    prometheus_srv: RunningServer,
) -> None:
    slow = rule(name="Slow", expr="vector(1)", for_s=10, labels={})
    bad = rule(name="Bad", expr="vector(1", labels={})
    evaluator = LocalEvaluator()
    async with PrometheusClient(prometheus_srv.url, timeout=5.0) as prom:
        first = await evaluator.evaluate(prom, [slow, bad], now=time.time())
        assert only(first["Slow"]).state == "pending"
        assert only(first["Bad"]).state == "unknown"
        assert (only(first["Bad"]).error or "").startswith("query error")
        later = time.time() + 10
        second = await evaluator.evaluate(prom, [slow], now=later)
    assert (only(second["Slow"]).state, only(second["Slow"]).firing_for_s) == ("firing", 0.0)
    assert list(second) == ["Slow"]
    assert len(evaluator.states) == 1

    async with PrometheusClient(f"http://127.0.0.1:{refused_port()}", timeout=2.0) as down:
        third = await evaluator.evaluate(down, [slow], now=later + 5)
    stale = only(third["Slow"])
    assert (stale.state, stale.stale_since) == ("firing", later + 5)
    assert (stale.error or "").startswith("refused")
    assert stale.last_evaluation == later


# --- agreement with a real Prometheus ------------------------------------------------------

RULE_FILE = """\
groups:
- name: local-vs-prometheus
  rules:
  - alert: AlwaysOnAfter3s
    expr: vector(1)
    for: 3s
"""
FOR_S = 3.0
EVAL_INTERVAL_S = 1.0
COUNTDOWN_TOLERANCE_S = 1.5


def parse_rfc3339(text: str) -> float:
    """Prometheus' RFC 3339 times carry nanoseconds; Python parses microseconds."""
    trimmed = re.sub(r"\.(\d{1,6})\d*", r".\1", text.replace("Z", "+00:00"))
    return datetime.fromisoformat(trimmed).timestamp()


@dataclass
class Observation:
    before: float  # local evaluation time, taken before asking Prometheus
    after: float  # when Prometheus' answer was in
    local_state: str
    local_fires_in: float | None
    prom_state: str
    prom_active_at: float | None


async def prometheus_view(prom: PrometheusClient) -> tuple[str, float | None, dict[str, str]]:
    for group in await prom.rules(kind="alert"):
        for found in group["rules"]:
            if found["name"] == "AlwaysOnAfter3s":
                alerts = found.get("alerts") or []
                if not alerts:
                    return str(found["state"]), None, {}
                return (
                    str(alerts[0]["state"]),
                    parse_rfc3339(alerts[0]["activeAt"]),
                    dict(alerts[0]["labels"]),
                )
    raise AssertionError("rule AlwaysOnAfter3s not loaded by Prometheus")


async def test_local_evaluation_agrees_with_prometheus(
    start_prometheus: Callable[..., RunningServer], tmp_path: Path
) -> None:
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(RULE_FILE)
    server = start_prometheus(rule_files=[rules_file], interval="1s")
    local_rule = AlertRule(
        name="AlwaysOnAfter3s",
        expr="vector(1)",
        group="local-vs-prometheus",
        file=str(rules_file),
        line=4,
        for_s=FOR_S,
    )
    evaluator = LocalEvaluator()
    seen: list[Observation] = []

    async with PrometheusClient(server.url, timeout=2.0) as prom:

        async def prometheus_pending() -> bool:
            return (await prometheus_view(prom))[0] == "pending"

        # Start evaluating locally as soon as Prometheus has, so both countdowns start together.
        await eventually(prometheus_pending, within=15, what="Prometheus' pending", interval=0.05)

        async def observe() -> bool:
            before = time.time()
            local = only(
                (await evaluator.evaluate(prom, [local_rule], now=before))[local_rule.name]
            )
            prom_state, active_at, labels = await prometheus_view(prom)
            assert local.labels == {k: v for k, v in labels.items() if k != "alertname"}
            seen.append(
                Observation(
                    before, time.time(), local.state, local.fires_in_s, prom_state, active_at
                )
            )
            return local.state == prom_state == "firing"

        await eventually(observe, within=15, what="both to report firing", interval=0.1)

    print(json.dumps([o.__dict__ for o in seen], indent=1))
    first = seen[0]
    assert (first.local_state, first.prom_state) == ("pending", "pending")
    local_active = first.before
    prom_active = first.prom_active_at
    assert prom_active is not None
    assert all(o.prom_active_at == prom_active for o in seen)  # one episode throughout
    for o in seen:
        # Local: firing exactly once `for` has passed since its own first evaluation.
        elapsed_ms = round((o.before - local_active) * 1000)  # Prometheus' resolution
        assert (o.local_state == "firing") == (elapsed_ms >= FOR_S * 1000)
        if o.local_state == "pending":
            assert o.local_fires_in is not None
            prom_countdown = FOR_S - (o.before - prom_active)
            assert abs(o.local_fires_in - prom_countdown) <= COUNTDOWN_TOLERANCE_S
        # Prometheus: fires at its first evaluation `for` after activeAt, seen one interval late
        # at most (plus the time its answer took).
        if o.prom_state == "firing":
            assert o.after >= prom_active + FOR_S
        else:
            assert o.prom_state == "pending"
            assert o.before < prom_active + FOR_S + EVAL_INTERVAL_S + (o.after - o.before)
    local_fired = next(o.before for o in seen if o.local_state == "firing")
    prom_fired = prom_active + FOR_S
    assert abs(local_fired - prom_fired) <= EVAL_INTERVAL_S + COUNTDOWN_TOLERANCE_S
