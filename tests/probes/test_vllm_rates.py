"""`vllm.rates` against a real Prometheus scraping vLLM simulators of both metric versions,
and the PromQL it sends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from oncall.errors import BackendError
from oncall.probes.context import ProbeContext
from oncall.probes.vllm_rates import RATES, RatesParams, rate_queries
from tests.drill.vllm.helpers import SimProcess, start_sim, stop_sim
from tests.harness.faults import refused_port
from tests.harness.processes import eventually
from tests.harness.servers import RunningServer
from tests.probes.test_vllm_probes import BASE_ARGS, MAX_SEQS, complete, run, settings


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[tuple[SimProcess, SimProcess]]:
    """A 0.33 and a 0.10 simulator, both fast; always stopped."""
    started: list[SimProcess] = []
    try:
        for version in ("0.33", "0.10"):
            args = (*BASE_ARGS, "--speed", "10", "--metrics-version", version)
            started.append(start_sim(tmp_path, *args))
        yield started[0], started[1]
    finally:
        for sim in started:
            stop_sim(sim)


def test_rate_queries() -> None:
    queries = rate_queries(RatesParams(window="5m", quantile=0.9))
    assert queries["tokens_per_s"] == "sum(rate(vllm:generation_tokens_total[5m]))"
    assert queries["kv_cache_usage"] == "max(vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc)"
    assert queries["itl_s"] == (
        "histogram_quantile(0.9, sum by (le) (rate(vllm:inter_token_latency_seconds_bucket[5m])"
        " or rate(vllm:time_per_output_token_seconds_bucket[5m])))"
    )
    selected = rate_queries(RatesParams(selector='namespace="ai"'))
    assert selected["running"] == 'sum(vllm:num_requests_running{namespace="ai"})'
    assert selected["ttft_s"] == (
        "histogram_quantile(0.99, sum by (le) "
        '(rate(vllm:time_to_first_token_seconds_bucket{namespace="ai"}[1m])))'
    )
    with pytest.raises(ValidationError):
        RatesParams(window="1 minute")


async def test_rates_through_prometheus(
    sims: tuple[SimProcess, SimProcess], start_prometheus: Callable[..., RunningServer]
) -> None:
    sim, sim10 = sims
    # `pod` labels as Kubernetes discovery would set them: busiest_pod names one.
    static = [
        {"targets": [f"127.0.0.1:{sim.port}"], "labels": {"pod": "vllm-033"}},
        {"targets": [f"127.0.0.1:{sim10.port}"], "labels": {"pod": "vllm-010"}},
    ]
    prometheus = start_prometheus(scrape_configs=[{"job_name": "vllm", "static_configs": static}])
    names = ("tokens_per_s", "running", "waiting", "kv_cache_usage", "ttft_s", "itl_s", "e2e_s")
    seen: dict[str, Any] = {}
    async with ProbeContext(settings(sim.url, prometheus=prometheus.url)) as ctx:
        idle = await run(ctx, "vllm.rates", selector='job="vllm"')
        assert set(idle) == {*names, "preemptions_per_s", "busiest_pod", "stalled_pods", "absent"}

        async def rated() -> bool:
            await complete(sim.url, MAX_SEQS, 100)
            seen.update(await run(ctx, "vllm.rates", window="30s", selector='job="vllm"'))
            return all(seen[name] is not None for name in names) and seen["tokens_per_s"] > 0

        await eventually(rated, within=30, what="Prometheus to rate the simulator's load")
        nothing = await run(ctx, "vllm.rates", selector='job="nope"')
    assert seen["preemptions_per_s"] == 0.0
    assert seen["busiest_pod"] in {"vllm-033", "vllm-010"}
    assert 0.0 <= seen["kv_cache_usage"] <= 1.0
    assert 0 < seen["itl_s"] <= seen["e2e_s"]
    assert seen["absent"] == {}  # every fact has series: none is reported missing
    assert nothing.pop("stalled_pods") == []  # no series: no pod, not a stalled one
    absent = nothing.pop("absent")
    assert nothing == dict.fromkeys(nothing)  # no series: every fact None, not 0
    # ... and each is said to be missing, with its metric and the selector that emptied it.
    assert set(absent) == {*nothing, "stalled_pods"}
    assert absent["kv_cache_usage"] == (
        'no vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc series matching {job="nope"}'
    )


async def test_rates_prometheus_down() -> None:
    prometheus = f"http://127.0.0.1:{refused_port()}"
    async with ProbeContext(settings(prometheus=prometheus)) as ctx:
        with pytest.raises(BackendError) as caught:
            await run(ctx, "vllm.rates")
        text = RATES.equivalent(ctx, RatesParams())
    assert caught.value.reason == "refused"
    assert text.splitlines()[0] == (
        f"curl -s {prometheus}/api/v1/query --data-urlencode "
        "'query=sum(rate(vllm:generation_tokens_total[1m]))'"
    )
