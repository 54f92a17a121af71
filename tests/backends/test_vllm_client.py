"""VllmClient against the real vLLM simulator (subprocess), plus unit tests of the parsing."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from oncall.backends.vllm import (
    FACTS,
    VllmClient,
    VllmMetrics,
    histogram_quantile,
    parse_metrics,
    token_rate,
)
from oncall.errors import BackendError
from oncall_drill.netutil import free_loopback_port
from tests.drill.vllm.helpers import SimProcess, running_sim, sim_factory
from tests.harness.faults import http_stub
from tests.harness.waiting import eventually

MODEL = "qwen"
MAX_SEQS = 4
BASE_ARGS = ("--model", MODEL, "--max-num-seqs", str(MAX_SEQS), "--kv-capacity-tokens", "4096")
INF = math.inf

# ---- histogram_quantile --------------------------------------------------------------------

BUCKETS = [(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 50.0)]


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.1, 0.05),  # rank 5 in (0, 0.1]: 0 + 0.1 * 5/10
        (0.5, 0.4),  # rank 25 in (0.1, 0.5]: 0.1 + 0.4 * 15/20
        (0.7, 0.75),  # rank 35 in (0.5, 1.0]: 0.5 + 0.5 * 5/10
        (0.8, 1.0),  # rank 40 exactly the top of (0.5, 1.0]
        (0.9, 1.0),  # rank 45 in +Inf bucket -> largest finite bound
        (0.0, 0.0),  # rank 0 in the first bucket -> its lower bound 0
    ],
)
def test_histogram_quantile_interpolates(q: float, expected: float) -> None:
    result = histogram_quantile(q, BUCKETS)
    assert result is not None
    assert result == pytest.approx(expected)


def test_histogram_quantile_edge_cases() -> None:
    assert histogram_quantile(0.5, []) is None
    assert histogram_quantile(0.5, [(INF, 0.0)]) is None
    assert histogram_quantile(0.5, [(1.0, 0.0), (INF, 0.0)]) is None  # no observations
    assert histogram_quantile(0.5, [(1.0, 3.0), (2.0, 4.0)]) is None  # no +Inf bucket
    assert histogram_quantile(0.5, [(1.0, 0.0), (INF, 4.0)]) == 1.0  # all in +Inf
    assert histogram_quantile(-0.1, BUCKETS) == -INF
    assert histogram_quantile(1.1, BUCKETS) == INF
    # Order does not matter; a count that dips (racing scrape) is made monotonic.
    assert histogram_quantile(0.1, list(reversed(BUCKETS))) == pytest.approx(0.05)
    dipped = [(0.1, 10.0), (0.5, 9.0), (1.0, 20.0), (INF, 20.0)]
    assert histogram_quantile(0.5, dipped) == pytest.approx(0.1)  # rank 10 at top of bucket 1


# ---- parse_metrics -------------------------------------------------------------------------

TWO_ENGINES_010 = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.75
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 100.0
vllm:generation_tokens_total{engine="1",model_name="m"} 50.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 4.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 6.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 10.0
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_per_output_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 0.0
vllm:time_per_output_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 10.0
vllm:time_per_output_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.5
"""


def test_parse_sums_over_engines_and_reads_010_names() -> None:
    parsed = parse_metrics(TWO_ENGINES_010, "http://x")
    assert parsed.metric_version == "0.10"
    m = parsed.models["m"]
    assert m.running == 5.0
    assert m.kv_cache_usage == 0.75  # max over engines
    assert m.generation_tokens_total == 150.0
    assert m.request_success_total == 10.0  # summed over finished_reason
    # ITL from the old name, buckets summed over engines: 10 of 20 at <= 0.1, 10 above.
    assert m.itl is not None
    assert m.itl.p50 == pytest.approx(0.1)
    assert m.itl.p99 == pytest.approx(0.1)  # in +Inf -> largest finite bound
    assert {"waiting", "ttft", "e2e", "preemptions_total"} <= set(parsed.missing)
    assert "running" not in parsed.missing


def test_parse_without_vllm_series_lists_everything_missing() -> None:
    text = "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 1.0\n"
    parsed = parse_metrics(text, "http://x")
    assert parsed.models == {}
    assert parsed.missing == list(FACTS)
    assert parsed.metric_version == "unknown"


def test_token_rate_handles_reset_and_absence() -> None:
    def scrape(tokens: float | None) -> VllmMetrics:
        text = (
            ""
            if tokens is None
            else f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {tokens}\n'
        )
        return parse_metrics(text, "http://x")

    assert token_rate(scrape(100), scrape(300), 2.0) == 100.0
    assert token_rate(scrape(300), scrape(10), 2.0) is None  # restarted server
    assert token_rate(scrape(None), scrape(10), 2.0) is None
    assert token_rate(scrape(1), scrape(10), 0.0) is None


# ---- against the simulator -----------------------------------------------------------------


@pytest.fixture(scope="module", params=["0.33", "0.10"])
def sim(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SimProcess]:
    """One simulator per metrics version, shared by the non-fault tests; always stopped."""
    version: str = request.param
    directory = tmp_path_factory.mktemp(f"vllm_{version}")
    with running_sim(
        directory, *BASE_ARGS, "--metrics-version", version, "--speed", "10"
    ) as started:
        yield started


@pytest.fixture
def own_sims(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    """Simulators a test may break or load; all are stopped afterwards."""
    with sim_factory(tmp_path, *BASE_ARGS) as factory:
        yield factory


def _version_of(sim: SimProcess) -> str:
    args = [str(a) for a in sim.proc.args]  # type: ignore[union-attr]
    return args[args.index("--metrics-version") + 1]


async def test_health_version_models(sim: SimProcess) -> None:
    async with VllmClient(sim.url, timeout=5) as client:
        health = await client.health()
        assert health.ok and health.status == 200 and 0 <= health.latency_s < 5
        version = await client.version()
        assert version.startswith(_version_of(sim) + ".")
        assert await client.models() == [MODEL]


async def test_idle_metrics(sim: SimProcess) -> None:
    async with VllmClient(sim.url, timeout=5) as client:
        scraped = await client.metrics()
    assert scraped.metric_version == _version_of(sim)
    assert scraped.instance == sim.url
    assert scraped.missing == []
    m = scraped.models[MODEL]
    assert m.kv_cache_usage is not None and 0.0 <= m.kv_cache_usage <= 1.0
    assert m.running is not None and 0 <= m.running <= MAX_SEQS


async def _flood(url: str, count: int, max_tokens: int) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=30, trust_env=False) as http:
        body = {"model": MODEL, "max_tokens": max_tokens, "ignore_eos": True}
        responses = await asyncio.gather(
            *(
                http.post("/v1/completions", json={**body, "prompt": f"hi {i}"})
                for i in range(count)
            )
        )
    return [r.status_code for r in responses]


async def test_metrics_under_flood(sim: SimProcess) -> None:
    async with VllmClient(sim.url, timeout=5) as client:
        before = await client.metrics()
        flood = asyncio.create_task(_flood(sim.url, count=3 * MAX_SEQS, max_tokens=150))
        seen: list[VllmMetrics] = []

        async def queued() -> VllmMetrics | None:
            scraped = await client.metrics()
            seen.append(scraped)
            waiting = scraped.models[MODEL].waiting
            return scraped if waiting is not None and waiting > 0 else None

        first = await eventually(queued, within=10, what="waiting > 0", interval=0.02)
        started = time.monotonic()
        first_total = first.generation_tokens_total
        assert first_total is not None

        async def advanced() -> VllmMetrics | None:
            scraped = await client.metrics()
            seen.append(scraped)
            total = scraped.generation_tokens_total
            return scraped if total is not None and total > first_total else None

        second = await eventually(
            advanced, within=10, what="generation tokens to grow", interval=0.02
        )
        rate = token_rate(first, second, time.monotonic() - started)
        assert rate is not None and rate > 0
        assert await flood == [200] * (3 * MAX_SEQS)
        after = await client.metrics()

    for scraped in seen:
        m = scraped.models[MODEL]
        assert m.running is not None and m.running <= MAX_SEQS
        assert m.kv_cache_usage is not None and 0.0 <= m.kv_cache_usage <= 1.0
    b, a = before.models[MODEL], after.models[MODEL]
    for counter in ("generation_tokens_total", "prompt_tokens_total", "request_success_total"):
        old, new = getattr(b, counter), getattr(a, counter)
        assert old is not None and new is not None and new > old, counter
    assert a.generation_tokens_total is not None and b.generation_tokens_total is not None
    assert a.generation_tokens_total - b.generation_tokens_total == 3 * MAX_SEQS * 150
    for name in ("ttft", "itl", "e2e"):
        quantiles = getattr(a, name)
        assert quantiles is not None, name
        values = [quantiles.p50, quantiles.p90, quantiles.p99]
        assert all(v is not None and math.isfinite(v) for v in values), (name, values)
        assert values[0] <= values[1] <= values[2], (name, values)


async def test_disable_log_stats_reports_missing(own_sims: Callable[..., SimProcess]) -> None:
    sim = own_sims("--disable-log-stats")
    async with VllmClient(sim.url, timeout=5) as client:
        scraped = await client.metrics()
    assert scraped.models == {}
    assert scraped.missing == list(FACTS)


async def test_api_key_only_for_v1(own_sims: Callable[..., SimProcess]) -> None:
    sim = own_sims("--api-key", "s3cret")
    async with VllmClient(sim.url, timeout=5) as anonymous:
        with pytest.raises(BackendError) as caught:
            await anonymous.models()
        assert caught.value.reason == "auth"
        assert (await anonymous.health()).ok
    async with VllmClient(sim.url, timeout=5, api_key="s3cret") as keyed:
        assert await keyed.models() == [MODEL]


async def test_refused() -> None:
    url = f"http://127.0.0.1:{free_loopback_port()}"
    async with VllmClient(url, timeout=2) as client:
        for call in (client.health, client.version, client.models, client.metrics):
            with pytest.raises(BackendError) as caught:
                await call()
            assert caught.value.reason == "refused"
            assert caught.value.backend == "vllm" and caught.value.target == url


async def test_hang_times_out(own_sims: Callable[..., SimProcess]) -> None:
    sim = own_sims()
    async with httpx.AsyncClient(base_url=sim.url, timeout=5, trust_env=False) as drill:
        await drill.post("/drill/fault", json={"fault": "hang"})
        async with VllmClient(sim.url, timeout=0.5) as client:
            for call in (client.health, client.metrics):
                started = time.monotonic()
                with pytest.raises(BackendError) as caught:
                    await call()
                assert caught.value.reason == "timeout"
                assert time.monotonic() - started < 0.5 + 0.5
        await drill.post("/drill/fault", json={"fault": "none"})


@pytest.mark.parametrize(("version", "dead_status"), [("0.33", 503), ("0.10", 500)])
async def test_engine_death(
    own_sims: Callable[..., SimProcess], version: str, dead_status: int
) -> None:
    sim = own_sims("--metrics-version", version, "--death-exit-seconds", "1.0")
    async with VllmClient(sim.url, timeout=2) as client:
        assert (await client.health()).ok
        async with httpx.AsyncClient(base_url=sim.url, timeout=5, trust_env=False) as drill:
            await drill.post("/drill/fault", json={"fault": "engine-death"})
        health = await client.health()
        assert not health.ok and health.status == dead_status
        # An engine dying while serving makes vLLM's API server exit 0 (vllm issue #48966).
        assert await asyncio.to_thread(sim.proc.wait, 10) == 0
        with pytest.raises(BackendError) as caught:
            await client.health()
        assert caught.value.reason == "refused"


@pytest.fixture
def html_peer() -> Iterator[str]:
    body = b"<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1></body></html>\n"
    # The content type lies; the body must still be rejected.
    with http_stub(200, body, "text/plain") as url:
        yield url


async def test_non_metrics_peer_is_bad_payload(html_peer: str) -> None:
    async with VllmClient(html_peer, timeout=2) as client:
        for call in (client.metrics, client.version, client.models):
            with pytest.raises(BackendError) as caught:
                await call()
            assert caught.value.reason == "bad payload"
