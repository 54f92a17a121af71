"""A hostile Alertmanager (a login page, 401) is a clear error with its reason, never a
traceback; the acknowledgement store against the real Redis (in time, expired, malformed,
cleared when resolved); Redis down makes the acknowledgements `unknown`, nothing else."""

from __future__ import annotations

import json
import time

import pytest
import redis
import yaml

from oncall.backends.acks import ACKS_KEY, AckStore
from oncall.backends.redis import RedisClient
from oncall.model.alertmanager import Acknowledgement
from oncall.service.acks import AckView, with_ack
from tests.alertmanager_write.conftest import World
from tests.harness.faults import http_stub
from tests.harness.servers import RunningServer
from tests.security.hostile_cli import run_inprocess
from tests.tui.fakes import status


@pytest.mark.parametrize(
    ("code", "body", "said"),
    [
        (401, b"Unauthorized", "alertmanager at http://127.0.0.1"),
        (200, b"<html><form>Sign in</form></html>", "not an Alertmanager API response"),
    ],
    ids=["401", "login-page"],
)
def test_a_hostile_alertmanager_is_a_clear_error(
    world: World, code: int, body: bytes, said: str
) -> None:
    with http_stub(code, body) as url:
        config = yaml.safe_load(world.config.read_text())
        config["alertmanager"] = {"url": url}
        world.config.write_text(yaml.safe_dump(config))
        ran = run_inprocess(*world.args("silence", "add", '{alertname="X"}', "--comment", "c"))
    assert ran.code == 3, ran.output  # a backend could not be reached while planning
    assert said in ran.stderr
    assert ("auth" if code == 401 else "bad payload") in ran.stderr
    assert "Traceback" not in ran.output
    assert world.records() == []


def test_an_ack_note_with_control_characters_is_refused(world: World) -> None:
    ran = run_inprocess(*world.args("ack", "X", "--note", "\x1b]52;c;cGF5bG9hZA==\x07"))
    assert ran.code == 2, ran.output  # a usage error, before anything is planned
    assert "control characters" in ran.stderr
    assert "\x1b" not in ran.output


async def test_the_store_keeps_acks_in_time_and_skips_the_rest(redis_srv: RunningServer) -> None:
    key = f"{ACKS_KEY}:test-{time.monotonic_ns()}"
    async with RedisClient(redis_srv.url, timeout=2) as client:
        store = AckStore(client, key=key)
        now = time.time()
        await store.put("Fires", Acknowledgement("alice", now, "on it"), until=now + 60)
        with redis.Redis.from_url(redis_srv.url, decode_responses=True) as raw:
            raw.hset(key, "Old", json.dumps({"by": "bob", "at": now - 99, "until": now - 1}))
            raw.hset(key, "Junk", "<not json>")
            assert 0 < raw.pttl(key) <= 60_000  # the hash goes away by itself
        assert await store.all() == {"Fires": Acknowledgement("alice", now, "on it")}
        assert await store.clear(["Fires"]) == 1
        assert await store.get("Fires") is None


async def test_a_resolved_alert_loses_its_ack(redis_srv: RunningServer) -> None:
    key = f"{ACKS_KEY}:test-{time.monotonic_ns()}"
    async with RedisClient(redis_srv.url, timeout=2) as client:
        store = AckStore(client, key=key)
        now = time.time()
        for alert in ("Firing", "Resolved"):
            await store.put(alert, Acknowledgement("alice", now), until=now + 60)
        view = AckView(store, grace=None)
        shown = await view.annotate(
            [status("Firing", "firing", firing_for=5), status("Resolved", "inactive")]
        )
        assert shown[0].routing is not None and shown[0].routing.ack is not None
        assert shown[0].routing.ack.by == "alice"
        assert shown[1].routing is None
        assert set(await store.all()) == {"Firing"}  # the next firing starts unacknowledged


async def test_redis_down_makes_the_acks_unknown_and_nothing_else() -> None:
    client = RedisClient("redis://127.0.0.1:1/0", timeout=0.5)  # nothing listens on port 1
    view = AckView(AckStore(client), grace=None)
    firing, quiet = status("Firing", "firing", firing_for=5), status("Quiet", "inactive")
    shown = await view.annotate([firing, quiet])
    await view.aclose()
    assert shown[0].routing is not None
    assert shown[0].routing.ack is None
    assert (shown[0].routing.ack_error or "").startswith("redis at redis://127.0.0.1:1/0: ")
    assert shown[1] == quiet
    assert with_ack(quiet, {}) == quiet
