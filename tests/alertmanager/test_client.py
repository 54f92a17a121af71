"""The API v2 client against the real Alertmanager, its recorded payloads, and its failures."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from oncall.backends.alertmanager import AlertmanagerClient, parse_alert, parse_silence, parse_time
from oncall.errors import BackendError
from oncall.model.alertmanager import AmAlert
from tests.alertmanager.conftest import PostAlerts, Silence
from tests.harness.faults import http_stub, refused_port, silent_listener
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "alertmanager"


def test_recorded_payloads_parse() -> None:
    alerts = [
        parse_alert(a)
        for a in json.loads((FIXTURES / "alerts_v2_silenced_inhibited.json").read_text())
    ]
    silences = [parse_silence(s) for s in json.loads((FIXTURES / "silences_v2.json").read_text())]
    by_pod = {a.labels.get("pod", a.labels.get("model")): a for a in alerts}
    critical, warning = by_pod["vllm-7d9f-abcde"], by_pod["vllm-7d9f-fghij"]
    assert critical.state == "active" and warning.state == "suppressed"
    assert warning.inhibited_by == (critical.fingerprint,)
    silenced = by_pod["qwen"]
    assert silenced.silenced_by == (silences[0].id,) and by_pod["llama"].state == "active"
    assert silences[0].created_by == "alice" and silences[0].state == "active"
    assert silences[0].matchers_text() == '{alertname="LLMHighP99Latency", model="qwen"}'
    assert silences[0].ends_at - silences[0].starts_at == pytest.approx(7200, abs=1)


def test_times_as_servers_write_them() -> None:
    assert parse_time("2026-12-01T12:25:49.666Z") == pytest.approx(1796127949.666)
    assert parse_time("2026-12-01T12:25:49.123456789Z") == pytest.approx(1796127949.123456)
    assert parse_time("2026-12-01T13:25:49+01:00") == pytest.approx(1796127949)
    assert parse_time("0001-01-01T00:00:00.000Z") is None


async def test_states_silences_and_inhibitions_from_the_real_alertmanager(
    alertmanager_srv: RunningServer, post_alerts: PostAlerts, silence: Silence, test_label: str
) -> None:
    post_alerts([
        {"alertname": "VllmOOM", "namespace": "ai", "pod": "a", "severity": "critical"},
        {"alertname": "VllmOOM", "namespace": "ai", "pod": "b", "severity": "warning"},
        {"alertname": "P99", "namespace": "ai", "model": "qwen", "severity": "page"},
    ])  # fmt: skip
    silence_id = silence({"alertname": "P99"}, created_by="bob", comment="deploying the fix")
    mine: dict[str, AmAlert] = {}
    async with AlertmanagerClient(alertmanager_srv.url, timeout=5) as client:

        async def settled() -> bool:
            found = await client.alerts(matchers=[f'test="{test_label}"'])
            mine.clear()
            mine.update({a.labels.get("pod", "p99"): a for a in found})
            return len(mine) == 3 and mine["b"].state == "suppressed"

        await eventually(settled, within=10, what="Alertmanager to inhibit the warning")
        silences = {s.id: s for s in await client.silences()}
    assert mine["a"].state == "active" and not mine["a"].inhibited_by
    assert mine["b"].inhibited_by == (mine["a"].fingerprint,)
    assert mine["p99"].state == "suppressed" and mine["p99"].silenced_by == (silence_id,)
    made = silences[silence_id]
    assert (made.created_by, made.comment, made.state) == ("bob", "deploying the fix", "active")
    assert made.ends_at == pytest.approx(time.time() + 7200, abs=60)


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        pytest.param(401, b"Unauthorized", "auth", id="401"),
        pytest.param(403, b"forbidden", "auth", id="403"),
        pytest.param(200, b"<html><body>Sign in with SSO</body></html>", "bad payload", id="sso"),
        pytest.param(200, b'{"status": "success"}', "bad payload", id="not-a-list"),
        pytest.param(503, b"upstream unavailable", "http 503", id="503"),
    ],
)
async def test_failures_are_named(status: int, body: bytes, reason: str) -> None:
    with http_stub(status, body) as url:
        async with AlertmanagerClient(url, timeout=2, bearer_token="tok-abcdef") as client:
            with pytest.raises(BackendError) as caught:
                await client.alerts()
    assert caught.value.reason == reason
    assert "tok-abcdef" not in str(caught.value)


async def test_a_hung_alertmanager_is_a_timeout_within_the_setting() -> None:
    with silent_listener() as port:
        async with AlertmanagerClient(f"http://127.0.0.1:{port}", timeout=0.5) as client:
            with pytest.raises(BackendError) as caught:
                await client.silences()
    assert caught.value.reason == "timeout"
    assert "no answer within 0.5s" in str(caught.value)


async def test_nothing_listening_is_refused() -> None:
    async with AlertmanagerClient(f"http://127.0.0.1:{refused_port()}", timeout=2) as client:
        with pytest.raises(BackendError) as caught:
            await client.alerts()
    assert caught.value.reason == "refused"


async def test_alerts_read_again_unchanged_are_the_same_objects(
    alertmanager_srv: RunningServer, post_alerts: PostAlerts, silence: Silence, test_label: str
) -> None:
    """Reuse between reads: an unchanged alert is the last read's object, a changed one is
    new; either way each equals what a fresh parse of the same answer gives."""
    post_alerts([{"alertname": "Reuse", "pod": pod} for pod in ("a", "b", "c")])
    mine = [f'test="{test_label}"']
    async with AlertmanagerClient(alertmanager_srv.url, timeout=5) as client:

        async def fresh() -> list[AmAlert]:  # the same answer, parsed without reuse
            raw = await client.request("GET", "/api/v2/alerts", params=[("filter", mine[0])])
            return [parse_alert(alert) for alert in raw]

        await eventually(lambda: _count(client, mine, 3), within=10, what="the three alerts")
        first = {a.labels["pod"]: a for a in await client.alerts(matchers=mine)}
        again = await client.alerts(matchers=mine)
        assert again == await fresh()
        assert all(alert is first[alert.labels["pod"]] for alert in again)
        silence({"alertname": "Reuse", "pod": "b"})

        async def silenced() -> bool:
            found = {a.labels["pod"]: a for a in await client.alerts(matchers=mine)}
            return found["b"].state == "suppressed"

        await eventually(silenced, within=10, what="the silence to mute pod b")
        third = {a.labels["pod"]: a for a in await client.alerts(matchers=mine)}
        assert sorted(third.values(), key=lambda a: a.fingerprint) == sorted(
            await fresh(), key=lambda a: a.fingerprint
        )
    assert third["a"] is first["a"] and third["c"] is first["c"]
    assert third["b"] is not first["b"] and third["b"].silenced_by and not first["b"].silenced_by


async def _count(client: AlertmanagerClient, matchers: list[str], wanted: int) -> bool:
    return len(await client.alerts(matchers=matchers)) == wanted


def test_an_alert_changed_in_any_field_it_keeps_is_parsed_anew() -> None:
    raw = json.loads((FIXTURES / "alerts_v2_silenced_inhibited.json").read_text())[0]
    seen = parse_alert(raw)
    previous = {seen.fingerprint: seen}
    assert parse_alert(raw, previous) is seen
    changes = [
        {"status": {**raw["status"], "state": "suppressed", "silencedBy": ["s1"]}},
        {"status": {**raw["status"], "silencedBy": ["s1"]}},
        {"status": {**raw["status"], "inhibitedBy": ["f1"]}},
        {"status": {**raw["status"], "state": "unprocessed"}},
        {"labels": {**raw["labels"], "model": "other"}},
    ]
    for change in changes:
        changed = {**raw, **change}
        parsed = parse_alert(changed, previous)
        assert parsed is not seen and parsed == parse_alert(changed)
    # Times Alertmanager moves at every resend are not kept: the alert is the same object.
    assert parse_alert({**raw, "endsAt": "2026-12-01T13:00:00Z"}, previous) is seen
