"""The Prometheus client against a real prometheus, and each way a backend can fail."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncall.backends.prometheus import PrometheusClient
from oncall.errors import BackendError
from oncall.model.metrics import Series
from tests.harness.faults import http_stub, refused_port, silent_listener
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually

TIMEOUT = 1.0
SLACK = 0.5

RULES = """\
groups:
- name: test
  rules:
  - record: job:up:count
    expr: count(up)
  - alert: AlwaysFiring
    expr: vector(1)
    labels: {severity: page}
    annotations: {summary: "always"}
  - alert: NeverFires
    expr: vector(1) > 2
"""


@pytest.fixture(scope="module")
def prometheus_with_rules(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    from tests.harness.servers import prometheus_server

    directory = tmp_path_factory.mktemp("prom-rules")
    rules = directory / "rules.yml"
    rules.write_text(RULES)
    # The server scrapes itself: its port is only known once started, so use a file target.
    targets = directory / "targets.json"
    targets.write_text("[]")
    scrape = [
        {
            "job_name": "self",
            "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}],
        }
    ]
    with prometheus_server(directory / "p", scrape_configs=scrape, rule_files=[rules]) as server:
        targets.write_text(f'[{{"targets": ["127.0.0.1:{server.port}"]}}]')
        yield server


async def test_instant_query_vector_and_scalar(prometheus_srv: RunningServer) -> None:
    async with PrometheusClient(prometheus_srv.url, timeout=TIMEOUT) as prom:
        samples = await prom.query('label_replace(vector(0.5), "team", "ai", "", "")')
        assert len(samples) == 1
        assert samples[0].labels == {"team": "ai"}
        assert samples[0].value == 0.5
        assert abs(samples[0].timestamp - time.time()) < 60
        (scalar,) = await prom.query("1 + 1")
        assert scalar.labels == {}
        assert scalar.value == 2.0
        (nan,) = await prom.query("vector(NaN)")
        assert nan.value != nan.value


async def test_range_query(prometheus_srv: RunningServer) -> None:
    now = time.time()
    async with PrometheusClient(prometheus_srv.url, timeout=TIMEOUT) as prom:
        (series,) = await prom.query_range("vector(3)", start=now - 60, end=now, step=15)
    assert series.labels == {}
    assert [value for _, value in series.points] == [3.0] * len(series.points)
    assert len(series.points) in (4, 5)


async def test_rules_alerts_and_targets(prometheus_with_rules: RunningServer) -> None:
    async with PrometheusClient(prometheus_with_rules.url, timeout=TIMEOUT) as prom:
        groups = await prom.rules()
        rules = {rule["name"]: rule for group in groups for rule in group["rules"]}
        assert rules["job:up:count"]["type"] == "recording"
        assert rules["AlwaysFiring"]["type"] == "alerting"

        async def firing() -> bool:
            alerts = await prom.alerts()
            return any(
                a["labels"]["alertname"] == "AlwaysFiring" and a["state"] == "firing"
                for a in alerts
            )

        await eventually(firing, within=15, what="AlwaysFiring to fire")
        only_alerting = await prom.rules(kind="alert")
        assert {r["name"] for g in only_alerting for r in g["rules"]} == {
            "AlwaysFiring",
            "NeverFires",
        }

        async def scraped() -> bool:
            targets = await prom.targets()
            return bool(targets) and targets[0]["health"] == "up"

        await eventually(scraped, within=15, what="the self-scrape to come up")
        targets = await prom.targets()
        assert targets[0]["labels"]["job"] == "self"


@pytest.fixture
def refused_url() -> str:
    return f"http://127.0.0.1:{refused_port()}"


@pytest.fixture
def silent_url() -> Iterator[str]:
    with silent_listener() as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def http_503_url() -> Iterator[str]:
    with http_stub(503, b"upstream connect error", "text/plain") as url:
        yield url


@pytest.fixture
def html_url() -> Iterator[str]:
    with http_stub(200, b"<html><body>Sign in</body></html>") as url:
        yield url


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("refused_url", "refused"),
        ("silent_url", "timeout"),
        ("http_503_url", "http 503"),
        ("html_url", "bad payload"),
    ],
)
async def test_faults_become_typed_errors_within_the_timeout(
    fixture: str, reason: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue(fixture)
    async with PrometheusClient(url, timeout=TIMEOUT) as prom:
        started = time.monotonic()
        with pytest.raises(BackendError) as caught:
            await prom.query("up")
        elapsed = time.monotonic() - started
    assert caught.value.reason == reason
    assert caught.value.backend == "prometheus"
    assert elapsed <= TIMEOUT + SLACK


async def test_promql_error_is_a_query_error(prometheus_srv: RunningServer) -> None:
    async with PrometheusClient(prometheus_srv.url, timeout=TIMEOUT) as prom:
        started = time.monotonic()
        with pytest.raises(BackendError) as caught:
            await prom.query("sum(rate(up[5m])")
        elapsed = time.monotonic() - started
    assert caught.value.reason == "query error"
    assert "bad_data" in caught.value.detail
    assert "parse error" in caught.value.detail
    assert elapsed <= TIMEOUT + SLACK


async def test_non_http_peer_is_a_bad_payload(redis_srv: RunningServer) -> None:
    """A Prometheus URL that points at Redis: the peer hangs up on HTTP."""
    async with PrometheusClient(f"http://127.0.0.1:{redis_srv.port}", timeout=TIMEOUT) as prom:
        with pytest.raises(BackendError) as caught:
            await prom.query("up")
    assert caught.value.reason == "bad payload"


async def test_range_vector_on_instant_query_is_a_query_error(
    prometheus_srv: RunningServer,
) -> None:
    async with PrometheusClient(prometheus_srv.url, timeout=TIMEOUT) as prom:
        with pytest.raises(BackendError) as caught:
            await prom.query("up[1m]")
    assert caught.value.reason == "query error"
    assert "matrix" in caught.value.detail


def test_bearer_token_is_sent_but_never_in_errors(tmp_path: Path) -> None:
    client = PrometheusClient("http://127.0.0.1:1", timeout=TIMEOUT, bearer_token="tok-secret")
    assert client._http.headers["Authorization"] == "Bearer tok-secret"
    error = client._error("refused", "x")
    assert "tok-secret" not in str(error)


async def test_raw_samples_are_as_written(prometheus_with_rules: RunningServer) -> None:
    """A range selector's samples at the times each scrape wrote them (not on a step's grid);
    an expression that is not a selector is Prometheus' own query error."""
    async with PrometheusClient(prometheus_with_rules.url, timeout=TIMEOUT) as prom:

        async def scraped_twice() -> list[Series]:
            found = await prom.raw_samples('up{job="self"}', window_s=60, at=time.time())
            return found if found and len(found[0].points) >= 2 else []

        (series,) = await eventually(scraped_twice, within=30, what="two scrapes of itself")
        assert series.labels["job"] == "self" and {v for _, v in series.points} == {1.0}
        times = [ts for ts, _ in series.points]
        assert times == sorted(times) and len(set(times)) == len(times)
        with pytest.raises(BackendError) as raised:
            await prom.raw_samples("vector(1)", window_s=60, at=time.time())
        assert raised.value.reason == "query error"
