"""The guards against a real redis-server: limits, restarts, expiry, and failing closed.

Time is injected (`Clock`) so windows and cooldowns pass without sleeping; the only real waits
are the Redis TTL of an open breaker (1 s), the two-person poll, and the timeouts under test.
Each test uses its own key prefix on the shared server.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

import pytest

from oncall.backends.redis import RedisClient
from oncall.backends.redis_write import RedisWriter
from oncall.errors import BackendError
from oncall.model.write_path import GuardVerdict
from oncall.remediation.guards import CircuitBreaker, RateLimit, read_only_guard
from oncall.remediation.two_person import TwoPersonRule
from oncall.settings.model import Settings
from tests.harness.faults import refused_port, silent_listener
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually

TIMEOUT = 1.0
SLACK = 0.5
POD = "Pod ai/vllm-x"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(redis_srv: RunningServer) -> AsyncIterator[RedisClient]:
    async with RedisClient(redis_srv.url, timeout=TIMEOUT) as opened:
        yield opened


@pytest.fixture
def prefix() -> str:
    return f"oncall:test:{uuid.uuid4().hex}"


def rate_limit(client: RedisClient, prefix: str, clock: Clock) -> RateLimit:
    return RateLimit(
        client, RedisWriter(client), actions=3, window_s=600, prefix=prefix, clock=clock
    )


def breaker(
    client: RedisClient, prefix: str, clock: Clock, cooldown_s: float = 900
) -> CircuitBreaker:
    return CircuitBreaker(
        client, RedisWriter(client), failures=3, cooldown_s=cooldown_s, prefix=prefix, clock=clock
    )


def two_person(client: RedisClient, prefix: str, clock: Clock | None = None) -> TwoPersonRule:
    return TwoPersonRule(
        client,
        RedisWriter(client),
        actions=frozenset({"rebuild-pod"}),
        timeout_s=120,
        prefix=prefix,
        clock=clock or time.time,
    )


# --- read-only ---------------------------------------------------------------------------


def test_read_only_guard_both_ways() -> None:
    assert read_only_guard(Settings(), flag=False).ok
    from_settings = read_only_guard(Settings(read_only=True), flag=False)
    assert not from_settings.ok
    assert "settings read_only: true" in from_settings.reason
    assert "--read-only" not in from_settings.reason
    from_flag = read_only_guard(Settings(), flag=True)
    assert not from_flag.ok
    assert "--read-only" in from_flag.reason
    assert "settings" not in from_flag.reason
    both = read_only_guard(Settings(read_only=True), flag=True)
    assert both.detail["sources"] == ["settings read_only: true", "--read-only"]


# --- rate limit --------------------------------------------------------------------------


async def test_rate_limit_allows_n_then_refuses_with_time_to_next(
    client: RedisClient, prefix: str
) -> None:
    clock = Clock()
    start = clock.now
    limit = rate_limit(client, prefix, clock)
    for n in range(3):
        verdict = await limit.check(POD)
        assert verdict.ok, verdict
        assert verdict.reason == f"rate limit: {n} of 3 actions on {POD} in the last 10m"
        assert await limit.record(POD) == n + 1
        clock.now += 10
    clock.now = start + 348  # the oldest (at +0) leaves the window at +600: 252 s from now
    refused = await limit.check(POD)
    assert refused == GuardVerdict(
        "rate-limit",
        False,
        f"rate limit: 3 actions on {POD} in the last 10m; next allowed in 4m12s",
        {
            "target": POD,
            "actions": 3,
            "limit": 3,
            "window_s": 600,
            "next_allowed_in_s": 252.0,
        },
    )


async def test_rate_limit_survives_a_restart_and_holds_across_operators(
    redis_srv: RunningServer, client: RedisClient, prefix: str
) -> None:
    clock = Clock()
    first = rate_limit(client, prefix, clock)
    for _ in range(3):
        await first.record(POD)
    # A new process (new client, new object), possibly another operator's, on the same Redis.
    async with RedisClient(redis_srv.url, timeout=TIMEOUT) as other_client:
        clock.now += 1
        verdict = await rate_limit(other_client, prefix, clock).check(POD)
    assert not verdict.ok
    assert verdict.reason.endswith("next allowed in 9m59s")


async def test_rate_limit_targets_are_independent(client: RedisClient, prefix: str) -> None:
    clock = Clock()
    limit = rate_limit(client, prefix, clock)
    for _ in range(3):
        await limit.record(POD)
    assert not (await limit.check(POD)).ok
    other = await limit.check("Pod ai/vllm-y")
    assert other.ok
    assert other.detail["actions"] == 0


async def test_rate_limit_window_slides(client: RedisClient, prefix: str) -> None:
    clock = Clock()
    start = clock.now
    limit = rate_limit(client, prefix, clock)
    for offset in (0, 10, 20):
        clock.now = start + offset
        await limit.record(POD)
    clock.now = start + 599.5
    assert not (await limit.check(POD)).ok
    clock.now = start + 600  # exactly one window after the oldest: it has left
    verdict = await limit.check(POD)
    assert verdict.ok
    assert verdict.detail["actions"] == 2
    clock.now = start + 620
    assert (await limit.check(POD)).detail["actions"] == 0
    # Recording trims what has left the window, so the key does not grow without bound.
    assert await limit.record(POD) == 1
    assert await client.zcount(limit.key(POD), "-inf", "+inf") == 1


async def test_rate_limit_keys_and_expiry_in_redis(client: RedisClient) -> None:
    target = f"Pod ai/vllm-{uuid.uuid4().hex[:8]}"
    limit = RateLimit(client, RedisWriter(client), actions=3, window_s=600)
    await limit.record(target)
    key = f"oncall:guard:rate:{target}"
    assert limit.key(target) == key
    ttl = await client.ttl(key)
    assert ttl is not None
    assert 590 < ttl <= 600
    assert await RedisWriter(client).delete(key)


# --- circuit breaker ---------------------------------------------------------------------


async def test_breaker_opens_after_n_failures_across_targets_and_closes_after_cooldown(
    redis_srv: RunningServer, client: RedisClient, prefix: str
) -> None:
    clock = Clock()
    start = clock.now
    guard = breaker(client, prefix, clock)
    assert (await guard.check()).ok
    assert not await guard.record_failure("Pod ai/a", "not Ready within 5m")
    await guard.record_success()  # a success in between resets nothing
    clock.now += 1
    assert not await guard.record_failure("Pod ai/b", "not Ready within 5m")
    assert (await guard.check()).ok
    clock.now += 1
    assert await guard.record_failure("Deployment ai/vllm", "rollout stalled")
    refused = await guard.check()
    assert not refused.ok
    assert refused.reason == "circuit breaker open: 3 actions failed within 15m; closes in 15m"
    assert refused.detail["targets"] == ["Deployment ai/vllm", "Pod ai/a", "Pod ai/b"]
    clock.now += 2
    async with RedisClient(redis_srv.url, timeout=TIMEOUT) as other_client:
        again = await breaker(other_client, prefix, clock).check()
    assert again.reason == "circuit breaker open: 3 actions failed within 15m; closes in 14m58s"
    clock.now = start + 2 + 900
    assert (await guard.check()).ok
    # The failures have aged out with the cooldown: one more does not re-open it.
    assert not await guard.record_failure("Pod ai/a", "again")
    assert (await guard.check()).ok


async def test_breaker_counts_only_failures_within_the_window(
    client: RedisClient, prefix: str
) -> None:
    clock = Clock()
    guard = breaker(client, prefix, clock)
    await guard.record_failure("Pod ai/a", "x")
    clock.now += 900
    assert not await guard.record_failure("Pod ai/b", "x")
    assert not await guard.record_failure("Pod ai/c", "x")
    assert (await guard.check()).ok


async def test_breaker_key_expires_in_redis(client: RedisClient, prefix: str) -> None:
    guard = CircuitBreaker(client, RedisWriter(client), failures=1, cooldown_s=1.0, prefix=prefix)
    assert guard.open_key == f"{prefix}:breaker:open"
    assert await guard.record_failure(POD, "x")
    assert not (await guard.check()).ok

    async def expired() -> bool:
        return await client.get(guard.open_key) is None

    await eventually(expired, within=3, what="the open key to expire with its TTL", interval=0.05)
    assert (await guard.check()).ok


# --- two-person rule ---------------------------------------------------------------------


async def test_two_person_self_approval_refused_other_accepted(
    client: RedisClient, prefix: str
) -> None:
    rule = two_person(client, prefix)
    assert rule.required("rebuild-pod")
    assert not rule.required("set-degradation-level")
    await rule.request("a1", "rebuild-pod", POD, "alice@host1")
    own = await rule.approve("a1", "alice@host1")
    assert not own.ok
    assert own.reason.startswith("self-approval is refused")
    # The same user from another host is still the same person.
    assert not (await rule.approve("a1", "alice@host2")).ok
    other = await rule.approve("a1", "bob@host2")
    assert other.ok, other
    assert other.reason == f"rebuild-pod on {POD} approved by bob@host2"
    waited = await rule.wait("a1", timeout_s=1)
    assert waited.ok
    assert waited.detail["approver"] == "bob@host2"
    late = await rule.approve("a1", "carol@host3")
    assert not late.ok
    assert late.reason == "approval request a1 was already approved by bob@host2"


async def test_two_person_wait_returns_when_approved(
    client: RedisClient, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rule = two_person(client, prefix)
    await rule.request("a2", "rebuild-pod", POD, "alice@host1")
    # The waiter's reads of the request, seen as they come back from the real Redis.
    unapproved_seen = asyncio.Event()
    real_hgetall = client.hgetall

    async def hgetall(key: str) -> dict[str, str]:
        found = await real_hgetall(key)
        if found and "approved_by" not in found:
            unapproved_seen.set()
        return found

    monkeypatch.setattr(client, "hgetall", hgetall)

    async def second_person() -> GuardVerdict:
        # Once the waiter has polled and found no approval: it must notice one that comes later.
        await asyncio.wait_for(unapproved_seen.wait(), timeout=5)
        return await rule.approve("a2", "bob@host2")

    waited, approved = await asyncio.gather(rule.wait("a2", timeout_s=5), second_person())
    assert approved.ok
    assert waited.ok
    assert waited.reason == "approved by bob@host2"


async def test_two_person_wait_times_out_and_withdraws(client: RedisClient, prefix: str) -> None:
    rule = two_person(client, prefix)
    await rule.request("a3", "rebuild-pod", POD, "alice@host1")
    started = time.monotonic()
    verdict = await rule.wait("a3", timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert not verdict.ok
    assert verdict.reason == "no second person approved within 500ms"
    assert 0.5 <= elapsed <= 0.5 + SLACK
    late = await rule.approve("a3", "bob@host2")
    assert not late.ok
    assert late.reason == "no pending approval request a3 (never made, or expired)"


async def test_two_person_expired_or_unknown_request_refused(
    client: RedisClient, prefix: str
) -> None:
    clock = Clock()
    rule = two_person(client, prefix, clock)
    await rule.request("a4", "rebuild-pod", POD, "alice@host1")
    ttl = await client.ttl(rule.key("a4"))
    assert ttl is not None
    assert 110 < ttl <= 120
    clock.now += 121
    expired = await rule.approve("a4", "bob@host2")
    assert not expired.ok
    assert expired.reason == "approval request a4 expired"
    waited = await rule.wait("a4", timeout_s=5)
    assert not waited.ok
    assert waited.reason == "no second person approved within 2m (request expired)"
    unknown = await rule.approve("nope", "bob@host2")
    assert not unknown.ok
    assert unknown.reason == "no pending approval request nope (never made, or expired)"
    assert not (await rule.wait("nope", timeout_s=1)).ok


# --- failing closed ----------------------------------------------------------------------


async def test_every_guard_fails_closed_on_a_silent_redis() -> None:
    with silent_listener() as port:
        async with RedisClient(f"redis://127.0.0.1:{port}/0", timeout=TIMEOUT) as client:
            writer = RedisWriter(client)
            limit = RateLimit(client, writer, actions=3, window_s=600)
            guard = CircuitBreaker(client, writer, failures=3, cooldown_s=900)
            rule = TwoPersonRule(client, writer, actions=frozenset({"rebuild-pod"}), timeout_s=120)
            checks = {
                "rate-limit": lambda: limit.check(POD),
                "circuit-breaker": guard.check,
                "two-person approve": lambda: rule.approve("a5", "bob@host2"),
                "two-person wait": lambda: rule.wait("a5", timeout_s=10),
            }
            for name, check in checks.items():
                started = time.monotonic()
                verdict = await check()
                assert time.monotonic() - started <= TIMEOUT + SLACK, name
                assert not verdict.ok, name
                assert verdict.reason == (
                    f"guard state unavailable: redis at redis://127.0.0.1:{port}/0: timeout"
                ), name
            writes = {
                "record": lambda: limit.record(POD),
                "record_failure": lambda: guard.record_failure(POD, "x"),
                "request": lambda: rule.request("a5", "rebuild-pod", POD, "alice@host1"),
            }
            for name, write in writes.items():
                started = time.monotonic()
                with pytest.raises(BackendError) as caught:
                    await write()
                assert caught.value.reason == "timeout", name
                assert time.monotonic() - started <= TIMEOUT + SLACK, name


async def test_guards_fail_closed_when_redis_refuses() -> None:
    async with RedisClient(f"redis://127.0.0.1:{refused_port()}/0", timeout=TIMEOUT) as client:
        verdict = await RateLimit(client, RedisWriter(client), actions=3, window_s=600).check(POD)
    assert not verdict.ok
    assert verdict.reason.startswith("guard state unavailable: redis at ")
    assert verdict.reason.endswith(": refused")


# --- the writer and reader commands the guards and the audit mirror use ------------------


async def test_stream_and_key_primitives(client: RedisClient, prefix: str) -> None:
    writer = RedisWriter(client)
    stream = f"{prefix}:audit"
    ids = [await writer.xadd(stream, {"n": str(n), "kind": "started"}) for n in range(3)]
    entries = await client.xrange(stream, 10)
    assert [entry_id for entry_id, _ in entries] == ids
    assert entries[0][1] == {"n": "0", "kind": "started"}
    assert await client.xrange(stream, 1) == entries[:1]
    assert await client.xrange(f"{prefix}:none", 10) == []
    await writer.xadd(stream, {"n": "3"}, maxlen=2)  # approximate: keeps at least 2
    assert len(await client.xrange(stream, 100)) >= 2

    key = f"{prefix}:lock"
    assert await writer.set_nx(key, "alice@host1", expire_s=30)
    assert not await writer.set_nx(key, "bob@host2", expire_s=30)
    assert await client.get(key) == "alice@host1"
    assert await client.ttl(f"{prefix}:none") is None
    assert await writer.delete(key)
    assert not await writer.delete(key)

    await writer.replace_hash(f"{prefix}:h", {"a": "1", "b": "2"}, expire_s=30)
    await writer.replace_hash(f"{prefix}:h", {"a": "3"}, expire_s=30)
    assert await client.hgetall(f"{prefix}:h") == {"a": "3"}
    assert await writer.claim_field(f"{prefix}:h", "c", "x")
    assert not await writer.claim_field(f"{prefix}:h", "c", "y")
    assert not await writer.claim_field(f"{prefix}:gone", "c", "x")
    assert await client.hgetall(f"{prefix}:gone") == {}
