"""The incident store against a real redis-server: round trip, order, retention, and values
that are not incidents (written by hand or by a newer version) never break a reader."""

from __future__ import annotations

import json
import time

import redis

from oncall.backends.incidents import INDEX, IncidentStore, incident_key
from oncall.backends.redis import RedisClient
from oncall.model.incidents import Cause, Incident, Member, incident_id
from tests.harness.servers import RunningServer


def an_incident(alert: str, opened_at: float, **labels: str) -> Incident:
    first = Member("eu", alert, {"namespace": "ai", **labels}, opened_at)
    return Incident(
        id=incident_id(first),
        opened_at=opened_at,
        members=(first, Member("eu", "VllmKVCacheSaturated", {"pod": "vllm-0"}, opened_at + 20)),
        cause=Cause("kv_cache", "Deployment ai/vllm", 2, 2),
        explanation="grouped: kv_cache fails on Deployment ai/vllm in 2 of 2 checklists",
        context="eu",
    )


async def test_incidents_round_trip_newest_first(redis_srv: RunningServer) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    store = IncidentStore(RedisClient(redis_srv.url, timeout=2))
    try:
        now = time.time()
        older, newer = an_incident("A", now - 60, run="1"), an_incident("B", now, run="1")
        await store.put(older)
        await store.put(newer)
        assert await store.ids() == [newer.id, older.id]
        assert await store.get(older.id) == older
        closed = Incident(**{**older.__dict__, "closed_at": now})
        await store.put(closed)  # an update keeps one entry
        assert [i.closed_at for i in await store.recent()] == [None, now]
        assert await store.get("inc-missing") is None
    finally:
        await store.aclose()


async def test_values_not_ours_are_skipped_and_unknown_fields_kept(
    redis_srv: RunningServer,
) -> None:
    raw = redis.Redis.from_url(redis_srv.url)
    raw.flushdb()
    store = IncidentStore(RedisClient(redis_srv.url, timeout=2))
    try:
        good = an_incident("A", time.time(), run="2")
        await store.put(good)
        for bad_id, value in [("inc-junk", b"\xff{not json"), ("inc-list", b"[1, 2]"),
                              ("inc-nomembers", b'{"id": "x", "opened_at": 1}')]:  # fmt: skip
            raw.set(incident_key(bad_id), value)
            raw.zadd(INDEX, {bad_id: time.time() + 1})
        newer = {**good.to_json(), "severity_rank": 3}  # a field a newer version wrote
        raw.set(incident_key(good.id), json.dumps(newer))
        found = await store.recent()
        assert [i.id for i in found] == [good.id]
        assert found[0].extra == {"severity_rank": 3}
        assert found[0].to_json()["severity_rank"] == 3
    finally:
        await store.aclose()


async def test_retention_expires_the_record(redis_srv: RunningServer) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    store = IncidentStore(RedisClient(redis_srv.url, timeout=2), retention_s=3600)
    try:
        incident = an_incident("A", time.time(), run="3")
        await store.put(incident)
        ttl = redis.Redis.from_url(redis_srv.url).pttl(incident_key(incident.id))
        assert 0 < ttl <= 3600 * 1000
    finally:
        await store.aclose()
