"""One refresh stage (docs/architecture.md, §3 "The three routes"): after Prometheus answered, one
thread hop decodes its rules and builds each status once, with Alertmanager's routing and the
acknowledgements in it; nothing copies a status afterwards.

Recorded payloads served over loopback (fixtures/prometheus, fixtures/alertmanager); the
acknowledgements' Redis refuses, so every active rule says `ack unknown`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from oncall.alerts.engine import AlertEngine
from oncall.alerts.join import route, with_ack
from oncall.alerts.remote_rules import rule_key
from oncall.backends.alertmanager import AlertmanagerClient
from oncall.backends.prometheus import PrometheusClient
from oncall.model.matchers import Selection
from oncall.service.acks import AckView
from oncall.service.alerts import refresh_joined
from oncall.service.routing import AlertmanagerView
from oncall.settings import Settings
from tests.alerts.test_refresh_off_loop import AM_ALERTS, NOW, RULES, TIMEOUT
from tests.harness.faults import answering_server, refused_port

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
                # The refresh's own hop is one; the others are Alertmanager's read, decoded
                # beside Prometheus' request (its alerts, the silences list on the first).
                assert hops.count("AlertEngine._stage") == 1
                assert all(h == "AlertEngine._stage" or "_decoded" in h for h in hops), hops
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
