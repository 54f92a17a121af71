"""Alert states from both sources against a real Prometheus, and every way the source fails."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from oncall.alerts.engine import AlertEngine
from oncall.alerts.prom_source import instances_of
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import AlertRule, RuleStatus
from tests.harness.faults import http_stub, refused_port, silent_listener
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually

RULES = """\
groups:
- name: engine-test
  rules:
  - alert: Deployed
    expr: vector(7)
    for: 4s
    labels: {severity: page}
"""


def rule(name: str, expr: str, for_s: float = 0.0) -> AlertRule:
    return AlertRule(name=name, expr=expr, group="g", file="f.yaml", line=1, for_s=for_s,
                     labels={"severity": "page"})  # fmt: skip


@pytest.fixture(scope="module")
def prom_with_rule(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    from tests.harness.servers import prometheus_server

    directory = tmp_path_factory.mktemp("engine")
    (directory / "rules.yml").write_text(RULES)
    with prometheus_server(directory / "p", rule_files=[directory / "rules.yml"]) as server:
        yield server


def by_name(statuses: list[RuleStatus]) -> dict[str, RuleStatus]:
    return {s.rule.name: s for s in statuses}


async def test_sources_are_chosen_per_rule_with_one_request(prom_with_rule: RunningServer) -> None:
    rules = [rule("Deployed", "vector(7)", 4), rule("LocalOnly", "vector(3) > 1"),
             rule("LocalQuiet", "vector(0) > 1")]  # fmt: skip
    async with PrometheusClient(prom_with_rule.url, timeout=2) as prom:
        engine = AlertEngine(prom, rules)

        async def deployed_active() -> bool:
            return by_name(await engine.refresh())["Deployed"].state in ("pending", "firing")

        await eventually(deployed_active, within=15, what="the deployed rule to become active")
        before = prom.requests
        statuses = by_name(await engine.refresh())
        # one /api/v1/rules request, plus one instant query for all local rules
        assert prom.requests - before == 1 + 1
    assert statuses["Deployed"].source == "prometheus"
    assert statuses["LocalOnly"].source == "local"
    assert statuses["LocalOnly"].state == "firing"  # for 0: fires at its first evaluation
    assert statuses["LocalOnly"].value == 3
    assert statuses["LocalQuiet"].state == "inactive"
    assert statuses["Deployed"].value == 7


async def test_pending_countdown_then_firing(start_prometheus: Callable[..., RunningServer],
                                            tmp_path: Path) -> None:  # fmt: skip
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(RULES)
    server = start_prometheus(rule_files=[rules_file])
    async with PrometheusClient(server.url, timeout=2) as prom:
        engine = AlertEngine(prom, [rule("Deployed", "vector(7)", 4)], source="prometheus")
        seen: list[RuleStatus] = []

        async def pending() -> bool:
            seen.append(by_name(await engine.refresh())["Deployed"])
            return seen[-1].state == "pending"

        await eventually(pending, within=10, what="Deployed to be pending")
        status = seen[-1]
        instance = status.instances[0]
        assert instance.active_since is not None and status.fires_in_s is not None
        expected = 4 - (time.time() - instance.active_since)
        assert abs(status.fires_in_s - max(0.0, expected)) < 0.5
        assert 0 <= status.fires_in_s <= 4

        async def firing() -> bool:
            seen.append(by_name(await engine.refresh())["Deployed"])
            return seen[-1].state == "firing"

        await eventually(firing, within=15, what="Deployed to fire")
        assert seen[-1].firing_for_s is not None and seen[-1].firing_for_s >= 0
        assert seen[-1].fires_in_s is None


@pytest.fixture
def dead_prometheus_urls() -> Iterator[dict[str, str]]:
    with (
        silent_listener() as silent,
        http_stub(503, b"upstream unavailable", "text/plain") as http_503,
        http_stub(200, b"<html>login</html>") as html,
    ):
        yield {
            "refused": f"http://127.0.0.1:{refused_port()}",
            "timeout": f"http://127.0.0.1:{silent}",
            "http 503": http_503,
            "bad payload": html,
        }


@pytest.mark.parametrize("reason", ["refused", "timeout", "http 503", "bad payload"])
async def test_a_failing_prometheus_makes_alerts_unknown_and_keeps_last_values_stale(
    prom_with_rule: RunningServer, dead_prometheus_urls: dict[str, str], reason: str
) -> None:
    rules = [rule("Deployed", "vector(7)", 4), rule("LocalOnly", "vector(3) > 1")]
    async with PrometheusClient(prom_with_rule.url, timeout=1) as good:
        engine = AlertEngine(good, rules)

        async def both_known() -> bool:
            statuses = by_name(await engine.refresh())
            return (
                statuses["Deployed"].state != "inactive" and statuses["LocalOnly"].instances != ()
            )

        await eventually(both_known, within=15, what="both rules to have an active instance")
        async with PrometheusClient(dead_prometheus_urls[reason], timeout=1) as bad:
            engine.prom = bad
            started = time.time()
            first = by_name(await engine.refresh())
            second = by_name(await engine.refresh())
    for name in ("Deployed", "LocalOnly"):
        status = second[name]
        assert status.state == "unknown", name
        assert status.error is not None and status.error.startswith(reason), status.error
        assert status.stale_since is not None
        assert status.stale_since == first[name].stale_since  # the age counts from the first
        assert status.stale_since >= started - 1
        assert [i.value for i in status.instances] == ([7.0] if name == "Deployed" else [3.0])
    assert second["Deployed"].source == "prometheus"  # the last known source is kept


async def test_promql_error_is_unknown_for_that_rule_only(prometheus_srv: RunningServer) -> None:
    rules = [rule("Broken", "sum(rate(up[5m])"), rule("Fine", "vector(1) > 0")]
    async with PrometheusClient(prometheus_srv.url, timeout=2) as prom:
        statuses = by_name(await AlertEngine(prom, rules, source="local").refresh())
    assert statuses["Broken"].state == "unknown"
    assert statuses["Broken"].error is not None and "query error" in statuses["Broken"].error
    assert statuses["Fine"].state == "firing"


async def test_history_is_fetched_at_most_once_a_minute(prometheus_srv: RunningServer) -> None:
    async with PrometheusClient(prometheus_srv.url, timeout=2) as prom:
        engine = AlertEngine(prom, [rule("Local", "vector(2)")], source="local")
        now = time.time()
        await engine.refresh_history(now)
        assert engine.history["Local"] and all(v == 2.0 for _, v in engine.history["Local"])
        requests = prom.requests
        await engine.refresh_history(now + 30)
        assert prom.requests == requests
        await engine.refresh_history(now + 61)
        assert prom.requests == requests + 1


@pytest.mark.parametrize(
    ("dead", "reason", "unreachable"),
    [
        ("refused", "refused", True),
        ("timeout", "timeout", True),
        ("http 503", "http 5xx", True),
        ("bad payload", "bad payload", False),
    ],
)
async def test_a_failure_keeps_its_reason_as_a_value_apart_from_its_text(
    dead_prometheus_urls: dict[str, str], dead: str, reason: str, unreachable: bool
) -> None:
    rules = [rule("Deployed", "vector(7)", 4), rule("LocalOnly", "vector(3) > 1")]
    async with PrometheusClient(dead_prometheus_urls[dead], timeout=1) as bad:
        for source in ("auto", "local"):
            statuses = by_name(await AlertEngine(bad, rules, source=source).refresh())
            for name, status in statuses.items():
                assert (status.reason, status.unreachable) == (reason, unreachable), (source, name)
                assert status.error is not None and status.error.startswith(dead)


def test_countdown_never_exceeds_the_rules_for() -> None:
    """An activeAt after the moment the refresh began (Prometheus evaluated during the
    request, or its clock is ahead) still counts down from the rule's `for:`, not above it."""
    now = 1_700_000_000.0
    ahead = "2023-11-14T22:13:20.250Z"  # now + 0.25 s
    rule = {"name": "Deployed", "duration": 4, "alerts": [{"state": "pending", "activeAt": ahead}]}
    (instance,) = instances_of(rule, now)
    assert instance.fires_in_s == 4.0
    (later,) = instances_of(rule, now + 1.25)
    assert later.fires_in_s == pytest.approx(3.0)


def test_instances_of_two_decodes_share_their_label_strings() -> None:
    """The board holds two refreshes' instances at once, each decoded anew: a fleet's 5,000
    instances repeat a few label names and values, held once (interned), not once each."""
    import json

    answer = '{"name": "R", "alerts": [{"state": "firing", "labels": {"namespace": "ai-fleet"}}]}'
    (a,), (b,) = instances_of(json.loads(answer), 0.0), instances_of(json.loads(answer), 0.0)
    assert a.labels == b.labels == {"namespace": "ai-fleet"}
    ((key_a, value_a),), ((key_b, value_b),) = a.labels.items(), b.labels.items()
    assert key_a is key_b and value_a is value_b
