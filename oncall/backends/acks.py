"""The team's acknowledgements in Redis: one hash, one field per acknowledged alert.

    oncall:acks    hash  alert name → JSON {"by", "at", "until", "note"}   (times: epoch s)

`redis-cli HGETALL oncall:acks` shows them. One HGETALL per refresh reads them all. An
acknowledgement ends at its `until` (the setting `alerts.ack_ttl` after it was made) or when
its alert stops firing: readers skip expired ones and `clear` drops the fields of alerts seen
resolved, so an alert that fires again later starts unacknowledged. The hash itself expires
`ack_ttl` after the last acknowledgement, so nothing is left behind when no one reads.

A value that is not the JSON above (written by hand, or by something else) is skipped, never
shown as someone's acknowledgement. Only the `acknowledge` action writes (audited); `clear` is
housekeeping of this hash alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from redis.asyncio import Redis

from oncall.backends.redis import RedisClient
from oncall.model.acks import Ack

ACKS_KEY = "oncall:acks"


def _ack(alert: str, raw: str) -> Ack | None:
    try:
        value = json.loads(raw)
        ack = Ack(alert, str(value["by"]), float(value["at"]), float(value["until"]),
                  str(value.get("note") or ""))  # fmt: skip
    except (ValueError, KeyError, TypeError):
        return None
    return ack if ack.by else None


class AckStore:
    """Read, write and clear the team's acknowledgements through one RedisClient."""

    def __init__(self, client: RedisClient, *, key: str = ACKS_KEY) -> None:
        self._client = client
        self.key = key

    async def all(self, *, now: float | None = None) -> dict[str, Ack]:
        """Every acknowledgement still in time (HGETALL); raises BackendError."""
        at = time.time() if now is None else now
        found = {
            name: _ack(name, raw) for name, raw in (await self._client.hgetall(self.key)).items()
        }
        return {name: ack for name, ack in found.items() if ack is not None and ack.until > at}

    async def get(self, alert: str) -> Ack | None:
        return (await self.all()).get(alert)

    async def put(self, ack: Ack) -> None:
        """HSET the acknowledgement and keep the hash alive until it ends (one MULTI/EXEC)."""
        ttl_ms = max(1, round((ack.until - time.time()) * 1000))
        value = json.dumps(ack.as_dict(), ensure_ascii=False)

        async def write(r: Redis) -> None:
            # Every acknowledgement lasts ack_ttl: the newest one ends last.
            async with r.pipeline(transaction=True) as pipe:
                pipe.hset(self.key, ack.alert, value)
                pipe.pexpire(self.key, ttl_ms)
                await pipe.execute()

        await self._client._call(write)

    async def clear(self, alerts: Iterable[str]) -> int:
        """HDEL the acknowledgements of `alerts` (seen resolved); how many there were."""
        names = list(alerts)
        if not names:
            return 0
        return int(await self._client._call(lambda r: r.hdel(self.key, *names)))
