"""One refresh stage (docs/architecture.md, §3 "The three routes"): after Prometheus answered, one
thread hop decodes its rules and Alertmanager's answer (received beside it, not decoded) and
builds each status once, with Alertmanager's routing and the acknowledgements in it; nothing
copies a status afterwards. A refresh with Alertmanager makes that one hop and no other.

Recorded payloads served over loopback (fixtures/prometheus, fixtures/alertmanager); the
acknowledgements' Redis refuses, so every active rule says `ack unknown`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oncall.alerts.engine import AlertEngine
from oncall.alerts.join import route, with_ack
from oncall.alerts.loader import load_rule_files
from oncall.alerts.remote_rules import rule_key
from oncall.backends.alertmanager import AlertmanagerClient, scan_alerts
from oncall.backends.prometheus import PrometheusClient
from oncall.model.matchers import Selection
from oncall.service.acks import AckView
from oncall.service.alerts import refresh_joined
from oncall.service.routing import AlertmanagerView
from oncall.settings import Settings
from tests.alertmanager.test_muted_by import alerts_endpoint
from tests.alerts.test_refresh_off_loop import AM_ALERTS, NOW, RULES, TIMEOUT
from tests.harness.faults import answering_server, refused_port

RULE = """
groups:
- name: g
  rules:
  - alert: LLMHighP99Latency
    expr: vector(1)
"""
SILENCES = Path(__file__).resolve().parents[2] / "fixtures" / "alertmanager" / "silences_v2.json"


def _answer(path: str) -> tuple[int, str, bytes]:
    if path.startswith("/api/v1/rules"):
        body = json.loads(RULES.read_bytes())
        # The recorded alerts, so that Alertmanager's hold some of Prometheus' instances.
        am = json.loads(AM_ALERTS.read_bytes())
        rule = body["data"]["groups"][0]["rules"][0]
        rule["alerts"] = [
            {"labels": a["labels"], "state": "firing", "activeAt": "2026-12-01T13:00:00Z",
             "value": "1"} for a in am if a["labels"].get("alertname") == rule["name"]
        ] + rule.get("alerts", [])  # fmt: skip
        return 200, "application/json", json.dumps(body).encode()
    if path.startswith("/api/v2/silences"):
        return 200, "application/json", SILENCES.read_bytes()
    if path.startswith("/api/v2/status"):
        return 200, "application/json", b'{"versionInfo": {"version": "0.27.0"}}'
    return 200, "application/json", AM_ALERTS.read_bytes()


@pytest.fixture
def url() -> Iterator[str]:
    with answering_server(_answer) as base:
        yield base


def _hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The qualified name of each function handed to a worker thread."""
    seen: list[str] = []
    real = asyncio.to_thread

    async def counted(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        seen.append(getattr(func, "__qualname__", repr(func)))
        return await real(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return seen


async def test_one_hop_after_prometheus_and_each_status_built_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis = {"redis": {"url": f"redis://127.0.0.1:{refused_port()}/0", "timeout": "1s"}}
    acks = AckView.from_settings(Settings.model_validate(redis), grace=None)
    view = AlertmanagerView(AlertmanagerClient(url, timeout=TIMEOUT), grace=None)
    hops = _hops(monkeypatch)
    async with PrometheusClient(url, timeout=TIMEOUT) as prom:
        engine = AlertEngine(prom, [], from_prometheus=Selection(), context="eu")
        try:
            for _ in range(2):
                hops.clear()
                statuses = await refresh_joined(engine, NOW, alertmanager=view, acks=acks)
                # The refresh's one hop, Alertmanager's answer decoded in it (its alerts, and
                # the silences list on the first): no hop of its own.
                assert hops == ["AlertEngine._stage"]
        finally:
            await view.aclose()
            await acks.aclose()
        snapshot = view.snapshot
        assert snapshot is not None and snapshot.reason is None
        # Built once: what the board gets is what the engine keeps, not a copy of it.
        assert statuses and all(s is engine.last[rule_key(s.rule)] for s in statuses)
        # The same routing and acknowledgement as joining statuses built without them.
        async with PrometheusClient(url, timeout=TIMEOUT) as plain_prom:
            plain = await AlertEngine(
                plain_prom, [], from_prometheus=Selection(), context="eu"
            ).refresh(NOW)
    down = AckView.from_settings(Settings.model_validate(redis), grace=None)
    try:
        ack_read = await down.latest()
    finally:
        await down.aclose()
    joined = [with_ack(s, ack_read) for s in route(plain, snapshot)]
    assert [s.routing for s in statuses] == [s.routing for s in joined]
    assert [[i.routing for i in s.instances] for s in statuses] == [
        [i.routing for i in s.instances] for s in joined
    ]
    routed = [s for s in statuses if s.routing is not None and s.routing.total]
    assert routed, "the recorded alerts are held by Alertmanager"
    assert all(s.routing.ack_error for s in statuses if s.state in ("firing", "pending")
               and s.routing is not None)  # fmt: skip


async def test_prometheus_down_alertmanager_is_decoded_in_the_one_hop(
    url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "rules.yaml").write_text(RULE)
    rules = load_rule_files([tmp_path / "rules.yaml"]).rules
    assert rules
    view = AlertmanagerView(AlertmanagerClient(url, timeout=TIMEOUT), grace=None)
    hops = _hops(monkeypatch)
    async with PrometheusClient(f"http://127.0.0.1:{refused_port()}", timeout=TIMEOUT) as prom:
        engine = AlertEngine(prom, rules, source="prometheus", context="eu")
        try:
            (status,) = await refresh_joined(engine, NOW, alertmanager=view)
        finally:
            await view.aclose()
    assert hops == ["_join_decoded"]
    assert status.state == "unknown"
    snapshot = view.snapshot
    assert snapshot is not None and snapshot.reason is None and snapshot.alerts


@pytest.mark.parametrize(
    ("body", "reason"),
    [(b"<html><body>Sign in</body></html>", "bad payload"),
     (b'{"error": "not here"}', "bad payload"),
     (b'[{"fingerprint": "f1", "status": {"state": "lost"}, "labels": {}}]', "bad payload")],
)  # fmt: skip
async def test_an_answer_that_does_not_decode_is_a_reason_in_the_stage_not_a_traceback(
    body: bytes, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer(path: str) -> tuple[int, str, bytes]:
        if path.startswith("/api/v2/alerts"):
            return 200, "text/html", body
        return _answer(path)

    hops = _hops(monkeypatch)
    with answering_server(answer) as base:
        view = AlertmanagerView(AlertmanagerClient(base, timeout=TIMEOUT), grace=None)
        async with PrometheusClient(base, timeout=TIMEOUT) as prom:
            engine = AlertEngine(prom, [], from_prometheus=Selection(), context="eu")
            try:
                statuses = await refresh_joined(engine, NOW, alertmanager=view)
            finally:
                await view.aclose()
    assert hops == ["AlertEngine._stage"]
    snapshot = view.snapshot
    assert snapshot is not None and snapshot.reason == reason
    firing = [i.routing for s in statuses for i in s.instances if i.state == "firing"]
    assert firing and all(r is not None and r.state == "unknown" for r in firing)


@pytest.mark.parametrize(
    "body",
    [AM_ALERTS.read_bytes(), json.dumps(alerts_endpoint(), indent=2).encode(),
     json.dumps(alerts_endpoint()[:1]).replace('"active"', '"unprocessed"').encode(), b"[]"],
    ids=["silenced-inhibited", "active", "unprocessed", "none"],
)  # fmt: skip
def test_the_scan_asks_for_what_the_decoded_alerts_would(body: bytes) -> None:
    scan = scan_alerts(httpx.Response(200, content=body))
    alerts = AlertmanagerClient("http://am", timeout=1).decode_alerts(
        httpx.Response(200, content=body)
    )
    assert scan is not None
    assert scan.active == AlertmanagerClient.may_be_muted(alerts)
    assert scan.silence_ids == frozenset(sid for a in alerts for sid in a.silenced_by)
    # Compact as Alertmanager writes it: the same.
    compact = json.dumps(json.loads(body), separators=(",", ":")).encode()
    assert scan_alerts(httpx.Response(200, content=compact)) == scan
    assert scan_alerts(httpx.Response(200, content=b"<html>login</html>")) is None
