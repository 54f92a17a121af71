"""The Redis client against a real redis-server, and each way Redis can fail us."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from oncall.backends.redis import RedisClient, redacted_target
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError
from tests.harness.faults import refused_port, silent_listener
from tests.harness.servers import RunningServer

TIMEOUT = 1.0
SLACK = 0.5


async def test_ping_info_get_set(redis_srv: RunningServer) -> None:
    async with RedisClient(redis_srv.url, timeout=TIMEOUT) as client:
        rtt = await client.ping()
        assert 0 < rtt < TIMEOUT
        await RedisWriter(client).set("oncall:test:key", "2", expire_s=60)
        assert await client.get("oncall:test:key") == "2"
        assert await client.get("oncall:test:absent") is None
        stats = await client.info("stats")
        assert isinstance(stats["keyspace_hits"], int)
        assert stats["keyspace_hits"] >= 1
        assert stats["keyspace_misses"] >= 1
        keyspace = await client.info("keyspace")
        assert keyspace["db0"]["keys"] >= 1
        everything = await client.info()
        assert "used_memory" in everything
        assert "connected_clients" in everything


async def test_slowlog_and_latency(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--slowlog-log-slower-than", "0", "--enable-debug-command", "local")
    sync = redis.Redis(host="127.0.0.1", port=server.port)
    sync.execute_command("DEBUG", "SLEEP", "0.02")
    sync.close()
    async with RedisClient(server.url, timeout=TIMEOUT) as client:
        entries = await client.slowlog(50)
        sleeps = [e for e in entries if e.command.startswith("DEBUG SLEEP")]
        assert sleeps, [e.command for e in entries]
        assert sleeps[0].duration_us >= 20_000
        assert isinstance(sleeps[0].client_address, str)
        events = await client.latency_latest()
        command = [e for e in events if e.event == "command"]
        assert command
        assert command[0].max_ms >= 20


async def _ping_error(url: str) -> tuple[BackendError, float]:
    """PING url expecting a typed error: the error and the seconds it took to come."""
    async with RedisClient(url, timeout=TIMEOUT) as client:
        started = time.monotonic()
        with pytest.raises(BackendError) as caught:
            await client.ping()
    return caught.value, time.monotonic() - started


async def test_refused_is_a_typed_error_within_the_timeout() -> None:
    error, elapsed = await _ping_error(f"redis://127.0.0.1:{refused_port()}/0")
    assert error.reason == "refused"
    assert elapsed <= TIMEOUT + SLACK


async def test_silent_listener_is_a_timeout_within_the_timeout() -> None:
    with silent_listener() as port:
        async with RedisClient(f"redis://127.0.0.1:{port}/0", timeout=TIMEOUT) as client:
            for call in (client.ping, lambda: client.info("stats")):
                started = time.monotonic()
                with pytest.raises(BackendError) as caught:
                    await call()
                assert caught.value.reason == "timeout"
                assert time.monotonic() - started <= TIMEOUT + SLACK


async def test_http_peer_is_a_bad_payload(prometheus_srv: RunningServer) -> None:
    """A Redis URL pointing at Prometheus: the reply is HTTP, not RESP."""
    error, elapsed = await _ping_error(f"redis://127.0.0.1:{prometheus_srv.port}/0")
    assert error.reason == "bad payload"
    assert elapsed <= TIMEOUT + SLACK


async def test_error_reply_is_a_query_error(redis_srv: RunningServer) -> None:
    async with RedisClient(redis_srv.url, timeout=TIMEOUT) as client:
        await client._call(lambda r: r.rpush("oncall:test:list", "x"))
        with pytest.raises(BackendError) as caught:
            await client.get("oncall:test:list")
    assert caught.value.reason == "query error"
    assert "WRONGTYPE" in caught.value.detail


async def test_wrong_password_is_auth(start_redis: Callable[..., RunningServer]) -> None:
    server = start_redis("--requirepass", "right-one")
    async with RedisClient(server.url, timeout=TIMEOUT, password="wrong-one") as client:
        with pytest.raises(BackendError) as caught:
            await client.ping()
    assert caught.value.reason == "auth"
    assert "wrong-one" not in str(caught.value)
    async with RedisClient(server.url, timeout=TIMEOUT, password="right-one") as client:
        assert await client.ping() > 0


def test_target_never_shows_credentials() -> None:
    assert redacted_target("redis://user:pw@10.0.0.1:6380/2") == "redis://10.0.0.1:6380/2"
    assert redacted_target("redis://localhost") == "redis://localhost:6379"
