"""`oncall serve` adds the firings it checks to the team's incidents: two firings of one
notification whose checklists fail on the same Redis are one incident, with Alertmanager's
groupKey on each member; their resolutions resolve them; serve never resolves what it was not
told of. A real `oncall serve`, a real redis-server."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.harness.servers import RunningServer
from tests.harness.waiting import wait_until
from tests.serve.conftest import Serve, Sink, alert, flush, notification, serve_process

GROUP_KEY = '{}:{alertname="ServeTestAlert"}'


@pytest.fixture
def serve(tmp_path: Path, redis_srv: RunningServer, dead_url: str, sink: Sink):
    flush(redis_srv.url)
    with serve_process(tmp_path / "serve", redis_url=redis_srv.url, prometheus_url=dead_url,
                       serve={"queue_size": 8, "workers": 2}) as running:  # fmt: skip
        yield running
    flush(redis_srv.url)


def incidents(url: str) -> list[dict[str, Any]]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        ids = [str(i) for i in client.zrange("oncall:incidents", 0, -1)]
        return [json.loads(v) for v in client.mget([f"oncall:incident:{i}" for i in ids]) if v]
    finally:
        client.close()


def test_firings_failing_on_one_redis_are_one_incident(
    serve: Serve, redis_srv: RunningServer
) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    firings = [alert(fingerprint="i1", starts_at=now, pod="vllm-0"),
               alert(fingerprint="i2", starts_at=now, pod="vllm-1")]  # fmt: skip
    assert serve.post(notification(*firings)).status_code == 200

    def grouped() -> bool:
        found = incidents(redis_srv.url)
        return len(found) == 1 and len(found[0]["members"]) == 2

    wait_until(grouped, within=30, what="one incident of both firings", watching=serve)
    (incident,) = incidents(redis_srv.url)
    port = redis_srv.url.rsplit(":", 1)[1].split("/")[0]
    assert incident["explanation"] == (
        f"grouped: redis_up fails on Redis 127.0.0.1:{port} in 2 of 2 checklists"
    )
    members = incident["members"]
    assert {m["labels"]["pod"] for m in members} == {"vllm-0", "vllm-1"}
    assert all("alertname" not in m["labels"] for m in members)  # as the app's members
    assert {m["group_key"] for m in members} == {GROUP_KEY}
    # One context (no `contexts:`): "" as the app's alerts carry it, whatever context.name.
    assert all(m["context"] == "" and m["resolved_at"] is None for m in members)
    # One resolves: that member alone (serve resolves only what it is told of).
    gone = alert(fingerprint="i1", starts_at=now, status="resolved", pod="vllm-0")
    assert serve.post(notification(gone)).status_code == 200

    def resolved() -> dict[str, Any]:
        found = incidents(redis_srv.url)
        return {m["labels"]["pod"]: m["resolved_at"] for m in found[0]["members"]}

    wait_until(
        lambda: resolved()["vllm-0"] is not None, within=30, what="the resolution", watching=serve
    )
    assert resolved()["vllm-1"] is None
    assert incidents(redis_srv.url)[0]["closed_at"] is None  # one member still firing
    assert "Traceback" not in serve.log()
