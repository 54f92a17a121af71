"""`/metrics` of a running simulator, read with prometheus_client's parser (never by hand)."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest
from prometheus_client.samples import Sample

from oncall_drill.vllm_sim import Engine, SimConfig
from oncall_drill.vllm_sim.engine import FinishedRequest
from oncall_drill.vllm_sim.metrics import (
    ITL_BUCKETS,
    NUM_PREEMPTIONS_BUCKETS,
    REQUEST_LATENCY_BUCKETS,
    TTFT_BUCKETS,
    VllmMetrics,
)
from tests.drill.vllm.conftest import Starter
from tests.drill.vllm.helpers import MODEL, completion_body, families, metrics_text, sample_value

# Family names as the parser reports them: counters lose their `_total` suffix.
COMMON = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:prefix_cache_queries": "counter",
    "vllm:prefix_cache_hits": "counter",
    "vllm:num_preemptions": "counter",
    "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter",
    "vllm:request_success": "counter",
    "vllm:request_prompt_tokens": "histogram",
    "vllm:request_generation_tokens": "histogram",
    "vllm:iteration_tokens_total": "histogram",
    "vllm:request_params_n": "histogram",
    "vllm:request_params_max_tokens": "histogram",
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_queue_time_seconds": "histogram",
    "vllm:request_inference_time_seconds": "histogram",
    "vllm:request_prefill_time_seconds": "histogram",
    "vllm:request_decode_time_seconds": "histogram",
    "vllm:cache_config_info": "gauge",
    # The API server's, from prometheus-fastapi-instrumentator's defaults.
    "http_requests": "counter",
    "http_request_size_bytes": "summary",
    "http_response_size_bytes": "summary",
    "http_request_duration_highr_seconds": "histogram",
    "http_request_duration_seconds": "histogram",
}
ONLY_NEW = {
    "vllm:num_requests_waiting_by_reason": "gauge",
    "vllm:engine_sleep_state": "gauge",
    "vllm:request_time_per_output_token_seconds": "histogram",
    "vllm:request_num_preemptions": "histogram",
    "vllm:admission_rejections": "counter",
}
ONLY_OLD = {
    "vllm:gpu_cache_usage_perc": "gauge",
    "vllm:gpu_prefix_cache_queries": "counter",
    "vllm:gpu_prefix_cache_hits": "counter",
    "vllm:time_per_output_token_seconds": "histogram",
}
BUCKETS = {
    "vllm:time_to_first_token_seconds": TTFT_BUCKETS,
    "vllm:inter_token_latency_seconds": ITL_BUCKETS,
    "vllm:e2e_request_latency_seconds": REQUEST_LATENCY_BUCKETS,
    "vllm:request_num_preemptions": NUM_PREEMPTIONS_BUCKETS,
}
NO_ENGINE_LABEL = {"vllm:cache_config_info", "vllm:admission_rejections"}


def _le_values(samples: list[Sample], name: str) -> list[float]:
    return [float(s.labels["le"]) for s in samples if s.name == f"{name}_bucket"]


@pytest.mark.parametrize(
    ("version", "present", "absent", "reported"),
    [
        ("0.33", COMMON | ONLY_NEW, ONLY_OLD, "0.33.0"),
        ("0.10", COMMON | ONLY_OLD, ONLY_NEW, "0.10.2"),
    ],
)
def test_names_types_labels_and_buckets(
    sim_factory: Starter,
    version: str,
    present: dict[str, str],
    absent: dict[str, str],
    reported: str,
) -> None:
    sim = sim_factory("--metrics-version", version, "--speed", "20", "--kv-capacity-tokens", "4096")
    response = httpx.post(
        f"{sim.url}/v1/completions", json=completion_body(7, prompt="a b c d"), timeout=10
    )
    assert response.status_code == 200
    assert httpx.get(f"{sim.url}/version", timeout=5).json() == {"version": reported}
    scrape = httpx.get(f"{sim.url}/metrics", timeout=5)
    assert scrape.headers["content-type"].startswith("text/plain")
    text = scrape.text
    found = families(text)
    for name, kind in present.items():
        assert name in found, f"missing {name}"
        assert found[name][0] == kind, name
    for name in absent:
        assert name not in found, f"unexpected {name} in {version}"
    for name, (_, samples) in found.items():
        if not name.startswith("vllm:") or name.startswith(tuple(NO_ENGINE_LABEL)):
            continue  # including their *_created families
        for sample in samples:
            assert sample.labels["model_name"] == MODEL, sample
            assert sample.labels["engine"] == "0", sample
    for name, buckets in BUCKETS.items():
        if name in found:
            assert _le_values(found[name][1], name) == [*buckets, float("inf")], name
    assert sample_value(text, "vllm:num_preemptions_total") == 0
    assert sample_value(text, "vllm:generation_tokens_total") == 7
    assert sample_value(text, "vllm:prompt_tokens_total") == 4
    assert sample_value(text, "vllm:request_success_total", finished_reason="length") == 1
    assert sample_value(text, "vllm:e2e_request_latency_seconds_count") == 1
    assert sample_value(text, "vllm:time_to_first_token_seconds_count") == 1
    assert sample_value(text, "vllm:inter_token_latency_seconds_count") == 6
    handler = {"handler": "/v1/completions"}
    assert sample_value(text, "http_requests_total", **handler, status="2xx", method="POST") == 1
    assert sample_value(text, "http_request_size_bytes_count", **handler) == 1
    assert sample_value(text, "http_response_size_bytes_sum", **handler) > 0
    assert sample_value(text, "http_request_duration_seconds_count", **handler) == 1
    assert sample_value(text, "http_request_duration_highr_seconds_count") == 1  # not /version
    assert 0 <= sample_value(text, "vllm:kv_cache_usage_perc") <= 1
    (info,) = found["vllm:cache_config_info"][1]
    assert info.value == 1
    assert info.labels["engine"] == "0"
    assert info.labels["block_size"] == "16"
    assert info.labels["num_gpu_blocks"] == str(4096 // 16)
    if version == "0.33":
        assert info.labels["kv_cache_size_tokens"] == "4096"
        assert "process_cpu_seconds_total" in text


def test_kv_usage_is_a_fraction_while_generating(sim_factory: Starter) -> None:
    sim = sim_factory("--kv-capacity-tokens", "1000", "--speed", "1")
    with httpx.stream(
        "POST", f"{sim.url}/v1/completions", json=completion_body(500, stream=True), timeout=30
    ) as response:
        lines = response.iter_lines()
        for _ in range(20):  # a few tokens in: the sequence now holds KV slots
            next(lines)
        text = metrics_text(sim.url)
        assert sample_value(text, "vllm:num_requests_running") == 1
        usage = sample_value(text, "vllm:kv_cache_usage_perc")
        assert 0.005 < usage < 0.5


def test_disable_log_stats_removes_every_vllm_metric(sim_factory: Starter) -> None:
    sim = sim_factory("--disable-log-stats")
    found = families(metrics_text(sim.url))
    assert not [name for name in found if name.startswith("vllm:")]
    assert "process_cpu_seconds" in found


def test_aborted_requests_count_nowhere_but_ttft_already_observed() -> None:
    """vLLM declares finished_reason="abort" but never increments it, and leaves aborted
    requests out of the per-request histograms (vllm issues #55634, #31503)."""
    metrics = VllmMetrics(SimConfig(model="m", max_model_len=4096))
    metrics.on_first_token(0.3)
    done = FinishedRequest(
        finish_reason="abort", prompt_tokens=10, generation_tokens=4, max_tokens=100,
        num_preemptions=0, e2e=9.0, queue=0.1, ttft=0.3, prefill=0.2, decode=8.7, inference=8.9,
    )  # fmt: skip
    metrics.on_finished(done)
    text = metrics.render(Engine(SimConfig(model="m", max_model_len=4096)).state()).decode()
    assert sample_value(text, "vllm:request_success_total", finished_reason="abort") == 0
    assert sample_value(text, "vllm:e2e_request_latency_seconds_count") == 0
    assert sample_value(text, "vllm:request_queue_time_seconds_count") == 0
    assert sample_value(text, "vllm:time_to_first_token_seconds_count") == 1
    metrics.on_finished(replace(done, finish_reason="stop"))
    text = metrics.render(Engine(SimConfig(model="m", max_model_len=4096)).state()).decode()
    assert sample_value(text, "vllm:request_success_total", finished_reason="stop") == 1
    assert sample_value(text, "vllm:e2e_request_latency_seconds_count") == 1
    assert sample_value(text, "vllm:time_to_first_token_seconds_count") == 1  # not again
