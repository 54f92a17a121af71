"""`oncall serve` against Alertmanager-shaped posts: a firing checked once and stored, repeats
and resolutions, the notification, and every bad input of issue 30 (a 4xx or "nothing to
check", counted in /metrics, nothing stored, never a traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from tests.harness.servers import RunningServer
from tests.harness.waiting import wait_until
from tests.serve.conftest import Serve, Sink, alert, flush, notification, serve_process, stored


@pytest.fixture
def serve(tmp_path: Path, redis_srv: RunningServer, dead_url: str, sink: Sink):
    flush(redis_srv.url)
    notify = [{"name": "chat", "url": f"{sink.url}/hook/chat", "format": "slack"}]
    with serve_process(tmp_path / "serve", redis_url=redis_srv.url, prometheus_url=dead_url,
                       serve={"notify": notify, "queue_size": 8, "workers": 2,
                              "max_body_bytes": LIMIT}) as running:  # fmt: skip
        yield running
    flush(redis_srv.url)


#: The body limit of these tests: 10,000 alerts fit in it once slimmed (2 MiB, a setting).
LIMIT = 2 << 20


def _no_traceback(serve: Serve) -> None:
    assert "Traceback" not in serve.log()


def test_a_firing_is_checked_once_stored_and_notified(serve: Serve, redis_srv: RunningServer,
                                                      sink: Sink) -> None:  # fmt: skip
    answer = serve.post(notification(alert(fingerprint="a1", pod="vllm-0")))
    assert answer.status_code == 200, answer.text
    assert answer.json()["alerts"] == {"queued": 1}
    wait_until(
        lambda: len(stored(redis_srv.url)) == 1, within=30, what="the verdict", watching=serve
    )
    verdict = stored(redis_srv.url)[0]
    assert verdict["status"] == "checked"
    assert verdict["labels"]["pod"] == "vllm-0"
    assert verdict["annotations"] == {"summary": "ServeTestAlert test"}
    assert verdict["context"] == "servetest"
    assert len(verdict["runbook_sha256"]) == 64
    steps = {s["id"]: s for s in verdict["steps"]}
    assert steps["redis_up"]["status"] == "fail"
    assert steps["redis_up"]["evidence"][0]["label"] == "Uptime"
    assert steps["redis_up"]["equivalent"]  # the command-line equivalent is kept
    assert steps["prom"]["status"] == "unknown"  # nothing listens there
    assert verdict["received_at"] <= verdict["ran_at"] <= verdict["stored_at"]
    # The summary reached the chat, naming the failing step.
    wait_until(sink.messages, within=30, what="the notification", watching=serve)
    [message] = sink.messages()
    assert "redis_up" in message["body"]["text"]
    assert message["body"]["blocks"][0]["type"] == "header"
    assert "oncall --context servetest" in message["body"]["text"]
    # Alertmanager repeats it (repeat_interval): not checked again.
    assert serve.post(notification(alert(fingerprint="a1", pod="vllm-0"))).status_code == 200
    wait_until(
        lambda: serve.metric("oncall_serve_checklists_total", outcome="duplicate") == 1,
        within=30,
        what="the repeat seen as one",
        watching=serve,
    )
    assert len(stored(redis_srv.url)) == 1
    assert serve.metric("oncall_serve_checklists_total", outcome="checked") == 1
    # Resolved: the time is recorded on the verdict.
    assert serve.post(notification(alert(fingerprint="a1", status="resolved",
                                         pod="vllm-0"))).status_code == 200  # fmt: skip
    wait_until(
        lambda: "resolved_at" in stored(redis_srv.url)[0],
        within=30,
        what="the resolution",
        watching=serve,
    )
    _no_traceback(serve)


def _nothing_stored(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        assert client.keys("oncall:verdict*") == []
    finally:
        client.close()


@pytest.mark.parametrize(
    "case",
    [
        (None, notification(alert()), 401, "unauthorized"),
        ("wrong-token", notification(alert()), 401, "unauthorized"),
        ("TOKEN", b'{"version": "4", "alerts": [', 400, "bad_json"),
        ("TOKEN", b"\xff\xfe\x00", 400, "bad_json"),
        ("TOKEN", b"[1, 2]", 400, "bad_payload"),
        ("TOKEN", notification(alert(), version="3"), 400, "unsupported_version"),
        ("TOKEN", {"version": "4", "status": "firing", "alerts": [{"labels": 1}]}, 400,
         "bad_payload"),
    ],
)  # fmt: skip
def test_bad_requests_are_refused_with_the_reason(
    serve: Serve, redis_srv: RunningServer, case: tuple[str | None, object, int, str]
) -> None:
    from tests.serve.conftest import TOKEN

    token, body, status, reason = case
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    answer = serve.post(None, token=TOKEN if token == "TOKEN" else token, raw=raw)
    assert answer.status_code == status
    assert answer.json()["reason"] == reason
    assert answer.json()["error"]
    assert serve.metric("oncall_serve_notifications_total", outcome=reason) == 1
    _nothing_stored(redis_srv.url)
    _no_traceback(serve)


def test_a_body_over_the_limit_is_413(serve: Serve, redis_srv: RunningServer) -> None:
    big = notification(alert())
    big["padding"] = "x" * LIMIT
    answer = serve.post(big)
    assert answer.status_code == 413
    assert answer.json()["reason"] == "too_large"
    # Without Content-Length (chunked), aiohttp's own limit refuses it too.
    chunks = (json.dumps(big).encode()[i : i + 65536] for i in range(0, LIMIT + 70000, 65536))
    import httpx

    from tests.serve.conftest import TOKEN

    answer = httpx.post(serve.webhook, content=chunks, headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 413
    assert serve.metric("oncall_serve_notifications_total", outcome="too_large") == 2
    _nothing_stored(redis_srv.url)
    _no_traceback(serve)


def test_hostile_labels_are_refused_alone(serve: Serve, redis_srv: RunningServer) -> None:
    good = alert(fingerprint="ok1")
    escape = alert(fingerprint="esc", pod="\x1b]52;c;aGk=\x07")
    nul = alert(fingerprint="nul", pod="a\x00b")
    bad_name = alert(fingerprint="bn")
    bad_name["labels"]["bad-name"] = "x"
    answer = serve.post(notification(escape, nul, bad_name, good))
    assert answer.status_code == 200
    body = answer.json()
    assert body["alerts"] == {"refused": 3, "queued": 1}
    assert [r["index"] for r in body["refused"]] == [0, 1, 2]
    wait_until(
        lambda: len(stored(redis_srv.url)) == 1, within=30, what="the good one", watching=serve
    )
    assert stored(redis_srv.url)[0]["fingerprint"] == "ok1"
    assert serve.metric("oncall_serve_alerts_total", outcome="refused") == 3
    _no_traceback(serve)


def test_an_alert_without_a_runbook_is_accepted_with_nothing_to_check(
    serve: Serve, redis_srv: RunningServer
) -> None:
    answer = serve.post(notification(alert("NoSuchRunbookAlert")))
    assert answer.status_code == 200
    assert answer.json()["note"] == "accepted, nothing to check"
    assert answer.json()["alerts"] == {"no_runbook": 1}
    assert serve.metric("oncall_serve_checklists_total", outcome="no_runbook") == 1
    _nothing_stored(redis_srv.url)


def test_ten_thousand_alerts_in_one_notification_overflow_counted(
    serve: Serve, redis_srv: RunningServer
) -> None:
    alerts = [alert(fingerprint=f"{i:x}", pod=f"p{i}") for i in range(10_000)]
    body = notification(*alerts)
    raw = json.dumps(body, separators=(",", ":")).encode()
    assert len(raw) > LIMIT  # over the limit: refused whole
    assert serve.post(None, raw=raw).status_code == 413
    # Slimmed to fit the limit, they are read: 8 queued, the rest counted as overflow.
    for a in alerts:
        a.pop("annotations"), a.pop("generatorURL")
        a["labels"] = {"alertname": "ServeTestAlert"}
    raw = json.dumps(notification(*alerts), separators=(",", ":")).encode()
    assert len(raw) < LIMIT
    answer = serve.post(None, raw=raw)
    assert answer.status_code == 200, answer.text
    counts = answer.json()["alerts"]
    assert counts["queued"] + counts["overflowed"] == 10_000
    assert counts["queued"] <= 8 + 2  # the queue, plus what the workers took meanwhile
    assert (
        serve.metric("oncall_serve_checklists_total", outcome="overflowed") == counts["overflowed"]
    )
    # Overflowed firings are recorded as such, bounded by the queue's size.
    wait_until(
        lambda: sum(v["status"] == "not checked: overloaded" for v in stored(redis_srv.url)) >= 8,
        within=60,
        what="the overload recorded",
        watching=serve,
    )
    _no_traceback(serve)
