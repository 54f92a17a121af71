"""`vllm.rates` against a real Prometheus scraping vLLM simulators of both metric versions,
and the PromQL it sends."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from oncall.errors import BackendError
from oncall.probes.context import ProbeContext
from oncall.probes.vllm_rates import RATES, RatesParams, rate_queries
from tests.alerts.test_rule_packs import promtool
from tests.drill.vllm.helpers import SimProcess, start_sim, stop_sim
from tests.harness.faults import refused_port
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually
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
        " or (rate(vllm:time_per_output_token_seconds_bucket[5m]) unless on (job, instance)"
        " rate(vllm:inter_token_latency_seconds_bucket[5m]))))"
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


#: A vLLM 0.10-0.12 server (both families; here the older one with other bucket bounds, as a
#: user measured them) and an older server (the older family only): (family, instance,
#: {le: increase a minute}), one sample a minute.
_ITL, _TPOT = "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"
_BOTH_FAMILIES = (
    (_ITL, "a:8000", {"0.05": 80, "0.075": 100, "+Inf": 100}),
    (_TPOT, "a:8000", {"0.06": 100, "+Inf": 100}),
    (_TPOT, "b:8000", {"0.05": 80, "0.075": 100, "+Inf": 100}),
)


def _expr_test(expr: str, value: float) -> dict[str, Any]:
    """A promtool unit-test file: `expr` over the series above is `value` at 10m."""
    series = [
        {"series": f'{family}_bucket{{job="vllm",instance="{instance}",le="{le}"}}',
         "values": f"0+{per_minute}x10"}
        for family, instance, buckets in _BOTH_FAMILIES
        for le, per_minute in buckets.items()
    ]  # fmt: skip
    check = {  # in 1/10000 s, rounded: the interpolation's float error is not the point
        "expr": f"round(({expr}) * 10000)",
        "eval_time": "10m",
        "exp_samples": [{"labels": "{}", "value": round(value * 10000)}],
    }
    return {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [check]}],
    }


def test_itl_reads_one_family_per_server(tmp_path: Path) -> None:
    """Server a's inter-token latency and server b's older family, never a's older one: the
    P90 (rank 180 of 200) is in (0.05, 0.075], 0.05 + 0.025 * 20 / 40 = 0.0625. With a plain
    `or`, a's le 0.06 bucket of the other family joins the sum and moves it to 0.0675."""
    query = rate_queries(RatesParams(window="5m", quantile=0.9))["itl_s"]
    merged = (
        f"histogram_quantile(0.9, sum by (le) (rate({_ITL}_bucket[5m])"
        f" or rate({_TPOT}_bucket[5m])))"
    )
    test = tmp_path / "itl.test.yaml"
    for expr, passes in ((query, True), (merged, False)):
        test.write_text(yaml.safe_dump(_expr_test(expr, 0.0625)))
        result = subprocess.run(
            [promtool(), "test", "rules", str(test)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        # The probe's query reads 0.0625 s; the plain `or` of both families does not.
        assert (result.returncode == 0) == passes, result.stdout + result.stderr
