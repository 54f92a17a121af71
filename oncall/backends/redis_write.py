"""Mutating Redis commands. Only `remediation/` may import this module (import-linter).

Nothing here asks for confirmation or writes audit records: the remediation executor does
both before it calls in. Besides SET (the degradation flag) this holds the few writes the
guards and the audit mirror need. Multi-command updates are MULTI/EXEC transactions through
redis-py pipelines, never server-side scripts (EVAL/Lua): a transaction is plain commands the
ACL already grants, and it reads the same in `MONITOR` as in this file.

Each method is one `RedisClient._call`, so the whole exchange (a transaction included) is
bounded by the client's timeout, with no retries, and fails as a `BackendError`.
"""

from __future__ import annotations

from redis import exceptions as redis_errors
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from oncall.backends.redis import RedisClient


def _millis(seconds: float) -> int:
    # PX/PEXPIRE take whole milliseconds, and 0 would be rejected (or expire at once).
    return max(1, round(seconds * 1000))


def _encodable(fields: dict[str, str]) -> dict[FieldT, EncodableT]:
    # A copy typed as redis-py wants it (dict is invariant in its key and value types).
    return dict(fields.items())


class RedisWriter:
    """The write side of one RedisClient: SET and the guards' and audit's writes."""

    def __init__(self, client: RedisClient) -> None:
        self._client = client

    async def set(self, key: str, value: str, *, expire_s: float | None = None) -> None:
        """SET key value [PX ms] (`redis-cli SET key value PX 60000`)."""
        px = None if expire_s is None else _millis(expire_s)
        ok = await self._client._call(lambda r: r.set(key, value, px=px))
        if not ok:
            raise self._client._error("query error", f"SET {key} was not applied")

    async def set_nx(self, key: str, value: str, *, expire_s: float) -> bool:
        """SET key value NX PX ms: True when the key was created, False when it existed."""
        created = await self._client._call(
            lambda r: r.set(key, value, nx=True, px=_millis(expire_s))
        )
        return bool(created)

    async def delete(self, key: str) -> bool:
        """DEL key: True when it existed."""
        return int(await self._client._call(lambda r: r.delete(key))) > 0

    async def xadd(self, stream: str, fields: dict[str, str], *, maxlen: int | None = None) -> str:
        """XADD stream [MAXLEN ~ n] * field value …: the new entry's id.

        Trimming is approximate (`~`): Redis trims whole radix-tree nodes, which is far cheaper
        and keeps at least `maxlen` entries; the audit file, not the stream, is the record.
        """
        entry_id = await self._client._call(
            lambda r: r.xadd(stream, _encodable(fields), maxlen=maxlen, approximate=True)
        )
        return entry_id if isinstance(entry_id, str) else str(entry_id)

    async def record_in_window(
        self, key: str, member: str, *, score: float, window_s: float
    ) -> int:
        """Add one event to a sliding-window sorted set; the count left in the window.

        One MULTI/EXEC: `ZADD key score member; ZREMRANGEBYSCORE key -inf score-window;
        ZCARD key; PEXPIRE key window`. Events at or before `score - window_s` are dropped;
        the expiry lets an idle key vanish on its own. `member` must be unique per event.
        """

        async def run(r: Redis) -> int:
            async with r.pipeline(transaction=True) as pipe:
                pipe.zadd(key, {member: score})
                pipe.zremrangebyscore(key, "-inf", score - window_s)
                pipe.zcard(key)
                pipe.pexpire(key, _millis(window_s))
                replies = await pipe.execute()
            return int(replies[2])

        return await self._client._call(run)

    async def replace_hash(self, key: str, fields: dict[str, str], *, expire_s: float) -> None:
        """One MULTI/EXEC: `DEL key; HSET key field value …; PEXPIRE key ms`.

        The DEL makes the hash exactly `fields` (no field of an older hash survives).
        """

        async def run(r: Redis) -> None:
            async with r.pipeline(transaction=True) as pipe:
                pipe.delete(key)
                pipe.hset(key, mapping=_encodable(fields))
                pipe.pexpire(key, _millis(expire_s))
                await pipe.execute()

        await self._client._call(run)

    async def claim_field(self, key: str, field: str, value: str) -> bool:
        """Set one field of an EXISTING hash, only if that field is not set yet.

        `WATCH key; EXISTS key; HEXISTS key field; MULTI; HSET key field value; EXEC`. False when
        the hash is gone (expired), the field is already set, or the hash changed between the
        check and EXEC (someone else claimed it first). HSETNX alone would re-create an expired
        hash without its TTL, holding a half record forever.
        """

        async def run(r: Redis) -> bool:
            async with r.pipeline(transaction=True) as pipe:
                await pipe.watch(key)
                if not await pipe.exists(key) or await pipe.hexists(key, field):
                    return False
                pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                pipe.hset(key, field, value)
                try:
                    await pipe.execute()
                except redis_errors.WatchError:
                    return False
                return True

        return await self._client._call(run)
