"""A verdict whose stored value is not UTF-8 costs that verdict, not the whole list.

Anyone with write access to Redis (or a corruption) can leave bytes that are not UTF-8 in a
verdict's hash; the store reads with `decode_responses`, where one such value failed the whole
pipeline, so the app and `oncall serve` saw no verdict at all. A real redis-server.
"""

from __future__ import annotations

import time

import redis

from oncall.backends.redis import RedisClient
from oncall.backends.verdicts import VerdictStore, verdict_key
from tests.harness.servers import RunningServer


def _verdict(vid: str, ran_at: float) -> dict[str, object]:
    return {"id": vid, "alert": "NotUtf8Test", "firing": f"f-{vid}", "ran_at": ran_at,
            "status": "checked", "steps": []}  # fmt: skip


async def test_one_value_that_is_not_utf8_hides_only_its_own_verdict(
    redis_srv: RunningServer,
) -> None:
    now = time.time()
    store = VerdictStore(RedisClient(redis_srv.url, timeout=2))
    try:
        for vid in ("nu-1", "nu-2", "nu-3"):
            await store.put(_verdict(vid, now))
        raw = redis.Redis.from_url(redis_srv.url)
        raw.hset(verdict_key("nu-2"), "verdict", b'{"id": "nu-2", "x": "\xff\xfe"}')
        raw.close()
        found = await store.get_many(["nu-1", "nu-2", "nu-3"])
        assert [v["id"] for v in found] == ["nu-1", "nu-3"]
        # The connection the failed read used is gone; the next command is answered right.
        assert [v["id"] for v in await store.get_many(["nu-3"])] == ["nu-3"]
    finally:
        await store.aclose()
