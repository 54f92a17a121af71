"""`oncall serve` behind the real Alertmanager: its own webhook notifications, with the bearer
token from a credentials file; two replicas behind it check each firing exactly once, and a
replica killed with SIGKILL mid-check leaves its claim to expire and the other completes it.
Redis down: the checklist still runs and the summary still goes; the verdict waits in memory
and is written when Redis is back."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
from pathlib import Path

import httpx
import redis

from tests.harness.processes import free_port, serving
from tests.harness.servers import RunningServer, _redis_ready
from tests.harness.waiting import wait_until
from tests.serve.conftest import Sink, alertmanager_to, flush, serve_process, stored


def _post_alert(am: RunningServer, name: str, **labels: str) -> None:
    """What Prometheus sends Alertmanager (API v2 postableAlerts)."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    body = [{"labels": {"alertname": name, "severity": "page", **labels},
             "annotations": {"summary": "from the real Alertmanager"}, "startsAt": now,
             "generatorURL": "http://127.0.0.1:9090/graph"}]  # fmt: skip
    assert httpx.post(f"{am.url}/api/v2/alerts", json=body, timeout=5).status_code == 200


def test_alertmanager_notification_to_stored_verdict(
    tmp_path: Path, redis_srv: RunningServer, dead_url: str, sink: Sink
) -> None:
    flush(redis_srv.url)
    notify = [{"name": "chat", "url": f"{sink.url}/hook/chat", "format": "json"}]
    with contextlib.ExitStack() as stack:
        serve = stack.enter_context(serve_process(
            tmp_path / "s", redis_url=redis_srv.url, prometheus_url=dead_url,
            serve={"notify": notify}))  # fmt: skip
        token = tmp_path / "s" / "token"
        am = stack.enter_context(alertmanager_to(tmp_path / "am", (serve.webhook,), token))
        _post_alert(am, "ServeTestAlert", pod="vllm-7")
        wait_until(
            lambda: len(stored(redis_srv.url)) == 1,
            within=60,
            what="the verdict of Alertmanager's notification",
            watching=serve,
        )
        verdict = stored(redis_srv.url)[0]
        assert verdict["labels"]["pod"] == "vllm-7"
        assert len(verdict["fingerprint"]) == 16  # Alertmanager's own fingerprint
        assert verdict["annotations"]["summary"] == "from the real Alertmanager"
        assert serve.metric("oncall_serve_notifications_total", outcome="accepted") >= 1
        assert serve.metric("oncall_serve_notifications_total", outcome="unauthorized") == 0
        assert serve.metric("oncall_serve_receive_to_stored_seconds_count") == 1
        wait_until(sink.messages, within=30, what="the summary", watching=serve)
        body = sink.messages()[0]["body"]
        assert body["failing_steps"][0]["id"] == "redis_up"
        assert body["verdict"] == verdict["id"]
    flush(redis_srv.url)


def test_two_replicas_check_a_firing_once_even_when_one_is_killed(
    tmp_path: Path, redis_srv: RunningServer, silent_prometheus: str
) -> None:
    """The prom step waits on a Prometheus that never answers (timeout 1s): the replica that
    claims the firing is killed while it waits; the other checks it once its claim expires."""
    flush(redis_srv.url)
    kwargs = {"redis_url": redis_srv.url, "prometheus_url": silent_prometheus}
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(serve_process(tmp_path / "a", **kwargs))
        b = stack.enter_context(serve_process(tmp_path / "b", **kwargs))
        token = tmp_path / "a" / "token"
        am = stack.enter_context(alertmanager_to(tmp_path / "am", (a.webhook, b.webhook), token))
        # One firing, two replicas: one checks it.
        _post_alert(am, "ServeTestAlert", pod="one")
        wait_until(lambda: len(stored(redis_srv.url)) == 1, within=60, what="one verdict")
        wait_until(
            lambda: (
                sum(
                    s.metric("oncall_serve_checklists_total", outcome="claimed_elsewhere")
                    + s.metric("oncall_serve_checklists_total", outcome="duplicate")
                    for s in (a, b)
                )
                >= 1
            ),
            within=30,
            what="the other replica to stand aside",
        )
        assert len(stored(redis_srv.url)) == 1
        checked = sum(s.metric("oncall_serve_checklists_total", outcome="checked") for s in (a, b))
        assert checked == 1
        # A second firing: kill -9 the replica holding its claim, mid-check.
        client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
        stack.callback(client.close)
        _post_alert(am, "ServeTestAlert", pod="two")

        def claimed() -> bool:
            return any(client.get(k) for k in client.keys("oncall:claim:*"))

        # The first verdict's claim was released when it was stored: this is the new one.
        wait_until(claimed, within=30, what="a replica to claim the second firing")
        [key] = client.keys("oncall:claim:*")
        holder = str(client.get(key))
        victim = a if holder.endswith(f":{a.proc.pid}") else b
        survivor = b if victim is a else a
        assert holder.endswith(f":{victim.proc.pid}")
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=10)
        what = "the survivor to check the killed replica's firing"
        wait_until(lambda: len(stored(redis_srv.url)) == 2, within=60, what=what, watching=survivor)
        second = next(v for v in stored(redis_srv.url) if v["labels"].get("pod") == "two")
        assert second["replica"].endswith(f":{survivor.proc.pid}")
        assert second["status"] == "checked"
        assert {s["id"]: s["status"] for s in second["steps"]}["prom"] == "unknown"
    flush(redis_srv.url)


def test_redis_down_checklist_runs_notification_goes_verdict_written_later(
    tmp_path: Path, dead_url: str, sink: Sink
) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    notify = [{"name": "chat", "url": f"{sink.url}/hook/chat", "format": "slack"}]
    with serve_process(tmp_path / "s", redis_url=url, prometheus_url=dead_url,
                       serve={"notify": notify}) as serve:  # fmt: skip
        from tests.serve.conftest import alert, notification

        assert serve.post(notification(alert(fingerprint="rd"))).status_code == 200
        wait_until(sink.messages, within=30, what="the summary with Redis down", watching=serve)
        assert "redis_up" in sink.messages()[0]["body"]["text"]
        wait_until(
            lambda: serve.metric("oncall_serve_verdicts_buffered") == 1,
            within=30,
            what="the verdict kept in memory",
            watching=serve,
        )
        assert serve.metric("oncall_serve_verdict_store_errors_total") >= 1
        # Redis comes back on its port: the buffered verdict is written.
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", str(tmp_path)]  # fmt: skip
        with serving(argv, tmp_path / "redis.log", lambda: _redis_ready(port), timeout=10,
                     what="redis-server"):  # fmt: skip
            wait_until(
                lambda: len(stored(url)) == 1,
                within=30,
                what="the buffered verdict",
                watching=serve,
            )
            assert stored(url)[0]["fingerprint"] == "rd"
            assert serve.metric("oncall_serve_verdicts_buffered") == 0
        assert "Traceback" not in serve.log()
