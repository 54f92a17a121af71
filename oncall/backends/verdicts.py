"""The team's verdicts in Redis: what each firing's checklist found when it fired.

    oncall:verdict:<id>             hash   verdict → JSON, resolved_at → epoch s (when resolved)
    oncall:verdicts                 zset   id → ran at (epoch s): every verdict, newest last
    oncall:verdicts:alert:<name>    zset   id → ran at: one alert's verdicts
    oncall:firing:<key>             string the id of the newest verdict of one firing
    oncall:claim:<key>              string the replica checking that firing (SET NX PX)

`<key>` names one firing: the context, Alertmanager's fingerprint and `startsAt` (hashed).
`redis-cli ZREVRANGE oncall:verdicts 0 9` lists the newest ids, `HGET oncall:verdict:<id>
verdict` prints one. Retention is bounded twice: every key expires `retention` after it was
written, and each alert keeps its newest `per_alert` verdicts (older ones are deleted with
their index entries when a new one is written).

Only `oncall serve` writes here (its own records, like `acks.py`'s housekeeping: nothing of the
service it watches); the app and `oncall verdicts` read.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from redis.asyncio import Redis

from oncall.backends.redis import RedisClient

PREFIX = "oncall:"
INDEX = f"{PREFIX}verdicts"


def verdict_key(verdict_id: str) -> str:
    return f"{PREFIX}verdict:{verdict_id}"


def alert_index(alert: str) -> str:
    return f"{INDEX}:alert:{alert}"


class VerdictStore:
    """Claim firings, write and read verdicts through one RedisClient (raises BackendError)."""

    def __init__(self, client: RedisClient, *, retention_s: float = 7 * 86400.0,
                 per_alert: int = 100) -> None:  # fmt: skip
        self._client = client
        self.target = client.target
        self.retention_ms = max(1000, round(retention_s * 1000))
        self.per_alert = per_alert

    async def aclose(self) -> None:
        await self._client.aclose()

    async def ping(self) -> float:
        return await self._client.ping()

    async def claim(self, firing: str, replica: str, ttl_s: float) -> tuple[bool, float]:
        """SET NX PX the firing's claim: (True, ttl) when this replica has it, else (False, the
        seconds left of the other replica's claim). Atomic: of two replicas, one wins."""
        key = f"{PREFIX}claim:{firing}"
        ttl_ms = max(1, round(ttl_s * 1000))

        async def run(r: Redis) -> tuple[bool, float]:
            if await r.set(key, replica, nx=True, px=ttl_ms):
                return True, ttl_s
            left = await r.pttl(key)
            return False, max(0.0, left / 1000) if left and left > 0 else 0.0

        return await self._client._call(run)

    async def release(self, firing: str, replica: str) -> None:
        """Drop this replica's claim (after its verdict is stored, or when it gave up)."""
        key = f"{PREFIX}claim:{firing}"

        async def run(r: Redis) -> None:
            if await r.get(key) == replica:
                await r.delete(key)

        await self._client._call(run)

    async def latest_of_firing(self, firing: str) -> tuple[str, float] | None:
        """The newest verdict of a firing: (id, ran at), or None."""

        async def run(r: Redis) -> tuple[str, float] | None:
            found = await r.get(f"{PREFIX}firing:{firing}")
            if not found:
                return None
            vid, _, at = str(found).partition(" ")
            try:
                return vid, float(at)
            except ValueError:
                return None

        return await self._client._call(run)

    async def put(self, verdict: dict[str, Any]) -> None:
        """Write one verdict (its `id`, `alert`, `firing`, `ran_at`) and trim its alert's list,
        in one MULTI/EXEC; the ids trimmed away are deleted in the same transaction."""
        vid, alert, firing = str(verdict["id"]), str(verdict["alert"]), str(verdict["firing"])
        ran_at = float(verdict["ran_at"])
        body = json.dumps(verdict, ensure_ascii=False, default=str)
        px = self.retention_ms
        oldest = time.time() - px / 1000

        async def run(r: Redis) -> None:
            index = alert_index(alert)
            # Ids beyond the per-alert bound once this one is in: deleted with it.
            over = [str(v) for v in await r.zrevrange(index, self.per_alert - 1, -1)]
            async with r.pipeline(transaction=True) as pipe:
                pipe.hset(verdict_key(vid), "verdict", body)
                pipe.pexpire(verdict_key(vid), px)
                if verdict.get("status") == "checked":  # a firing not checked is checked later
                    pipe.set(f"{PREFIX}firing:{firing}", f"{vid} {ran_at}", px=px)
                pipe.zadd(INDEX, {vid: ran_at})
                pipe.zadd(index, {vid: ran_at})
                for old in over:
                    pipe.delete(verdict_key(old))
                    pipe.zrem(index, old)
                    pipe.zrem(INDEX, old)
                pipe.zremrangebyscore(INDEX, "-inf", oldest)
                pipe.zremrangebyscore(index, "-inf", oldest)
                pipe.pexpire(INDEX, px)
                pipe.pexpire(index, px)
                await pipe.execute()

        await self._client._call(run)

    async def resolve(self, firing: str, at: float) -> bool:
        """Record when a firing resolved on its newest verdict; False when none is stored."""
        latest = await self.latest_of_firing(firing)
        if latest is None:
            return False
        key = verdict_key(latest[0])

        async def run(r: Redis) -> bool:
            if not await r.exists(key):
                return False
            await r.hset(key, "resolved_at", str(at))
            return True

        return await self._client._call(run)

    async def ids(self, *, alert: str | None = None, since: float = 0.0,
                  limit: int = 200) -> list[str]:  # fmt: skip
        """Verdict ids, newest first: all of them or one alert's, ran at `since` or later."""
        index = INDEX if alert is None else alert_index(alert)

        async def run(r: Redis) -> list[str]:
            found = await r.zrevrangebyscore(index, "+inf", since, start=0, num=limit)
            return [str(v) for v in found]

        return await self._client._call(run)

    async def get_many(self, ids: list[str]) -> list[dict[str, Any]]:
        """The verdicts of `ids` still stored, in that order; a value not ours is skipped."""

        async def run(r: Redis) -> list[dict[str, str]]:
            try:
                async with r.pipeline(transaction=False) as pipe:
                    for vid in ids:
                        pipe.hgetall(verdict_key(vid))
                    return list(await pipe.execute())
            except UnicodeDecodeError:
                # A value that is not UTF-8 (written by someone else, or corrupted) fails the
                # whole pipeline: read one by one, so it costs its own verdict, not all of them
                # (redis-py drops the connection that held the unread rest).
                return [await _hgetall_or_empty(r, verdict_key(vid)) for vid in ids]

        found = await self._client._call(run) if ids else []
        out = []
        for raw in found:
            verdict = _decoded(raw)
            if verdict is not None:
                out.append(verdict)
        return out

    async def get(self, verdict_id: str) -> dict[str, Any] | None:
        found = await self.get_many([verdict_id])
        return found[0] if found else None


async def _hgetall_or_empty(r: Redis, key: str) -> dict[str, str]:
    try:
        found = await r.hgetall(key)
    except UnicodeDecodeError:
        return {}
    return {str(k): str(v) for k, v in found.items()}  # str already: decode_responses


def _decoded(raw: dict[str, str]) -> dict[str, Any] | None:
    try:
        verdict = json.loads(raw["verdict"])
    except (KeyError, ValueError, TypeError):
        return None
    if not isinstance(verdict, dict) or "id" not in verdict:
        return None
    resolved = raw.get("resolved_at")
    if resolved:
        with contextlib.suppress(ValueError):
            verdict["resolved_at"] = float(resolved)
    return verdict
