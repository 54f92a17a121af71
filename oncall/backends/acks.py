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
from oncall.model.alertmanager import Acknowledgement

ACKS_KEY = "oncall:acks"


def _ack(raw: str, now: float) -> Acknowledgement | None:
    """One field's value, if it is an acknowledgement still in time."""
    try:
        value = json.loads(raw)
        ack = Acknowledgement(str(value["by"]), float(value["at"]), str(value.get("note") or ""))
        until = float(value["until"])
    except (ValueError, KeyError, TypeError):
        return None
    return ack if ack.by and until > now else None


class AckStore:
    """Read, write and clear the team's acknowledgements through one RedisClient."""

    def __init__(self, client: RedisClient, *, key: str = ACKS_KEY) -> None:
        self._client = client
        self.key = key

    async def all(self, *, now: float | None = None) -> dict[str, Acknowledgement]:
        """Every acknowledgement still in time, by alert (one HGETALL); raises BackendError."""
        at = time.time() if now is None else now
        found = await self._client.hgetall(self.key)
        acks = {alert: _ack(raw, at) for alert, raw in found.items()}
        return {alert: ack for alert, ack in acks.items() if ack is not None}

    async def aclose(self) -> None:
        await self._client.aclose()

    async def get(self, alert: str) -> Acknowledgement | None:
        return (await self.all()).get(alert)

    async def put(self, alert: str, ack: Acknowledgement, *, until: float) -> None:
        """HSET the acknowledgement and keep the hash alive until it ends (one MULTI/EXEC)."""
        ttl_ms = max(1, round((until - time.time()) * 1000))
        fields = {"by": ack.by, "at": ack.at, "until": until, "note": ack.note}
        value = json.dumps(fields, ensure_ascii=False)

        async def write(r: Redis) -> None:
            # Every acknowledgement lasts ack_ttl: the newest one ends last.
            async with r.pipeline(transaction=True) as pipe:
                pipe.hset(self.key, alert, value)
                pipe.pexpire(self.key, ttl_ms)
                await pipe.execute()

        await self._client._call(write)

    async def clear(self, alerts: Iterable[str]) -> int:
        """HDEL the acknowledgements of `alerts` (seen resolved); how many there were."""
        names = list(alerts)
        if not names:
            return 0
        return int(await self._client._call(lambda r: r.hdel(self.key, *names)))
