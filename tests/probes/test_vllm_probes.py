"""vLLM probes against the vLLM simulator (and a real Prometheus scraping it), plus the
bucket arithmetic of `vllm.metrics` and the PromQL of `vllm.rates`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr, ValidationError

from oncall.backends.vllm import VllmClient, bucket_increase
from oncall.errors import BackendError
from oncall.probes import vllm as probes
from oncall.probes.base import Facts, Probe
from oncall.probes.context import ProbeContext
from oncall.settings.model import PrometheusSettings, Settings, VllmSettings
from tests.drill.vllm.helpers import SimProcess, running_sim, sim_factory
from tests.harness.faults import refused_port, silent_listener
from tests.harness.waiting import eventually

MODEL = "qwen"
MAX_SEQS = 4
BASE_ARGS = ("--model", MODEL, "--max-num-seqs", str(MAX_SEQS), "--kv-capacity-tokens", "16384")
API_KEY = "vllm-s3cret-key"
#: A bound that only guards against a hang (the probes' own timeout is 0.5 s here).
HANG_GUARD = 30
INF = math.inf
BY_NAME: dict[str, Probe[Any]] = {probe.name: probe for probe in probes.PROBES}
SERVER_FACTS = {
    "url", "error", "metric_names", "running", "waiting", "kv_cache_usage", "preemptions_total",
    "tokens_per_s", "ttft_s", "itl_s", "e2e_s", "quantile_window", "missing", "stalled",
}  # fmt: skip


def settings(
    *urls: str, timeout: float = 3.0, api_key: str | None = None, prometheus: str | None = None
) -> Settings:
    key = SecretStr(api_key) if api_key is not None else None
    vllm = VllmSettings(urls=list(urls), timeout=timeout, api_key=key)
    if prometheus is None:
        return Settings(vllm=vllm)
    return Settings(vllm=vllm, prometheus=PrometheusSettings(url=prometheus, timeout=3.0))


async def run(ctx: ProbeContext, name: str, **params: Any) -> Facts:
    probe = BY_NAME[name]
    facts = await probe.run(ctx, probe.params(**params))
    json.dumps(facts, allow_nan=False)  # JSON-able, and no NaN sneaks through
    return facts


async def probe(name: str, *urls: str, **params: Any) -> Facts:
    async with ProbeContext(settings(*urls)) as ctx:
        return await run(ctx, name, **params)


def dead_url() -> str:
    return f"http://127.0.0.1:{refused_port()}"


@pytest.fixture(scope="module")
def sim33(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    with running_sim(tmp_path_factory.mktemp("sim33"), *BASE_ARGS, "--speed", "10") as sim:
        yield sim


@pytest.fixture(scope="module")
def sim10(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    directory = tmp_path_factory.mktemp("sim10")
    with running_sim(directory, *BASE_ARGS, "--speed", "10", "--metrics-version", "0.10") as sim:
        yield sim


@pytest.fixture
def own_sims(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    """Simulators a test may break or load; all are stopped afterwards."""
    with sim_factory(tmp_path, *BASE_ARGS) as factory:
        yield factory


async def complete(url: str, count: int, max_tokens: int, api_key: str | None = None) -> None:
    """`count` concurrent completions of exactly `max_tokens` tokens each."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with httpx.AsyncClient(base_url=url, timeout=60, trust_env=False) as http:
        body = {"model": MODEL, "max_tokens": max_tokens, "ignore_eos": True}
        responses = await asyncio.gather(
            *(
                http.post("/v1/completions", json={**body, "prompt": f"hi {i}"}, headers=headers)
                for i in range(count)
            )
        )
    assert [r.status_code for r in responses] == [200] * count


@contextlib.asynccontextmanager
async def load(url: str, count: int, max_tokens: int) -> AsyncIterator[None]:
    """Requests in flight for the duration of the block; cancelled at its end."""
    task = asyncio.create_task(complete(url, count, max_tokens))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def fault(sim: SimProcess, name: str) -> None:
    async with httpx.AsyncClient(base_url=sim.url, timeout=5, trust_env=False) as drill:
        response = await drill.post("/drill/fault", json={"fault": name})
        response.raise_for_status()


def test_every_probe_is_named_and_documented() -> None:
    assert set(BY_NAME) == {"vllm.health", "vllm.models", "vllm.metrics", "vllm.rates"}
    for one in probes.PROBES:
        assert one.run.__doc__ and "curl" in one.run.__doc__, one.name


# ---- vllm.health / vllm.models -------------------------------------------------------------


async def test_health_and_models(sim33: SimProcess, sim10: SimProcess) -> None:
    health = await probe("vllm.health", sim33.url, sim10.url)
    assert (health["healthy_count"], health["total"], health["all_healthy"]) == (2, 2, True)
    first, second = health["servers"]
    assert first["url"] == sim33.url and first["version"].startswith("0.33.")
    assert second["url"] == sim10.url and second["version"].startswith("0.10.")
    for server in health["servers"]:
        assert server["healthy"] and server["status"] == 200 and server["error"] is None
        assert 0 <= server["latency_ms"] < 3000
    models = await probe("vllm.models", sim33.url, sim10.url)
    assert models == {
        "servers": [
            {"url": sim33.url, "models": [MODEL], "error": None},
            {"url": sim10.url, "models": [MODEL], "error": None},
        ],
        "models": [MODEL],
    }


async def test_two_servers_one_dead(sim33: SimProcess) -> None:
    dead = dead_url()
    health = await probe("vllm.health", sim33.url, dead)
    assert (health["healthy_count"], health["total"], health["all_healthy"]) == (1, 2, False)
    assert health["servers"][1] == {
        "url": dead,
        "healthy": False,
        "status": None,
        "version": None,
        "latency_ms": None,
        "error": "refused",
    }
    models = await probe("vllm.models", sim33.url, dead)
    assert models["models"] == [MODEL]
    assert models["servers"][1] == {"url": dead, "models": [], "error": "refused"}


async def test_no_server_answering_raises() -> None:
    one, two = dead_url(), dead_url()
    for name in ("vllm.health", "vllm.models", "vllm.metrics"):
        with pytest.raises(BackendError) as caught:
            await probe(name, one)
        assert (caught.value.reason, caught.value.target) == ("refused", one)
        with pytest.raises(BackendError) as both:
            await probe(name, one, two)
        assert both.value.reason == "refused"
        assert one in both.value.target and two in both.value.target
    async with ProbeContext(settings()) as ctx:
        with pytest.raises(BackendError) as empty:
            await run(ctx, "vllm.health")
    assert empty.value.reason == "not configured"


@pytest.mark.parametrize(("version", "dead_status"), [("0.33", 503), ("0.10", 500)])
async def test_dead_engine_is_unhealthy(
    own_sims: Callable[..., SimProcess], sim33: SimProcess, version: str, dead_status: int
) -> None:
    sim = own_sims("--metrics-version", version, "--death-exit-seconds", "60")
    await fault(sim, "engine-death")
    facts = await probe("vllm.health", sim.url, sim33.url)
    dead = facts["servers"][0]
    assert (dead["healthy"], dead["status"], dead["error"]) == (
        False,
        dead_status,
        f"http {dead_status}",
    )
    assert (facts["healthy_count"], facts["all_healthy"]) == (1, False)
    alone = await probe("vllm.health", sim.url)  # it answered: no error, just unhealthy
    assert (alone["healthy_count"], alone["total"]) == (0, 1)


async def test_a_hung_server_is_a_timeout_and_the_others_still_count(
    own_sims: Callable[..., SimProcess], sim33: SimProcess
) -> None:
    """A server that accepts and never answers (a hung engine, a silent socket) is the error
    `timeout` in the facts, next to the server that answered; alone, the probe raises a
    BackendError with reason `timeout`. `HANG_GUARD` only turns a hang into a clear failure:
    the 0.5 s timeout is what ends each request (the reason says so), not a timing assert."""
    hung = own_sims()
    await fault(hung, "hang")
    with silent_listener() as port:
        silent = f"http://127.0.0.1:{port}"
        async with ProbeContext(settings(hung.url, silent, sim33.url, timeout=0.5)) as ctx:
            async with asyncio.timeout(HANG_GUARD):
                facts = await run(ctx, "vllm.health")
            assert [s["error"] for s in facts["servers"]] == ["timeout", "timeout", None]
            assert [s["healthy"] for s in facts["servers"]] == [False, False, True]
            assert facts["healthy_count"] == 1
            async with asyncio.timeout(HANG_GUARD):
                metrics = await run(ctx, "vllm.metrics", interval=0)
            assert [s["error"] for s in metrics["servers"]] == ["timeout", "timeout", None]
            assert (metrics["answered"], metrics["total"]) == (1, 3)
        async with ProbeContext(settings(hung.url, timeout=0.5)) as ctx:
            with pytest.raises(BackendError) as caught:
                async with asyncio.timeout(HANG_GUARD):
                    await run(ctx, "vllm.health")
            assert caught.value.reason == "timeout"
    await fault(hung, "none")


async def test_api_key_is_used_and_never_shown(own_sims: Callable[..., SimProcess]) -> None:
    sim = own_sims("--api-key", API_KEY)
    async with ProbeContext(settings(sim.url, api_key=API_KEY)) as ctx:
        everything = [
            await run(ctx, name, **({"interval": 0} if name == "vllm.metrics" else {}))
            for name in ("vllm.health", "vllm.models", "vllm.metrics")
        ]
        texts = [
            one.equivalent(ctx, one.params()) for one in BY_NAME.values() if one.backend == "vllm"
        ]
    assert everything[1]["models"] == [MODEL]
    assert API_KEY not in json.dumps(everything)
    assert all(API_KEY not in text for text in texts)
    assert texts[1] == f'curl -s -H "Authorization: Bearer $VLLM_API_KEY" {sim.url}/v1/models'
    with pytest.raises(BackendError) as caught:
        await probe("vllm.models", sim.url)
    assert caught.value.reason == "auth"


# ---- vllm.metrics --------------------------------------------------------------------------


async def test_metrics_idle_single_scrape(sim33: SimProcess) -> None:
    facts = await probe("vllm.metrics", sim33.url, interval=0)
    (server,) = facts["servers"]
    assert set(server) == SERVER_FACTS
    assert server["error"] is None and server["metric_names"] == "0.33"
    assert facts["metric_names"] == "0.33"
    assert facts["missing"] == [] and server["missing"] == []
    assert facts["tokens_per_s"] is None  # one scrape: no rate
    assert 0 <= facts["running"] <= MAX_SEQS
    assert 0.0 <= facts["kv_cache_usage"] <= 1.0
    assert facts["preemptions_total"] >= 0
    assert (facts["answered"], facts["total"]) == (1, 1)


async def test_metrics_under_load(own_sims: Callable[..., SimProcess]) -> None:
    """Four running, four queued, tokens flowing; nothing finishes within the interval."""
    sim = own_sims("--speed", "1")
    async with ProbeContext(settings(sim.url)) as ctx, load(sim.url, 2 * MAX_SEQS, 2000):

        async def all_queued() -> bool:
            facts = await run(ctx, "vllm.metrics", interval=0)
            return (facts["running"], facts["waiting"]) == (MAX_SEQS, MAX_SEQS)

        await eventually(all_queued, within=10, what="4 running and 4 waiting")
        facts = await run(ctx, "vllm.metrics", interval=0.5, quantile=0.5)
    assert (facts["running"], facts["waiting"]) == (MAX_SEQS, MAX_SEQS)
    assert facts["tokens_per_s"] > 0
    assert facts["servers"][0]["tokens_per_s"] == facts["tokens_per_s"]
    assert 0.0 < facts["kv_cache_usage"] <= 1.0
    # Inter-token latencies are observed per token, so the interval has its own; TTFT was
    # observed when each running request got its first token, before the interval (as vLLM
    # does), so only since start; e2e when a request finishes, and none has.
    assert facts["quantile_windows"] == {
        "ttft_s": "since start", "itl_s": "interval", "e2e_s": None,
    }  # fmt: skip
    assert facts["quantile_window"] == "mixed"
    assert facts["itl_s"] is not None and facts["itl_s"] > 0
    assert facts["ttft_s"] is not None and facts["e2e_s"] is None


async def test_metrics_quantiles_since_start_when_idle(sim33: SimProcess) -> None:
    await complete(sim33.url, 2 * MAX_SEQS, 20)
    facts = await probe("vllm.metrics", sim33.url, interval=0.2)
    assert facts["tokens_per_s"] == 0.0  # idle: counted, and nothing generated
    assert facts["quantile_window"] == "since start"
    assert set(facts["quantile_windows"].values()) == {"since start"}
    async with VllmClient(sim33.url, timeout=3) as client:
        scraped = (await client.metrics()).models[MODEL]
    assert scraped.ttft is not None and scraped.itl is not None and scraped.e2e is not None
    assert facts["ttft_s"] == pytest.approx(scraped.ttft.p99)
    assert facts["itl_s"] == pytest.approx(scraped.itl.p99)
    assert facts["e2e_s"] == pytest.approx(scraped.e2e.p99)


async def test_metrics_over_two_versions_and_a_dead_server(
    sim33: SimProcess, sim10: SimProcess
) -> None:
    dead = dead_url()
    facts = await probe("vllm.metrics", sim33.url, sim10.url, dead, interval=0.1)
    assert facts["metric_names"] == "mixed"
    assert [s["metric_names"] for s in facts["servers"]] == ["0.33", "0.10", None]
    assert (facts["answered"], facts["total"]) == (2, 3)
    assert facts["servers"][2]["error"] == "refused"
    assert set(facts["servers"][2]) == SERVER_FACTS
    answered = facts["servers"][:2]
    assert facts["running"] == sum(s["running"] for s in answered)
    assert facts["waiting"] == sum(s["waiting"] for s in answered)
    assert facts["kv_cache_usage"] == max(s["kv_cache_usage"] for s in answered)
    assert facts["missing"] == []


async def test_disable_log_stats_lists_every_fact_missing(
    own_sims: Callable[..., SimProcess],
) -> None:
    sim = own_sims("--disable-log-stats")
    facts = await probe("vllm.metrics", sim.url, interval=0.1)
    assert facts["missing"] == list(probes.PROBE_FACT.values())
    assert facts["metric_names"] == "unknown"
    assert facts["running"] is None and facts["tokens_per_s"] is None
    assert facts["quantile_window"] is None


def test_bucket_delta_and_window() -> None:
    before = {0.1: 2.0, 1.0: 4.0, INF: 4.0}
    after = {0.1: 2.0, 1.0: 8.0, INF: 10.0}
    assert bucket_increase(before, after) == {0.1: 0.0, 1.0: 4.0, INF: 6.0}
    assert bucket_increase(after, before) == before  # counter reset: all of the new counts
    assert bucket_increase(None, after) == after
    assert bucket_increase(before, None) is None
    # Observations in between: the quantile of the increase (4 of 6 at <= 1.0).
    value, window = probes._quantile(0.5, [bucket_increase(before, after)], [after])
    assert window == "interval" and value == pytest.approx(0.1 + 0.9 * 3 / 4)
    # None in between: the totals since start.
    value, window = probes._quantile(0.5, [bucket_increase(after, after)], [after])
    assert window == "since start" and value == pytest.approx(0.1 + 0.9 * 3 / 6)
    assert probes._quantile(0.5, [], [None]) == (None, None)
    # Servers' buckets add up, as sum by (le) does.
    value, window = probes._quantile(0.75, [before, before], [])  # rank 6 of 8
    assert window == "interval" and value == pytest.approx(0.1 + 0.9 * 2 / 4)
    assert probes._window_of(["interval", None, "since start"]) == "mixed"
    assert probes._window_of([None, None]) is None


def test_metrics_params_are_checked() -> None:
    with pytest.raises(ValidationError):
        probes.MetricsParams(interval=-1)
    with pytest.raises(ValidationError):
        probes.MetricsParams(quantile=1.5)
    with pytest.raises(ValidationError):
        probes.MetricsParams(intervall=1)  # type: ignore[call-arg]


def test_vllm_equivalents() -> None:
    ctx = ProbeContext(settings("http://127.0.0.1:8000/", "http://127.0.0.1:8001"))
    health = BY_NAME["vllm.health"]
    assert health.equivalent(ctx, health.params()).splitlines() == [
        f"curl -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{port}/health; "
        f"curl -s http://127.0.0.1:{port}/version"
        for port in (8000, 8001)
    ]
    models = BY_NAME["vllm.models"]
    assert models.equivalent(ctx, models.params()) == (
        "curl -s http://127.0.0.1:8000/v1/models\ncurl -s http://127.0.0.1:8001/v1/models"
    )
    metrics = BY_NAME["vllm.metrics"]
    assert metrics.equivalent(ctx, metrics.params(interval=2)).splitlines()[0] == (
        "curl -s http://127.0.0.1:8000/metrics; sleep 2; curl -s http://127.0.0.1:8000/metrics"
    )
    assert metrics.equivalent(ctx, metrics.params(interval=0)).splitlines()[1] == (
        "curl -s http://127.0.0.1:8001/metrics"
    )
