"""Alert states from Prometheus (rules deployed by the drill) and from local evaluation agree.

Both engines watch the same drill through a scenario that trips an alert and clears it; where
they differ, one of them changed state within about one evaluation interval before.
"""

from __future__ import annotations

import time
from pathlib import Path

from oncall.alerts.engine import AlertEngine
from oncall.alerts.loader import load_rule_files
from oncall.backends.prometheus import PrometheusClient
from tests.drill.stack.conftest import FOR_SCALE, Drill
from tests.harness.waiting import eventually

ALERTS = Path(__file__).resolve().parents[3] / "alerts"
LAG_S = 3.0  # one evaluation interval (1 s), one poll, and the query's own duration
Timeline = list[tuple[float, dict[str, str], dict[str, str]]]


def disagreements(timeline: Timeline) -> list[str]:
    """Samples where one source's state is not seen from the other within LAG_S either way.

    The two evaluate at different instants (Prometheus every second, the local engine when
    polled), so a state reached by one is allowed to show in the other up to LAG_S earlier or
    later; that also covers a signal flapping around its threshold.
    """
    found = []
    for at, by_prom, by_local in timeline:
        near = [(p, q) for t, p, q in timeline if abs(t - at) <= LAG_S]
        for name, state in by_prom.items():
            if state == by_local[name]:
                continue
            local_seen = state in {q[name] for _, q in near}
            prom_seen = by_local[name] in {p[name] for p, _ in near}
            if not (local_seen and prom_seen):
                found.append(f"{at:.1f} {name}: prometheus {state}, local {by_local[name]}")
    return found


async def test_prometheus_and_local_sources_agree_through_a_scenario(drill: Drill) -> None:
    packs = [ALERTS / "ai-service.yaml", ALERTS / "platform.yaml", ALERTS / "vllm.yaml"]
    loaded = load_rule_files(packs, for_scale=FOR_SCALE)
    assert not loaded.problems and len(loaded.rules) == 21  # 5 + 9 (GPUXidError, OncallServe*) + 7
    timeline: Timeline = []
    async with (
        PrometheusClient(drill.prometheus, timeout=2) as prom_a,
        PrometheusClient(drill.prometheus, timeout=2) as prom_b,
    ):
        deployed = AlertEngine(prom_a, loaded.rules, source="prometheus")
        local = AlertEngine(prom_b, loaded.rules, source="local")

        async def sample() -> tuple[str, str]:
            now = time.time()
            by_prom: dict[str, str] = {s.rule.name: s.state for s in await deployed.refresh(now)}
            by_local: dict[str, str] = {s.rule.name: s.state for s in await local.refresh(now)}
            assert "unknown" not in by_prom.values(), by_prom
            assert "unknown" not in by_local.values(), by_local
            timeline.append((now, by_prom, by_local))
            name = "VectorSearchP999High"
            return by_prom[name], by_local[name]

        async def both_say(wanted: str) -> bool:
            return await sample() == (wanted, wanted)

        async def agree() -> bool:
            """Both sources say the same for every rule. The drill is shared: an alert an
            earlier test's fault left firing in Prometheus is only `pending` for a local engine
            that has just started (it has no history to count `for:` from), a difference of
            when each began watching, not of evaluation."""
            await sample()
            _, by_prom, by_local = timeline[-1]
            return by_prom == by_local

        await eventually(
            agree, within=150, interval=0.5, what="the sources to agree", seen=lambda: timeline[-1]
        )
        timeline.clear()  # the comparison starts from two sources that agree
        await eventually(
            lambda: both_say("inactive"), within=90, interval=0.5, what="both to say inactive"
        )
        drill.cli("inject", "vector-search-slow")
        try:
            await eventually(
                lambda: both_say("firing"), within=60, interval=0.5, what="both to say firing"
            )
        finally:
            drill.cli("clear")
        await eventually(
            lambda: both_say("inactive"), within=120, interval=0.5, what="both to say inactive"
        )
    states = {(p["VectorSearchP999High"], q["VectorSearchP999High"]) for _, p, q in timeline}
    assert any("pending" in pair for pair in states), "the alert went through pending"
    assert disagreements(timeline) == []
