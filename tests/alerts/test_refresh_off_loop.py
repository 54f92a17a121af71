"""A board refresh decodes and builds off the event loop, and gives what the loop would.

The recorded payloads (fixtures/prometheus, fixtures/alertmanager) are served over loopback
as the real servers sent them; what the engine and the clients make of them in a worker
thread is compared with the same values built the plain way (`json.loads`, `instances_of`).
"""

from __future__ import annotations

import gc
import gzip
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest

import oncall.alerts.states as states_module
import oncall.backends.alertmanager as am_module
import oncall.backends.prometheus as prom_module
from oncall.alerts.engine import AlertEngine
from oncall.alerts.prom_source import instances_of, parse_time
from oncall.alerts.remote_rules import deployed_by_key, merged
from oncall.backends.alertmanager import AlertmanagerClient, parse_alert
from oncall.backends.json_slices import array_items
from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.alerts import AlertRule, RuleStatus
from oncall.model.matchers import Selection
from oncall.runtime import collector_paused, paused
from oncall.service.contexts import ContextAlerts
from oncall.service.sources import AlertsSource, LiveChecklists
from oncall.settings import Settings
from tests.harness.faults import http_stub, refused_port

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RULES = FIXTURES / "prometheus" / "rules_v1_alerts.json"
AM_ALERTS = FIXTURES / "alertmanager" / "alerts_v2_silenced_inhibited.json"
RECORDED = [RULES, AM_ALERTS, FIXTURES / "alertmanager" / "silences_v2.json"]
NOW = parse_time("2026-12-01T13:58:00Z") or 0.0
TIMEOUT = 5.0


@pytest.fixture
def rules_url() -> Iterator[str]:
    with http_stub(200, RULES.read_bytes(), "application/json") as url:
        yield url


def threads_of(
    monkeypatch: pytest.MonkeyPatch,
    module: object,
    name: str,
    seen_as: Callable[[], Any] = threading.get_ident,
) -> list[Any]:
    """Record the thread each call of `module.name` runs on (or `seen_as()` at each call)."""
    seen: list[Any] = []
    original: Callable[..., Any] = getattr(module, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        seen.append(seen_as())
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, recorded)
    return seen


def items_of(text: bytes | str) -> list[Any] | None:
    """`array_items`, all of them (None: not an array)."""
    items = array_items(text)
    return None if items is None else list(items)


def array_of(text: bytes | str) -> list[Any] | None:
    """What `items_of` should give: `json.loads`' array, None for any other value."""
    value = json.loads(text)
    return value if isinstance(value, list) else None


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_sliced_decoding_is_json_loads(path: Path) -> None:
    data = path.read_bytes()
    # Pretty-printed (whitespace everywhere the grammar allows it): the same items.
    spaced = json.dumps(json.loads(data), indent=2).encode()
    for text in (data, spaced):
        assert items_of(text) == array_of(text)


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_sliced_decoding_refuses_what_json_loads_refuses(path: Path) -> None:
    """Every cut of a recorded answer (a peer hanging up mid-answer) and every place a
    delimiter could be dropped: an error wherever `json.loads` has one."""
    text = path.read_text()
    broken = [text[:cut] for cut in range(0, len(text), 7)]
    broken += [text[:i] + text[i + 1 :] for i, c in enumerate(text) if c in ',:[]{}"']
    broken += [text + " x", text.replace(":", " ", 1)]
    for bad in broken:
        try:
            json.loads(bad)
        except json.JSONDecodeError:
            items = array_items(bad)  # None: not an array, which json.loads reports its way
            with pytest.raises(json.JSONDecodeError):
                list(items if items is not None else json.loads(bad))
        else:
            assert items_of(bad) == array_of(bad)


async def test_refresh_builds_off_the_loop_what_the_loop_would(
    rules_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded_on = threads_of(monkeypatch, prom_module, "_rules")
    built_on = threads_of(monkeypatch, states_module, "instances_of")
    local = AlertRule(name="PodsHot", expr="x > 0.9", group="capture-llm", file="f.yaml", line=3)
    async with PrometheusClient(rules_url, timeout=TIMEOUT) as prom:
        engine = AlertEngine(prom, [local], from_prometheus=Selection())
        statuses = await engine.refresh(NOW)
    loop_thread = threading.get_ident()
    assert decoded_on and loop_thread not in decoded_on
    assert built_on and loop_thread not in built_on
    # The plain way: the whole answer decoded at once, each rule's instances built here.
    by_key = deployed_by_key(json.loads(RULES.read_bytes())["data"]["groups"])
    assert [(s.rule.group, s.rule.name) for s in statuses] == [
        ("capture-llm", "PodsHot"),
        *[key for key in by_key if key[1] != "PodsHot"],
    ]
    for status in statuses:
        expected = instances_of(merged(by_key[(status.rule.group, status.rule.name)]), NOW)
        assert status.source == "prometheus"
        assert status.instances == tuple(expected)
    states = {s.rule.name: s.state for s in statuses}
    # BrokenJoin (health "err", no alerts) keeps Prometheus' state "inactive"; its lastError is
    # the status' error (tests/prometheus_compat).
    assert states == {"PodsHot": "firing", "SlowToFire": "pending", "NeverActive": "inactive",
                      "BrokenJoin": "inactive", "AlwaysOn": "firing"}  # fmt: skip
    slow = next(s for s in statuses if s.rule.name == "SlowToFire")
    assert {i.labels["model"] for i in slow.instances} == {"qwen", "llama"}
    hot = next(s for s in statuses if s.rule.name == "PodsHot")
    assert sorted(i.value for i in hot.instances if i.value is not None) == [0.91, 0.95, 0.99]


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, b"<html><body>Sign in</body></html>", "bad payload"),
        (200, RULES.read_bytes()[:1500], "bad payload"),  # hung up mid-answer
        (200, b'{"status":"success","data":{}}', "bad payload"),
        (503, b'{"status":"error","errorType":"unavailable","error":"x"}', "http 503"),
        (401, b"Unauthorized", "auth"),
    ],
    ids=["html", "cut", "no groups", "503", "401"],
)
async def test_rules_decoded_off_the_loop_fail_as_before(
    status: int, body: bytes, reason: str
) -> None:
    with http_stub(status, body, "application/json") as url:
        async with PrometheusClient(url, timeout=TIMEOUT) as prom:
            with pytest.raises(BackendError) as caught:
                await prom.rules(kind="alert")
    assert caught.value.reason == reason


async def test_a_compressed_rules_answer_is_inflated_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Prometheus gzips /api/v1/rules (megabytes at fleet size): inflated in the worker, to
    the same groups; a body that is not the gzip it says it is fails as a bad payload."""
    inflated_on = threads_of(monkeypatch, prom_module, "decoded_in_thread")
    packed = gzip.compress(RULES.read_bytes())
    with http_stub(200, packed, "application/json", {"Content-Encoding": "gzip"}) as url:
        async with PrometheusClient(url, timeout=TIMEOUT) as prom:
            groups = await prom.rules(kind="alert")
    assert inflated_on and threading.get_ident() not in inflated_on
    assert groups == json.loads(RULES.read_bytes())["data"]["groups"]
    with http_stub(200, packed[:-30], "application/json", {"Content-Encoding": "gzip"}) as url:
        async with PrometheusClient(url, timeout=TIMEOUT) as prom:
            with pytest.raises(BackendError) as caught:
                await prom.rules(kind="alert")
    assert caught.value.reason == "bad payload"


async def test_a_real_prometheus_sends_its_rules_compressed(prometheus_srv: Any) -> None:
    """Why the inflating moved: what a real server sends for the client's Accept-Encoding."""
    rules = {"type": "alert"}
    async with (
        httpx.AsyncClient(base_url=prometheus_srv.url, trust_env=False) as http,
        http.stream("GET", "/api/v1/rules", params=rules) as answer,
    ):
        assert answer.headers.get("content-encoding") == "gzip"
    async with PrometheusClient(prometheus_srv.url, timeout=TIMEOUT) as prom:
        assert isinstance(await prom.rules(kind="alert"), list)


async def test_alertmanager_alerts_parse_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed_on = threads_of(monkeypatch, am_module, "parse_alert")
    with http_stub(200, AM_ALERTS.read_bytes(), "application/json") as url:
        async with AlertmanagerClient(url, timeout=TIMEOUT) as am:
            alerts = await am.alerts()
    assert parsed_on and threading.get_ident() not in parsed_on
    assert alerts == [parse_alert(raw) for raw in json.loads(AM_ALERTS.read_bytes())]
    with http_stub(200, AM_ALERTS.read_bytes()[:-40], "application/json") as url:
        async with AlertmanagerClient(url, timeout=TIMEOUT) as am:
            with pytest.raises(BackendError) as caught:
                await am.alerts()
    assert caught.value.reason == "bad payload"
    assert "not an Alertmanager API response" in caught.value.detail


def test_collector_pauses_nest_and_give_the_collector_back() -> None:
    assert gc.isenabled() and not paused()
    with collector_paused():
        worker = threading.Thread(target=_pause_briefly)  # another refresh's worker thread
        worker.start()
        worker.join(timeout=10)
        assert not gc.isenabled() and paused()  # the outer pause still runs
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("a refresh that fails")
        assert not gc.isenabled()
    assert gc.isenabled() and not paused()
    gc.disable()  # a pause while the collector is off (the app's start-up) leaves it off
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _pause_briefly() -> None:
    with collector_paused():
        assert not gc.isenabled()


async def test_refresh_builds_with_the_collector_paused_and_resumes_it(
    rules_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pause covers the decode and the build in the worker, not the request's wait, and
    ends with every refresh, a failed one too: no collection is left off between refreshes."""
    during = threads_of(monkeypatch, states_module, "instances_of", gc.isenabled)
    async with PrometheusClient(rules_url, timeout=TIMEOUT) as prom:
        engine = AlertEngine(prom, [], from_prometheus=Selection())
        for _ in range(2):
            assert (await engine.refresh(NOW)) and gc.isenabled() and not paused()
    assert during and not any(during)
    with http_stub(200, b"<html>Sign in</html>", "application/json") as url:
        async with PrometheusClient(url, timeout=TIMEOUT) as prom:
            failed = await AlertEngine(prom, [], from_prometheus=Selection()).refresh(NOW)
    assert failed == [] and gc.isenabled() and not paused()


async def test_statuses_carry_the_context_they_are_built_with(rules_url: str) -> None:
    """A context's engine labels each status as it builds it (in the worker), stale ones too,
    so that `ContextAlerts` passes them on as they are instead of copying each."""

    class Engine:  # the source `ContextAlerts` wraps, as `LiveAlerts(context=)` gives it
        async def refresh(self) -> list[RuleStatus]:
            return await engine.refresh(NOW)

    async with PrometheusClient(rules_url, timeout=TIMEOUT) as prom:
        engine = AlertEngine(prom, [], from_prometheus=Selection(), context="eu")
        built = await engine.refresh(NOW)
        shown = await ContextAlerts("eu", cast(AlertsSource, Engine())).refresh()
    assert built and {s.context for s in built} == {"eu"}
    assert [s.key for s in shown] == [f"eu/{s.rule.name}" for s in built]
    assert all(s.context == "eu" for s in shown)
    async with PrometheusClient(f"http://127.0.0.1:{refused_port()}", timeout=TIMEOUT) as down:
        engine.prom = down
        stale = await engine.refresh(NOW + 10)
    assert stale and all(s.state == "unknown" and s.context == "eu" for s in stale)


def test_the_checklist_warm_up_keeps_a_refresh_pause() -> None:
    """The warm-up (in a thread, beside the refresh loops) pauses the collector counted with
    the refreshes' pauses: it neither turns it on in the middle of one nor leaves it off."""
    assert gc.isenabled()
    with collector_paused():  # a refresh decoding meanwhile
        warm = threading.Thread(target=LiveChecklists(Settings()).warm_up)
        warm.start()
        warm.join(timeout=60)
        assert not warm.is_alive()
        assert not gc.isenabled() and paused()
    assert gc.isenabled() and not paused()
