"""Redis probes against real redis-servers: facts, secrets kept out, and each way Redis fails."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from pydantic import SecretStr

from oncall.backends.redis import RedisClient
from oncall.errors import BackendError
from oncall.probes.base import Facts, Probe
from oncall.probes.context import ProbeContext
from oncall.probes.redis import PROBES, cli_prefix, redact_command
from oncall.settings.model import RedisSettings, Settings
from tests.harness.faults import refused_port, silent_listener
from tests.harness.servers import RunningServer

TIMEOUT = 1.0
SLACK = 0.5
PASSWORD = "pr0be-s3cret"
BY_NAME: dict[str, Probe[Any]] = {probe.name: probe for probe in PROBES}
DEFAULT_PARAMS: dict[str, dict[str, Any]] = {"redis.key": {"key": "oncall:test:probe"}}


def settings(url: str, password: str | None = None, timeout: float = TIMEOUT) -> Settings:
    secret = SecretStr(password) if password is not None else None
    return Settings(redis=RedisSettings(url=url, password=secret, timeout=timeout))


async def run(ctx: ProbeContext, name: str, **params: Any) -> Facts:
    probe = BY_NAME[name]
    facts = await probe.run(ctx, probe.params(**params))
    json.dumps(facts)  # facts are JSON-able
    return facts


def equivalent(ctx: ProbeContext, name: str, **params: Any) -> str:
    probe = BY_NAME[name]
    return probe.equivalent(ctx, probe.params(**params))


def sync_client(server: RunningServer, password: str | None = None) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, password=password, protocol=2)


def require_password(server: RunningServer) -> None:
    """Set requirepass after start: the harness's readiness check is slow against a password."""
    sync = sync_client(server)
    try:
        sync.config_set("requirepass", PASSWORD)
    finally:
        sync.close()


def test_every_probe_is_named_and_documented() -> None:
    assert set(BY_NAME) == {"redis.stats", "redis.slowlog", "redis.latency", "redis.key"}
    for probe in PROBES:
        assert probe.backend == "redis"
        assert probe.run.__doc__ and "redis-cli" in probe.run.__doc__, probe.name


# ---- redis.stats ---------------------------------------------------------------------------


async def test_stats_hit_ratio_and_memory(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--maxclients", "123")
    async with ProbeContext(settings(server.url)) as ctx:
        fresh = await run(ctx, "redis.stats")
        assert fresh["hit_ratio"] is None  # no lookup yet: no ratio, not 0
        assert (fresh["keyspace_hits"], fresh["keyspace_misses"]) == (0, 0)
        assert fresh["maxmemory_bytes"] == 0
        assert fresh["memory_ratio"] is None  # no limit
        assert fresh["maxclients"] == 123
        assert re.fullmatch(r"\d+\.\d+\.\d+", fresh["version"])
        assert 0 < fresh["ping_ms"] < TIMEOUT * 1000
        assert fresh["connected_clients"] >= 1
        assert fresh["blocked_clients"] == 0
        assert fresh["rejected_connections"] == 0
        assert fresh["uptime_s"] >= 0
        assert isinstance(fresh["instantaneous_ops_per_sec"], int)

        sync = sync_client(server)
        try:
            sync.set("k", "v")
            for _ in range(3):
                assert sync.get("k") == b"v"
            assert sync.get("absent") is None
            sync.config_set("maxmemory", str(100 * 1024 * 1024))
            sync.config_set("maxmemory-policy", "allkeys-lru")
        finally:
            sync.close()
        loaded = await run(ctx, "redis.stats")
    assert (loaded["keyspace_hits"], loaded["keyspace_misses"]) == (3, 1)
    assert loaded["hit_ratio"] == pytest.approx(0.75)
    assert loaded["maxmemory_bytes"] == 100 * 1024 * 1024
    assert loaded["maxmemory_policy"] == "allkeys-lru"
    assert loaded["memory_ratio"] == pytest.approx(
        loaded["used_memory_bytes"] / loaded["maxmemory_bytes"]
    )
    assert 0 < loaded["memory_ratio"] < 1
    assert loaded["evicted_keys"] == 0


async def test_stats_counts_evictions(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--maxmemory-policy", "allkeys-lru")
    sync = sync_client(server)
    try:
        used = int(sync.info("memory")["used_memory"])
        sync.config_set("maxmemory", str(used + 256 * 1024))
        pipe = sync.pipeline(transaction=False)
        for i in range(100):
            pipe.set(f"fill:{i}", "x" * 10_000)
        pipe.execute()
    finally:
        sync.close()
    async with ProbeContext(settings(server.url)) as ctx:
        facts = await run(ctx, "redis.stats")
    assert facts["evicted_keys"] > 0
    assert facts["memory_ratio"] is not None and facts["memory_ratio"] > 0.5


# ---- redis.slowlog -------------------------------------------------------------------------


def test_redact_command() -> None:
    assert redact_command("AUTH default hunter2") == "AUTH …"
    assert redact_command("auth hunter2") == "auth …"
    assert redact_command("HELLO 3 AUTH u hunter2") == "HELLO …"
    assert redact_command("HELLO") == "HELLO"
    assert redact_command("CONFIG SET requirepass hunter2") == "CONFIG SET …"
    assert redact_command("config set masterauth hunter2") == "config set …"
    assert redact_command("CONFIG GET maxmemory") == "CONFIG GET maxmemory"
    assert redact_command("MIGRATE h 6379 k 0 5000 AUTH hunter2") == "MIGRATE …"
    assert redact_command("ACL SETUSER bob on >hunter2") == "ACL SETUSER …"
    assert redact_command("GET k") == "GET k"
    long = redact_command("SET k " + "v" * 200)
    assert len(long) == 80 and long.endswith("…") and long.startswith("SET k vvv")


async def test_slowlog_entries(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--slowlog-log-slower-than", "0", "--enable-debug-command", "local")
    require_password(server)
    sync = sync_client(server, PASSWORD)
    try:
        sync.execute_command("DEBUG", "SLEEP", "0.02")
        sync.set("long", "v" * 200)
        for i in range(12):
            sync.get(f"filler:{i}")
        sync.config_set("masterauth", PASSWORD)
    finally:
        sync.close()
    async with ProbeContext(settings(server.url, PASSWORD)) as ctx:
        facts = await run(ctx, "redis.slowlog", count=50)
        default = await run(ctx, "redis.slowlog")
    assert PASSWORD not in json.dumps(facts)
    entries = facts["entries"]
    assert facts["count"] == len(entries) > 3
    assert default["count"] == 10
    sleeps = [e for e in entries if e["command"].startswith("DEBUG SLEEP")]
    assert sleeps and sleeps[0]["duration_ms"] >= 20
    assert facts["max_duration_ms"] == max(e["duration_ms"] for e in entries)
    assert facts["max_duration_ms"] >= 20
    assert all(len(e["command"]) <= 80 for e in entries)
    assert any(
        e["command"].startswith("SET long vvv") and e["command"].endswith("…") for e in entries
    )
    ids = [e["id"] for e in entries]
    assert ids == sorted(ids, reverse=True)  # newest first
    for entry in entries:
        started = datetime.fromisoformat(entry["started_at"])
        assert abs(datetime.now(UTC) - started) < timedelta(minutes=5)
        assert isinstance(entry["client"], str) and entry["client"]


async def test_slowlog_empty(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--slowlog-log-slower-than", "10000000")
    async with ProbeContext(settings(server.url)) as ctx:
        facts = await run(ctx, "redis.slowlog")
    assert facts == {"entries": [], "count": 0, "max_duration_ms": 0}


# ---- redis.latency -------------------------------------------------------------------------


async def test_latency_events(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--enable-debug-command", "local")  # monitor at 1 ms (harness)
    sync = sync_client(server)
    try:
        sync.execute_command("DEBUG", "SLEEP", "0.03")
    finally:
        sync.close()
    async with ProbeContext(settings(server.url)) as ctx:
        facts = await run(ctx, "redis.latency")
    assert facts["monitor_threshold_ms"] == 1
    command = [e for e in facts["events"] if e["event"] == "command"]
    assert command and command[0]["max_ms"] >= 30
    assert command[0]["latest_ms"] >= 30
    assert abs(datetime.now(UTC) - datetime.fromisoformat(command[0]["at"])) < timedelta(minutes=5)
    assert facts["max_ms"] == max(e["max_ms"] for e in facts["events"])


async def test_latency_monitor_off(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--latency-monitor-threshold", "0")
    async with ProbeContext(settings(server.url)) as ctx:
        facts = await run(ctx, "redis.latency")
    assert facts == {"events": [], "max_ms": 0, "monitor_threshold_ms": 0}


# ---- redis.key -----------------------------------------------------------------------------


async def test_key(redis_srv: RunningServer) -> None:
    sync = sync_client(redis_srv)
    try:
        sync.set("ai-gateway:degradation-level", "2")
        sync.delete("oncall:test:absent", "oncall:test:probe-list")
        sync.rpush("oncall:test:probe-list", "x")
    finally:
        sync.close()
    async with ProbeContext(settings(redis_srv.url)) as ctx:
        present = await run(ctx, "redis.key", key="ai-gateway:degradation-level")
        absent = await run(ctx, "redis.key", key="oncall:test:absent")
        with pytest.raises(BackendError) as caught:
            await run(ctx, "redis.key", key="oncall:test:probe-list")
        text = equivalent(ctx, "redis.key", key="it's a key")
    assert present == {"key": "ai-gateway:degradation-level", "exists": True, "value": "2"}
    assert absent == {"key": "oncall:test:absent", "exists": False, "value": None}
    assert caught.value.reason == "query error"
    assert text == f"redis-cli -u redis://127.0.0.1:{redis_srv.port}/0 GET 'it'\"'\"'s a key'"


async def test_probes_share_one_client(redis_srv: RunningServer) -> None:
    async with ProbeContext(settings(redis_srv.url)) as ctx:
        for name in BY_NAME:
            await run(ctx, name, **DEFAULT_PARAMS.get(name, {}))

        def second_client() -> RedisClient:
            raise AssertionError("a second Redis client was built")

        assert isinstance(await ctx.client("redis", second_client), RedisClient)


# ---- secrets -------------------------------------------------------------------------------


async def test_password_never_appears(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--slowlog-log-slower-than", "0")
    require_password(server)
    in_url = f"redis://:{PASSWORD}@127.0.0.1:{server.port}/0"
    for ctx_settings in (settings(server.url, PASSWORD), settings(in_url)):
        async with ProbeContext(ctx_settings) as ctx:
            for name in BY_NAME:
                facts = await run(ctx, name, **DEFAULT_PARAMS.get(name, {}))
                assert PASSWORD not in json.dumps(facts), name
                text = equivalent(ctx, name, **DEFAULT_PARAMS.get(name, {}))
                assert PASSWORD not in text, name
                assert text.startswith(f"redis-cli --askpass -u redis://127.0.0.1:{server.port}/0 ")
    async with ProbeContext(settings(server.url, "wrong-" + PASSWORD)) as ctx:
        with pytest.raises(BackendError) as caught:
            await run(ctx, "redis.stats")
    assert caught.value.reason == "auth"
    assert PASSWORD not in str(caught.value)


async def test_acl_user_without_config(start_redis: Callable[..., RunningServer]) -> None:
    """A user denied CONFIG (as on managed Redis) still gets every fact INFO gives."""
    server = start_redis()
    sync = sync_client(server)
    try:
        sync.execute_command(
            "ACL", "SETUSER", "probe", "on", f">{PASSWORD}", "~*", "+@all", "-config"
        )
    finally:
        sync.close()
    url = f"redis://probe@127.0.0.1:{server.port}/0"
    async with ProbeContext(settings(url, PASSWORD)) as ctx:
        stats = await run(ctx, "redis.stats")
        latency = await run(ctx, "redis.latency")
        text = equivalent(ctx, "redis.latency")
    assert stats["maxclients"] == 10000  # from INFO, no CONFIG needed
    assert latency["monitor_threshold_ms"] is None
    assert text == (
        f"redis-cli --user probe --askpass -u redis://127.0.0.1:{server.port}/0 LATENCY LATEST"
    )


def test_cli_prefix_forms() -> None:
    cases = {
        "redis://127.0.0.1:6379/0": "redis-cli -u redis://127.0.0.1:6379/0",
        "redis://localhost": "redis-cli -u redis://localhost:6379",
        "rediss://u:pw@[::1]:6380/2": "redis-cli --user u --askpass -u 'rediss://[::1]:6380/2'",
    }
    for url, expected in cases.items():
        assert cli_prefix(ProbeContext(settings(url))) == expected


def test_equivalents() -> None:
    ctx = ProbeContext(settings("redis://127.0.0.1:6379/0"))
    assert equivalent(ctx, "redis.stats") == "redis-cli -u redis://127.0.0.1:6379/0 INFO"
    assert equivalent(ctx, "redis.slowlog", count=5) == (
        "redis-cli -u redis://127.0.0.1:6379/0 SLOWLOG GET 5"
    )
    assert (
        equivalent(ctx, "redis.latency") == "redis-cli -u redis://127.0.0.1:6379/0 LATENCY LATEST"
    )


# ---- failures ------------------------------------------------------------------------------


def _refused() -> contextlib.AbstractContextManager[int]:
    return contextlib.nullcontext(refused_port())


@pytest.mark.parametrize(
    ("server", "reason"),
    [(silent_listener, "timeout"), (_refused, "refused")],
    ids=["silent server times out", "refused"],
)
async def test_every_probe_fails_typed_within_the_timeout(
    server: Callable[[], contextlib.AbstractContextManager[int]], reason: str
) -> None:
    with server() as port:
        async with ProbeContext(settings(f"redis://127.0.0.1:{port}/0")) as ctx:
            for name in BY_NAME:
                started = time.monotonic()
                with pytest.raises(BackendError) as caught:
                    await run(ctx, name, **DEFAULT_PARAMS.get(name, {}))
                assert caught.value.reason == reason, name
                assert time.monotonic() - started <= TIMEOUT + SLACK, name
