"""The team's incidents in Redis, kept as acks and verdicts are: one place every replica and
every app reads.

    oncall:incident:<id>      string  the incident as JSON (`Incident.to_json`)
    oncall:incidents          zset    id → opened at (epoch s): every incident, newest last

`redis-cli ZREVRANGE oncall:incidents 0 9` lists the newest ids, `GET oncall:incident:<id>`
prints one. `merge` is the writers' one route: an optimistic transaction (WATCH the index and
the open incidents, fold, MULTI/EXEC, again on a conflict), so two apps or serve replicas
grouping at once never lose each other's members. Retention is bounded: every key expires
`retention` after it was last written, and the index drops ids opened before the retention
window.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import WatchError

from oncall.backends.redis import RedisClient
from oncall.errors import BackendError
from oncall.model.incidents import Incident

PREFIX = "oncall:"
INDEX = f"{PREFIX}incidents"
#: Tries of a merge that loses its race each time; past them the refresh reports the conflict
#: and the next refresh merges again (bounded: no writer spins on a busy Redis).
MERGE_TRIES = 8
#: Open incidents a merge reads back: older ones than this many are left as they are.
MERGE_WINDOW = 500

#: The fold a merge applies: the open incidents kept → every incident to write.
Fold = Callable[[list[Incident]], list[Incident]]


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

    async def merge(self, fold: Fold, *, since: float = 0.0) -> list[Incident]:
        """Read the incidents opened at `since` or later, apply `fold` to them
        (`oncall.incidents.merge.merge` with this refresh's grouping), write what changed: in
        one transaction that a concurrent writer's change restarts. The incidents as written."""
        px = self.retention_ms

        async def attempt(r: Redis) -> list[Incident] | None:
            async with r.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(INDEX)
                    ids = [str(v) for v in await pipe.zrevrangebyscore(
                        INDEX, "+inf", since, start=0, num=MERGE_WINDOW)]  # fmt: skip
                    keys = [incident_key(i) for i in ids]
                    raw: list[Any] = []
                    if keys:
                        await pipe.watch(INDEX, *keys)
                        found = await pipe.execute_command("MGET", *keys, NEVER_DECODE=True)
                        raw = list(found) if isinstance(found, list) else []
                    # Decoding, the fold and the encoding are CPU over every member of every
                    # open incident (5,000 in a storm): in a thread, the loop stays free.
                    out, bodies = await asyncio.to_thread(_folded, raw, fold)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    for incident, body in bodies:
                        pipe.set(incident_key(incident.id), body, px=px)
                        pipe.zadd(INDEX, {incident.id: incident.opened_at})
                    # Always touch the index: a writer watching it restarts (see the docstring).
                    pipe.zremrangebyscore(INDEX, "-inf", time.time() - px / 1000)
                    pipe.pexpire(INDEX, px)
                    await pipe.execute()
                    return out
                except WatchError:
                    return None

        for n in range(MERGE_TRIES):
            done = await self._client._call(attempt)
            if done is not None:
                return done
            # Apart at random before the next try, so that two writers do not collide in step.
            await asyncio.sleep(random.uniform(0, 0.005 * (n + 1)))  # noqa: S311 - jitter
        raise BackendError(
            "redis", self.target, "conflict", f"incidents changed under {MERGE_TRIES} merges"
        )

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


def _folded(raw: list[Any], fold: Fold) -> tuple[list[Incident], list[tuple[Incident, str]]]:
    """The fold over the stored values, and the JSON of each incident it changed."""
    kept = [i for v in raw if (i := _decoded(v)) is not None]
    before = {i.id: i.to_json() for i in kept}
    out = fold(kept)
    bodies = []
    for incident in out:
        data = incident.to_json()
        if before.get(incident.id) != data:
            bodies.append((incident, json.dumps(data, ensure_ascii=False, default=str)))
    return out, bodies


def _decoded(raw: Any) -> Incident | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        return Incident.from_json(data) if isinstance(data, dict) else None
    except (KeyError, ValueError, TypeError, AttributeError):
        return None
