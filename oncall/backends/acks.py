"""The team's acknowledgements in Redis: one hash, one field per acknowledged alert.

    oncall:acks    hash  alert name → JSON {"by", "at", "until", "note"}   (times: epoch s)

`redis-cli HGETALL oncall:acks` shows them. One HGETALL per refresh reads them all. An
acknowledgement ends at its `until` (the setting `alerts.ack_ttl` after it was made) or when
its alert stops firing: readers skip expired ones and `clear` drops the fields of alerts seen
resolved, so an alert that fires again later starts unacknowledged. The hash itself expires
`ack_ttl` after the last acknowledgement, so nothing is left behind when no one reads.

A value that is not the JSON above (written by hand, or by something else) is skipped, never
shown as someone's acknowledgement. Only the `acknowledge` action writes (audited), with
`put_if`: compare and write in one WATCH/MULTI/EXEC, so two operators acknowledging at once
never both think they have it (no Kubernetes Lease is needed for that); `clear` is
housekeeping of this hash alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable

from redis.asyncio import Redis
from redis.exceptions import WatchError

from oncall.backends.redis import RedisClient
from oncall.model.alertmanager import Acknowledgement

ACKS_KEY = "oncall:acks"
#: How many times `put_if` compares again after another write to the hash aborted its EXEC.
_CAS_TRIES = 5


def _ack(raw: str, now: float) -> Acknowledgement | None:
    """One field's value, if it is an acknowledgement still in time."""
    try:
        value = json.loads(raw)
        ack = Acknowledgement(str(value["by"]), float(value["at"]), str(value.get("note") or ""))
        until = float(value["until"])
    except (ValueError, KeyError, TypeError):
        return None
    return ack if ack.by and until > now else None


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw


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

    async def put_if(
        self,
        alert: str,
        ack: Acknowledgement,
        *,
        until: float,
        expected: Acknowledgement | None,
    ) -> tuple[bool, Acknowledgement | None]:
        """`put`, only while the alert's acknowledgement in time is still `expected` (None: no
        one's), compared and written in one WATCH/MULTI/EXEC: of two processes acknowledging
        at once, one writes and the other is told who did. Returns (True, None) when written,
        else (False, the acknowledgement found). A change to another alert's field meanwhile
        aborts the EXEC too: compared again then, a bounded number of times."""
        ttl_ms = max(1, round((until - time.time()) * 1000))
        fields = {"by": ack.by, "at": ack.at, "until": until, "note": ack.note}
        value = json.dumps(fields, ensure_ascii=False)

        async def write(r: Redis) -> tuple[bool, Acknowledgement | None]:
            for _ in range(_CAS_TRIES):
                async with r.pipeline(transaction=True) as pipe:
                    await pipe.watch(self.key)
                    raw = await pipe.hget(self.key, alert)
                    found = None if raw is None else _ack(_text(raw), time.time())
                    if found != expected:
                        return False, found
                    pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                    pipe.hset(self.key, alert, value)
                    pipe.pexpire(self.key, ttl_ms)
                    try:
                        await pipe.execute()
                    except WatchError:
                        continue  # the hash changed after the read: read and compare again
                    return True, None
            raise WatchError(f"{self.key} kept changing: {_CAS_TRIES} tries")

        return await self._client._call(write)

    async def clear(self, alerts: Iterable[str]) -> int:
        """HDEL the acknowledgements of `alerts` (seen resolved); how many there were."""
        names = list(alerts)
        if not names:
            return 0
        return int(await self._client._call(lambda r: r.hdel(self.key, *names)))
