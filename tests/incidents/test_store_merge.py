"""The store's merge against a real redis-server: two writers (apps or serve replicas) that
group at the same moment never lose each other's members, and a writer whose read went stale
folds again instead of overwriting."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import redis

from oncall.backends.incidents import MERGE_TRIES, Fold, IncidentStore
from oncall.backends.redis import RedisClient
from oncall.errors import BackendError
from oncall.incidents.grouping import Observed, group
from oncall.incidents.merge import merge
from oncall.model.incidents import Incident, Member
from tests.harness.servers import RunningServer

VLLM = {"Deployment ai/vllm": ("kv_cache",)}


def fresh(now: float, *alerts: str) -> list[Incident]:
    return group([Observed(Member("eu", a, {}, now), VLLM, True) for a in alerts], window=120)


def folding(items: list[Incident], now: float) -> Fold:
    return lambda kept: merge(kept, items, now=now, close_after=300)


@asynccontextmanager
async def two_writers_on_a_seed(
    url: str, now: float
) -> AsyncIterator[tuple[IncidentStore, IncidentStore]]:
    """Two stores (two apps, or two serve replicas) on an emptied Redis, the first having
    written the incident of one alert, "Seed", at `now`."""
    redis.Redis.from_url(url).flushdb()
    a = IncidentStore(RedisClient(url, timeout=2))
    b = IncidentStore(RedisClient(url, timeout=2))
    try:
        await a.merge(folding(fresh(now, "Seed"), now))
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


async def test_two_writers_at_once_keep_every_member(redis_srv: RunningServer) -> None:
    now = time.time()
    async with two_writers_on_a_seed(redis_srv.url, now) as (a, b):
        # Each writer saw the seed and one alert of its own, each grouped on the same target:
        # both must end in the seed's incident, whatever the interleaving.
        async def writer(store: IncidentStore, name: str) -> None:
            for n in range(20):  # one refresh after another, as an app or a replica does
                await store.merge(folding(fresh(now, "Seed", f"{name}{n}"), now))

        await asyncio.gather(writer(a, "A"), writer(b, "B"))
        found = [i for i in await a.recent() if i.ongoing]
        assert len(found) == 1
        names = {m.alert for m in found[0].members}
        assert names == {"Seed", *(f"A{n}" for n in range(20)), *(f"B{n}" for n in range(20))}


async def test_a_stale_read_folds_again(redis_srv: RunningServer) -> None:
    raw = redis.Redis.from_url(redis_srv.url)
    now = time.time()
    async with two_writers_on_a_seed(redis_srv.url, now) as (a, b):
        folds: list[int] = []
        other = fresh(now, "Seed", "FromB")

        def racing(kept: list[Incident]) -> list[Incident]:
            folds.append(len(kept))
            if len(folds) == 1:
                # Another replica writes between this writer's read and its write.
                for incident in merge(kept, other, now=now, close_after=300):
                    raw.set(f"oncall:incident:{incident.id}", _json(incident))
                raw.pexpire("oncall:incidents", 60_000)
            return merge(kept, fresh(now, "Seed", "FromA"), now=now, close_after=300)

        written = await a.merge(racing)
        assert len(folds) == 2  # the first attempt's EXEC was refused, the fold ran again
        assert {m.alert for m in written[0].members} == {"Seed", "FromA", "FromB"}
        stored = await b.recent()
        assert {m.alert for m in stored[0].members} == {"Seed", "FromA", "FromB"}


async def test_a_merge_that_always_loses_is_bounded(redis_srv: RunningServer) -> None:
    raw = redis.Redis.from_url(redis_srv.url)
    raw.flushdb()
    store = IncidentStore(RedisClient(redis_srv.url, timeout=2))
    calls = 0

    def always_raced(kept: list[Incident]) -> list[Incident]:
        nonlocal calls
        calls += 1
        raw.pexpire("oncall:incidents", 60_000)
        raw.zadd("oncall:incidents", {f"inc-other{calls}": time.time()})
        return kept

    try:
        with pytest.raises(BackendError, match="conflict"):
            await store.merge(always_raced)
        assert calls == MERGE_TRIES
    finally:
        await store.aclose()


def _json(incident: Incident) -> str:
    return json.dumps(incident.to_json())
