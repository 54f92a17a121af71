"""Mutating Redis commands. Only `remediation/` may import this module (import-linter).

Nothing here asks for confirmation or writes audit records: the remediation executor does
both before it calls in.
"""

from __future__ import annotations

from oncall.backends.redis import RedisClient


class RedisWriter:
    """The write side of one RedisClient: SET, and nothing that runs unconfirmed."""

    def __init__(self, client: RedisClient) -> None:
        self._client = client

    async def set(self, key: str, value: str, *, expire_s: int | None = None) -> None:
        """SET key value [EX seconds] (`redis-cli SET key value`)."""
        ok = await self._client._call(lambda r: r.set(key, value, ex=expire_s))
        if not ok:
            raise self._client._error("query error", f"SET {key} was not applied")
