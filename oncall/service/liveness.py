"""Rule liveness beside the alert states: each status gets its rule's verdict (`silent`: it
cannot fire here) from a `LivenessCache` over the engine's Prometheus client.

The board never waits for a liveness round (it runs in the background every
`alerts.liveness` seconds and the rows get its verdicts when it is done); the CLI waits for
one. Kept apart from the engine's refresh: the verdicts are a pure function of fetched facts
(`oncall.alerts.liveness`), joined to statuses here.
"""

from __future__ import annotations

from dataclasses import replace

from oncall.alerts.liveness_fetch import LivenessCache
from oncall.backends.prometheus import PrometheusClient
from oncall.model.alerts import RuleStatus


class LivenessView:
    """Verdicts for the rules of each refresh; `every_s` 0 turns it off."""

    def __init__(self, prom: PrometheusClient, *, every_s: float, wait: bool) -> None:
        self.cache = LivenessCache(prom, ttl_s=every_s) if every_s > 0 else None
        #: The CLI waits for a round and gives every status its verdict (`-o json` lists
        #: them all); the board never waits, and gives only the verdicts it shows (silent,
        #: unknown): a copy of each of 1,000 statuses a refresh would be ~15 ms of the loop.
        self.wait = wait

    async def annotate(self, statuses: list[RuleStatus]) -> list[RuleStatus]:
        cache = self.cache
        if cache is None:
            return statuses
        exprs = [s.rule.expr for s in statuses]
        if self.wait:
            await cache.wait_fresh(exprs)
        else:
            cache.ensure(exprs)
        every = self.wait
        return [
            replace(s, liveness=verdict)
            if (verdict := cache.current(s.rule.expr)) is not None
            and (every or verdict.state != "live")
            else s
            for s in statuses
        ]

    async def aclose(self) -> None:
        if self.cache is not None:
            await self.cache.aclose()
