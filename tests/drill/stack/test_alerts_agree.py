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

ALERTS = Path(__file__).resolve().parents[3] / "alerts"
LAG_S = 3.0  # one evaluation interval (1 s), one poll, and the query's own duration
Timeline = list[tuple[float, dict[str, str], dict[str, str]]]


def disagreements(timeline: Timeline) -> list[str]:
    """Samples where the sources differ although neither changed state within LAG_S.

    The local engine's first evaluation counts as a change: it has no history before it.
    """
    start = timeline[0][0] if timeline else 0.0
    changes: dict[tuple[str, str], list[float]] = {}
    for name in timeline[0][2] if timeline else {}:
        changes[(name, "local")] = [start]
    for index, (at, by_prom, by_local) in enumerate(timeline[1:], start=1):
        _, prev_prom, prev_local = timeline[index - 1]
        for name in by_prom:
            if by_prom[name] != prev_prom[name]:
                changes.setdefault((name, "prometheus"), []).append(at)
            if by_local[name] != prev_local[name]:
                changes.setdefault((name, "local"), []).append(at)
    found = []
    for at, by_prom, by_local in timeline:
        for name, state in by_prom.items():
            if state == by_local[name]:
                continue
            recent = [t for src in ("prometheus", "local") for t in changes.get((name, src), [])
                      if at - LAG_S <= t <= at]  # fmt: skip
            if not recent:
                found.append(f"{at:.1f} {name}: prometheus {state}, local {by_local[name]}")
    return found


async def test_prometheus_and_local_sources_agree_through_a_scenario(drill: Drill) -> None:
    loaded = load_rule_files([ALERTS / "ai-service.yaml", ALERTS / "platform.yaml"],
                             for_scale=FOR_SCALE)  # fmt: skip
    assert not loaded.problems and len(loaded.rules) == 10
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

        async def until(wanted: str, within: float) -> None:
            deadline = time.monotonic() + within
            while await sample() != (wanted, wanted):  # bounded: one sample every ~0.5 s
                assert time.monotonic() < deadline, f"both sources never said {wanted}"
                await _pause()

        await until("inactive", 90)
        drill.cli("inject", "vector-search-slow")
        try:
            await until("firing", 60)
        finally:
            drill.cli("clear")
        await until("inactive", 120)
    states = {(p["VectorSearchP999High"], q["VectorSearchP999High"]) for _, p, q in timeline}
    assert any("pending" in pair for pair in states), "the alert went through pending"
    assert disagreements(timeline) == []


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.5)
