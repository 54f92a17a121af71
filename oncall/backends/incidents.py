"""The team's incidents in Redis, kept as acks and verdicts are: one place every replica and
every app reads.

    oncall:incident:<id>      string  the incident as JSON (`Incident.to_json`)
    oncall:incidents          zset    id → opened at (epoch s): every incident, newest last

`redis-cli ZREVRANGE oncall:incidents 0 9` lists the newest ids, `GET oncall:incident:<id>`
prints one. Retention is bounded: every key expires `retention` after it was last written, and
the index drops ids opened before the retention window.
"""

from __future__ import annotations

import json
import time
from typing import Any

from redis.asyncio import Redis

from oncall.backends.redis import RedisClient
from oncall.model.incidents import Incident

PREFIX = "oncall:"
INDEX = f"{PREFIX}incidents"


def incident_key(incident_id: str) -> str:
    return f"{PREFIX}incident:{incident_id}"


class IncidentStore:
    """Write and read incidents through one RedisClient (raises BackendError)."""

    def __init__(self, client: RedisClient, *, retention_s: float = 30 * 86400.0) -> None:
        self._client = client
        self.target = client.target
        self.retention_ms = max(1000, round(retention_s * 1000))

    async def aclose(self) -> None:
        await self._client.aclose()

    async def put(self, incident: Incident) -> None:
        """Write one incident (new or updated) and its index entry, in one MULTI/EXEC."""
        body = json.dumps(incident.to_json(), ensure_ascii=False, default=str)
        px = self.retention_ms
        oldest = time.time() - px / 1000

        async def run(r: Redis) -> None:
            async with r.pipeline(transaction=True) as pipe:
                pipe.set(incident_key(incident.id), body, px=px)
                pipe.zadd(INDEX, {incident.id: incident.opened_at})
                pipe.zremrangebyscore(INDEX, "-inf", oldest)
                pipe.pexpire(INDEX, px)
                await pipe.execute()

        await self._client._call(run)

    async def ids(self, *, since: float = 0.0, limit: int = 200) -> list[str]:
        """Incident ids, newest first, opened at `since` or later."""

        async def run(r: Redis) -> list[str]:
            found = await r.zrevrangebyscore(INDEX, "+inf", since, start=0, num=limit)
            return [str(v) for v in found]

        return await self._client._call(run)

    async def get_many(self, ids: list[str]) -> list[Incident]:
        """The incidents of `ids` still stored, in that order; a value not ours is skipped."""

        async def run(r: Redis) -> list[Any]:
            # Undecoded: one value that is not UTF-8 (written by hand) must not fail the read.
            keys = [incident_key(i) for i in ids]
            return list(await r.execute_command("MGET", *keys, NEVER_DECODE=True))  # type: ignore[no-untyped-call]

        found = await self._client._call(run) if ids else []
        return [incident for raw in found if (incident := _decoded(raw)) is not None]

    async def get(self, incident_id: str) -> Incident | None:
        found = await self.get_many([incident_id])
        return found[0] if found else None

    async def recent(self, *, since: float = 0.0, limit: int = 200) -> list[Incident]:
        """The newest incidents (open and closed), newest first."""
        return await self.get_many(await self.ids(since=since, limit=limit))


def _decoded(raw: Any) -> Incident | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        return Incident.from_json(data) if isinstance(data, dict) else None
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
