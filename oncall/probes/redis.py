"""Redis probes: hit ratio, memory vs maxmemory, evictions, clients, slowlog, latency, one key.

    redis-cli -u redis://HOST:6379/0 INFO
    redis-cli -u redis://HOST:6379/0 SLOWLOG GET 10
    redis-cli -u redis://HOST:6379/0 LATENCY LATEST
    redis-cli -u redis://HOST:6379/0 GET KEY

Every probe shares the run's one `RedisClient` (one connection pool). The equivalents never
carry a password: with one set they say `--askpass`, and redis-cli asks for it. Slowlog
commands that carry secrets (AUTH, HELLO, CONFIG SET, MIGRATE, ACL SETUSER) lose their
arguments before they become facts.
"""

from __future__ import annotations

import shlex
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import Field

from oncall.backends import from_settings
from oncall.errors import BackendError
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext

if TYPE_CHECKING:  # the client (redis.asyncio: ~0.2 s) is imported when a Redis step runs
    from oncall.backends.redis import RedisClient

#: Longest slowlog command text kept in facts; Redis itself cuts arguments at 128 bytes.
COMMAND_CHARS = 80
#: Commands (first words, upper case) whose arguments may hold passwords.
SECRET_COMMANDS = (("AUTH",), ("HELLO",), ("MIGRATE",), ("CONFIG", "SET"), ("ACL", "SETUSER"))


class NoParams(ProbeParams):
    pass


class SlowlogParams(ProbeParams):
    count: int = Field(10, ge=1, le=1024, description="Newest entries to read.")


class KeyParams(ProbeParams):
    key: str = Field(min_length=1, description="Key to GET, e.g. ai-gateway:degradation-level.")


async def redis_client(ctx: ProbeContext) -> RedisClient:
    """The run's shared Redis client."""
    return await ctx.client("redis", lambda: from_settings.redis_client(ctx.settings.redis))


def cli_prefix(ctx: ProbeContext) -> str:
    """`redis-cli [--user U --askpass] -u URL` for the configured Redis, with no secret in it."""
    settings = ctx.settings.redis
    parts = urlsplit(settings.url)
    host = parts.hostname or "localhost"
    if ":" in host:
        host = f"[{host}]"
    url = f"{parts.scheme or 'redis'}://{host}:{parts.port or 6379}{parts.path}"
    words = ["redis-cli"]
    if parts.password or settings.password is not None:
        if parts.username:
            words += ["--user", shlex.quote(parts.username)]
        words.append("--askpass")
    words += ["-u", shlex.quote(url)]
    return " ".join(words)


def _number(info: dict[str, Any], key: str) -> int | float | None:
    value = info.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _ratio(part: float | None, whole: float | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return part / whole


def _iso(unix_seconds: int) -> str:
    return datetime.fromtimestamp(unix_seconds, tz=UTC).isoformat()


async def run_stats(ctx: ProbeContext, _params: NoParams) -> Facts:
    """`redis-cli PING; redis-cli INFO` (and `CONFIG GET maxclients` before Redis 7).

    Facts: hit_ratio (hits / (hits + misses); None before any lookup), keyspace_hits,
    keyspace_misses, used_memory_bytes, maxmemory_bytes (0 = no limit), memory_ratio (used /
    max; None without a limit), maxmemory_policy, evicted_keys, expired_keys,
    connected_clients, blocked_clients, rejected_connections, maxclients (None when neither
    INFO nor CONFIG GET tells), instantaneous_ops_per_sec, ping_ms, version, uptime_s. A field
    INFO lacks is None.
    """
    client = await redis_client(ctx)
    rtt = await client.ping()
    info = await client.info()
    hits, misses = _number(info, "keyspace_hits"), _number(info, "keyspace_misses")
    lookups = None if hits is None or misses is None else hits + misses
    used, limit = _number(info, "used_memory"), _number(info, "maxmemory")
    maxclients = _number(info, "maxclients")
    if maxclients is None:
        maxclients = await _config_number(client, "maxclients")
    policy, version = info.get("maxmemory_policy"), info.get("redis_version")
    return {
        "hit_ratio": _ratio(hits, lookups),
        "keyspace_hits": hits,
        "keyspace_misses": misses,
        "used_memory_bytes": used,
        "maxmemory_bytes": limit,
        "memory_ratio": _ratio(used, limit),
        "maxmemory_policy": None if policy is None else str(policy),
        "evicted_keys": _number(info, "evicted_keys"),
        "expired_keys": _number(info, "expired_keys"),
        "connected_clients": _number(info, "connected_clients"),
        "blocked_clients": _number(info, "blocked_clients"),
        "rejected_connections": _number(info, "rejected_connections"),
        "maxclients": maxclients,
        "instantaneous_ops_per_sec": _number(info, "instantaneous_ops_per_sec"),
        "ping_ms": rtt * 1000.0,
        "version": None if version is None else str(version),
        "uptime_s": _number(info, "uptime_in_seconds"),
    }


async def _config_number(client: RedisClient, name: str) -> int | None:
    """An integer CONFIG parameter, or None where CONFIG is denied, renamed or unknown."""
    try:
        value = await client.config_get(name)
    except BackendError as exc:
        if exc.reason != "query error":  # the server is sick, not just strict: say so
            raise
        return None
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def redact_command(command: str) -> str:
    """The slowlog command text, arguments of secret-bearing commands replaced by "…", cut short."""
    words = command.split(" ")
    upper = [word.upper() for word in words]
    for secret in SECRET_COMMANDS:
        if tuple(upper[: len(secret)]) == secret:
            kept = " ".join(words[: len(secret)])
            command = f"{kept} …" if len(words) > len(secret) else kept
            break
    if len(command) > COMMAND_CHARS:
        command = command[: COMMAND_CHARS - 1] + "…"
    return command


async def run_slowlog(ctx: ProbeContext, params: SlowlogParams) -> Facts:
    """`redis-cli SLOWLOG GET COUNT`.

    Facts: entries [{id, started_at (ISO, UTC), duration_ms, command, client}] newest first,
    count, max_duration_ms (0 when empty). Commands are cut to 80 characters; AUTH, HELLO,
    CONFIG SET, MIGRATE and ACL SETUSER keep only their names."""
    client = await redis_client(ctx)
    rows = await client.slowlog(params.count)
    entries = [
        {
            "id": row.id,
            "started_at": _iso(row.start_time),
            "duration_ms": row.duration_us / 1000.0,
            "command": redact_command(row.command),
            "client": row.client_name or row.client_address,
        }
        for row in rows
    ]
    longest = max((row.duration_us for row in rows), default=0) / 1000.0
    return {"entries": entries, "count": len(entries), "max_duration_ms": longest}


async def run_latency(ctx: ProbeContext, _params: NoParams) -> Facts:
    """`redis-cli LATENCY LATEST`.

    Facts: events [{event, at (ISO, UTC), latest_ms, max_ms}], max_ms (0 when none),
    monitor_threshold_ms (CONFIG GET latency-monitor-threshold; 0 means the monitor is off and
    events stay empty; None when CONFIG is denied)."""
    client = await redis_client(ctx)
    rows = await client.latency_latest()
    events = [
        {
            "event": row.event,
            "at": _iso(row.timestamp),
            "latest_ms": row.latest_ms,
            "max_ms": row.max_ms,
        }
        for row in rows
    ]
    threshold = await _config_number(client, "latency-monitor-threshold")
    return {
        "events": events,
        "max_ms": max((row.max_ms for row in rows), default=0),
        "monitor_threshold_ms": threshold,
    }


async def run_key(ctx: ProbeContext, params: KeyParams) -> Facts:
    """`redis-cli GET KEY`.

    Facts: key, exists, value (the string, None when absent). A key of another type is a
    BackendError "query error" (WRONGTYPE)."""
    client = await redis_client(ctx)
    value = await client.get(params.key)
    return {"key": params.key, "exists": value is not None, "value": value}


def stats_equivalent(ctx: ProbeContext, _params: NoParams) -> str:
    return f"{cli_prefix(ctx)} INFO"


def slowlog_equivalent(ctx: ProbeContext, params: SlowlogParams) -> str:
    return f"{cli_prefix(ctx)} SLOWLOG GET {params.count}"


def latency_equivalent(ctx: ProbeContext, _params: NoParams) -> str:
    return f"{cli_prefix(ctx)} LATENCY LATEST"


def key_equivalent(ctx: ProbeContext, params: KeyParams) -> str:
    return f"{cli_prefix(ctx)} GET {shlex.quote(params.key)}"


PROBES = (
    Probe(
        name="redis.stats",
        backend="redis",
        summary="Hit ratio, memory vs maxmemory, evictions, clients, ops/s, PING time.",
        params=NoParams,
        run=run_stats,
        equivalent=stats_equivalent,
    ),
    Probe(
        name="redis.slowlog",
        backend="redis",
        summary="Newest SLOWLOG entries, secrets redacted.",
        params=SlowlogParams,
        run=run_slowlog,
        equivalent=slowlog_equivalent,
    ),
    Probe(
        name="redis.latency",
        backend="redis",
        summary="Latest and worst latency spikes per event (LATENCY LATEST).",
        params=NoParams,
        run=run_latency,
        equivalent=latency_equivalent,
    ),
    Probe(
        name="redis.key",
        backend="redis",
        summary="Whether a string key exists, and its value.",
        params=KeyParams,
        run=run_key,
        equivalent=key_equivalent,
    ),
)
