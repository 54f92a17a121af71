"""Redis client (redis-py 8, asyncio) for the read path: PING, INFO, SLOWLOG, LATENCY, GET.

CLI equivalents: `redis-cli PING`, `redis-cli INFO stats`, `redis-cli SLOWLOG GET 10`,
`redis-cli LATENCY LATEST`, `redis-cli CONFIG GET maxclients`; the guards' state (remediation/)
is read with ZCOUNT, ZRANGEBYSCORE, PTTL, HGETALL; the audit Stream with XRANGE and XINFO
STREAM. Writes live in `redis_write.py`, which only remediation may import. Every call is
bounded by the timeout as a whole, with no client-side retries (a sick Redis must make a probe
`unknown` within its timeout, not after four).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis import exceptions as redis_errors
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from oncall.backends.closing import AsyncClosing
from oncall.errors import BackendError

BACKEND = "redis"
T = TypeVar("T")


@dataclass(frozen=True)
class SlowlogEntry:
    """One SLOWLOG entry; duration in microseconds, as Redis reports it."""

    id: int
    start_time: int
    duration_us: int
    command: str
    client_address: str
    client_name: str


@dataclass(frozen=True)
class LatencyEvent:
    """One LATENCY LATEST row: event name, unix time of the latest spike, latest and max ms."""

    event: str
    timestamp: int
    latest_ms: int
    max_ms: int


def _text(value: object) -> str:
    # SLOWLOG fields arrive as bytes even with decode_responses=True (redis-py forces it).
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return "" if value is None else str(value)


def redacted_target(url: str) -> str:
    """host:port/db of a redis URL, without credentials, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    return f"redis://{host}:{port}{parts.path or ''}"


class RedisClient(AsyncClosing):
    """One connection pool to one Redis; use as `async with RedisClient(...) as r`."""

    def __init__(self, url: str, *, timeout: float, password: str | None = None) -> None:
        self.timeout = timeout
        self.target = redacted_target(url)
        self._resets = 0  # pool resets after timeouts, to explain the commands they cut
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url,
            password=password,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),
        )

    async def aclose(self) -> None:
        await self._redis.aclose()

    def _error(self, reason: str, detail: str = "") -> BackendError:
        return BackendError(BACKEND, self.target, reason, detail)

    async def _call(self, command: Callable[[aioredis.Redis], Awaitable[T]]) -> T:
        """Run one command under the timeout, turning redis-py's exceptions into BackendError."""
        resets = self._resets
        try:
            async with asyncio.timeout(self.timeout):
                return await command(self._redis)
        except (TimeoutError, redis_errors.TimeoutError) as exc:
            # A half-done exchange leaves the connection unusable; start clean next time.
            self._resets += 1
            await self._redis.connection_pool.disconnect()
            raise self._error("timeout", f"no answer within {self.timeout:g}s") from exc
        except redis_errors.AuthenticationError as exc:
            raise self._error("auth", str(exc)) from exc
        except redis_errors.ConnectionError as exc:  # after AuthenticationError, its subclass
            if self._resets != resets:
                # Our own reset after another command timed out closed this one's connection:
                # the server did not answer it either.
                raise self._error("timeout", "no answer; connection reset after a timeout") from exc
            raise self._connection_error(exc) from exc
        except redis_errors.NoPermissionError as exc:
            # NOPERM: the ACL denies this user the command or key: the credentials, like a 403.
            raise self._error("auth", f"NOPERM {exc}") from exc
        except redis_errors.ResponseError as exc:
            raise self._error("query error", str(exc)) from exc
        except (redis_errors.RedisError, UnicodeDecodeError, ValueError) as exc:
            raise self._error("bad payload", f"{type(exc).__name__}: {exc}") from exc

    def _connection_error(self, exc: redis_errors.ConnectionError) -> BackendError:
        text = str(exc)
        if "refused" in text.lower() or "Error 111" in text:
            return self._error("refused", text)
        if "protocol" in text.lower():
            return self._error("bad payload", text)
        return self._error("disconnected", text)

    async def ping(self) -> float:
        """Round-trip time of one PING, in seconds."""
        started = time.perf_counter()
        await self._call(lambda r: r.ping())
        return time.perf_counter() - started

    async def info(self, section: str | None = None) -> dict[str, Any]:
        """INFO (or one section of it), parsed: numbers are numbers, keyspace rows are dicts."""
        info = await self._call(lambda r: r.info(section) if section else r.info())
        if not isinstance(info, dict):
            raise self._error("bad payload", "INFO did not parse into fields")
        return info

    async def slowlog(self, count: int = 10) -> list[SlowlogEntry]:
        """The newest `count` SLOWLOG entries."""
        rows = await self._call(lambda r: r.slowlog_get(count))
        try:
            return [
                SlowlogEntry(
                    id=int(row["id"]),
                    start_time=int(row["start_time"]),
                    duration_us=int(row["duration"]),
                    command=_text(row.get("command")),
                    client_address=_text(row.get("client_address")),
                    client_name=_text(row.get("client_name")),
                )
                for row in rows
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise self._error("bad payload", f"malformed SLOWLOG row: {exc}") from exc

    async def latency_latest(self) -> list[LatencyEvent]:
        """LATENCY LATEST; empty unless the server's latency monitor is on."""
        rows = await self._call(lambda r: r.latency_latest())
        try:
            return [
                LatencyEvent(_text(row[0]), int(row[1]), int(row[2]), int(row[3])) for row in rows
            ]
        except (IndexError, TypeError, ValueError) as exc:
            raise self._error("bad payload", f"malformed LATENCY row: {exc}") from exc

    async def config_get(self, name: str) -> str | None:
        """CONFIG GET of one parameter; None when the server has no such parameter.

        Managed Redis and ACLs often deny CONFIG: that is a BackendError "query error" (an ACL's
        NOPERM for CONFIG alone is the server being strict, not the credentials being wrong).
        """
        try:
            found = await self._call(lambda r: r.config_get(name))
        except BackendError as exc:
            if exc.reason == "auth" and exc.detail.startswith("NOPERM"):
                raise self._error("query error", exc.detail) from exc
            raise
        if not isinstance(found, dict):
            raise self._error("bad payload", "CONFIG GET did not parse into pairs")
        value = found.get(name)
        return None if value is None else _text(value)

    async def server_time(self) -> float:
        """TIME: the Redis server's clock, in seconds (the guards decide on it, not on ours)."""
        found = await self._call(lambda r: r.time())
        try:
            seconds, micros = found
            return int(seconds) + int(micros) / 1_000_000
        except (TypeError, ValueError) as exc:
            raise self._error("bad payload", f"TIME did not parse: {exc}") from exc

    async def get(self, key: str) -> str | None:
        """GET key; None when it does not exist."""
        value = await self._call(lambda r: r.get(key))
        return None if value is None else _text(value)

    async def zcount(self, key: str, low: float | str, high: float | str) -> int:
        """ZCOUNT key low high: members scored in [low, high]; "(x", "-inf", "+inf" allowed."""
        return int(await self._call(lambda r: r.zcount(key, low, high)))

    async def zrangebyscore(
        self, key: str, low: float | str, high: float | str
    ) -> list[tuple[str, float]]:
        """ZRANGEBYSCORE key low high WITHSCORES: (member, score) pairs, lowest score first."""
        rows: list[Any] = await self._call(
            lambda r: r.zrangebyscore(key, low, high, withscores=True)
        )
        try:
            return [(_text(member), float(score)) for member, score in rows]
        except (TypeError, ValueError) as exc:
            raise self._error("bad payload", f"malformed ZRANGEBYSCORE row: {exc}") from exc

    async def ttl(self, key: str) -> float | None:
        """Seconds until key expires (PTTL / 1000); None when it is absent or never expires."""
        millis = int(await self._call(lambda r: r.pttl(key)))
        return None if millis < 0 else millis / 1000

    async def hgetall(self, key: str) -> dict[str, str]:
        """HGETALL key; empty when the hash does not exist."""
        found = await self._call(lambda r: r.hgetall(key))
        if not isinstance(found, dict):
            raise self._error("bad payload", "HGETALL did not parse into pairs")
        return {_text(field): _text(value) for field, value in found.items()}

    async def xrange(
        self, stream: str, count: int = 100, *, start: str = "-", end: str = "+"
    ) -> list[tuple[str, dict[str, str]]]:
        """XRANGE stream start end COUNT count: (entry id, fields) pairs, oldest first."""
        rows: list[Any] | None = await self._call(
            lambda r: r.xrange(stream, start, end, count=count)
        )
        try:
            return [
                (_text(entry_id), {_text(k): _text(v) for k, v in fields.items()})
                for entry_id, fields in rows or []
            ]
        except (AttributeError, TypeError, ValueError) as exc:
            raise self._error("bad payload", f"malformed XRANGE entry: {exc}") from exc

    async def xinfo_stream(self, stream: str) -> dict[str, Any] | None:
        """XINFO STREAM stream: length, entries-added, max-deleted-entry-id, …; None when the
        stream does not exist (`redis-cli XINFO STREAM oncall:audit`)."""
        try:
            info = await self._call(lambda r: r.xinfo_stream(stream))
        except BackendError as exc:
            if exc.reason == "query error" and "no such key" in exc.detail.lower():
                return None
            raise
        if not isinstance(info, dict):
            raise self._error("bad payload", "XINFO STREAM did not parse into fields")
        return {_text(key): value for key, value in info.items()}
