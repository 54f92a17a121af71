"""The `/metrics` exposition of the simulated server, rendered by prometheus_client.

Names, types, help texts, labels and buckets follow vLLM's `PrometheusStatLogger`
(backends.md §1.3-§1.5): version "0.33" emits the 0.33.0 set; version "0.10" emits the 0.10.2
set, where deprecated names (`vllm:gpu_cache_usage_perc`, `vllm:gpu_prefix_cache_*`,
`vllm:time_per_output_token_seconds`) still appear next to their replacements. Every
`vllm:*` series carries `model_name` and `engine="0"`, except `vllm:cache_config_info`
(`engine` plus one label per cache setting) and `vllm:admission_rejections_total`
(`model_name`, `reason`). Each server process owns a `CollectorRegistry`, so several
simulators can live in one Python process (tests, the drill orchestrator).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from oncall_drill.vllm_sim.config import SimConfig
from oncall_drill.vllm_sim.engine import EngineState, FinishedRequest
from oncall_drill.vllm_sim.http_metrics import HttpAnswer, HttpMetrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)

#: Finish reasons pre-created at zero, per version (`FinishReason` grew after 0.10).
FINISH_REASONS = {
    "0.33": ("stop", "length", "abort", "error", "repetition"),
    "0.10": ("stop", "length", "abort"),
}
#: Handlers prometheus-fastapi-instrumentator leaves out of `http_requests_total`.
_UNINSTRUMENTED = frozenset({"/health", "/load", "/ping", "/version", "/metrics"})

BASE = ("model_name", "engine")
_NEW = frozenset({"0.33"})
_OLD = frozenset({"0.10"})
_ALL = _NEW | _OLD


def build_1_2_5_buckets(max_value: int) -> tuple[float, ...]:
    """vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up to `max_value`."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(float(value))
        exponent += 1


@dataclass(frozen=True)
class MetricSpec:
    """One vLLM metric: declared name, type, help, buckets, extra labels and versions."""

    name: str
    kind: str  # "gauge" | "counter" | "histogram"
    help: str
    versions: frozenset[str] = _ALL
    buckets: tuple[float, ...] = ()
    extra_labels: tuple[str, ...] = ()


def _histograms(
    buckets: tuple[float, ...], *rows: tuple[str, str] | tuple[str, str, frozenset[str]]
) -> tuple[MetricSpec, ...]:
    """Histograms that share one bucket layout: (name, help[, versions]) each, in this order."""
    return tuple(
        MetricSpec(name, "histogram", help, versions[0] if versions else _ALL, buckets)
        for name, help, *versions in rows
    )


def metric_specs(max_model_len: int) -> tuple[MetricSpec, ...]:
    """Every vLLM metric the simulator can emit; `versions` says where each appears."""
    tokens = build_1_2_5_buckets(max_model_len)
    hist = "histogram"
    return (
        MetricSpec("vllm:num_requests_running", "gauge",
                   "Number of requests in model execution batches."),
        MetricSpec("vllm:num_requests_waiting", "gauge",
                   "Number of requests waiting to be processed."),
        MetricSpec("vllm:num_requests_waiting_by_reason", "gauge",
                   "Number of waiting requests by reason. Reason labels: 'capacity' = waiting "
                   "for scheduling capacity; 'deferred' = deferred by transient constraints "
                   "(LoRA budget, KV transfer, blocked status). Sum of all reasons equals "
                   "vllm:num_requests_waiting.", _NEW, extra_labels=("reason",)),
        MetricSpec("vllm:engine_sleep_state", "gauge",
                   "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means "
                   "engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = "
                   "1 means sleep level 2.", _NEW, extra_labels=("sleep_state",)),
        MetricSpec("vllm:gpu_cache_usage_perc", "gauge",
                   "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
                   "vllm:kv_cache_usage_perc instead.", _OLD),
        MetricSpec("vllm:kv_cache_usage_perc", "gauge",
                   "KV-cache usage. 1 means 100 percent usage."),
        MetricSpec("vllm:gpu_prefix_cache_queries", "counter",
                   "GPU prefix cache queries, in terms of number of queried tokens."
                   "DEPRECATED: Use vllm:prefix_cache_queries instead.", _OLD),
        MetricSpec("vllm:gpu_prefix_cache_hits", "counter",
                   "GPU prefix cache hits, in terms of number of cached tokens."
                   "DEPRECATED: Use vllm:prefix_cache_hits instead.", _OLD),
        MetricSpec("vllm:prefix_cache_queries", "counter",
                   "Prefix cache queries, in terms of number of queried tokens."),
        MetricSpec("vllm:prefix_cache_hits", "counter",
                   "Prefix cache hits, in terms of number of cached tokens."),
        MetricSpec("vllm:num_preemptions", "counter",
                   "Cumulative number of preemption from the engine."),
        MetricSpec("vllm:prompt_tokens", "counter", "Number of prefill tokens processed."),
        MetricSpec("vllm:prompt_tokens_cached", "counter",
                   "Number of cached prompt tokens (local prefix cache hits).", _NEW),
        MetricSpec("vllm:generation_tokens", "counter",
                   "Number of generation tokens processed."),
        MetricSpec("vllm:request_success", "counter",
                   "Count of successfully processed requests.",
                   extra_labels=("finished_reason",)),
        MetricSpec("vllm:request_prompt_tokens", hist, "Number of prefill tokens processed.",
                   buckets=tokens),
        MetricSpec("vllm:request_generation_tokens", hist,
                   "Number of generation tokens processed.", buckets=tokens),
        MetricSpec("vllm:iteration_tokens_total", hist,
                   "Histogram of number of tokens per engine_step.",
                   buckets=ITERATION_TOKENS_BUCKETS),
        MetricSpec("vllm:request_max_num_generation_tokens", hist,
                   "Histogram of maximum number of requested generation tokens.",
                   buckets=tokens),
        MetricSpec("vllm:request_params_n", hist, "Histogram of the n request parameter.",
                   buckets=PARAMS_N_BUCKETS),
        MetricSpec("vllm:request_params_max_tokens", hist,
                   "Histogram of the max_tokens request parameter.", buckets=tokens),
        MetricSpec("vllm:request_prefill_kv_computed_tokens", hist,
                   "Histogram of new KV tokens computed during prefill (excluding cached "
                   "tokens).", _NEW, buckets=tokens),
        MetricSpec("vllm:time_to_first_token_seconds", hist,
                   "Histogram of time to first token in seconds.", buckets=TTFT_BUCKETS),
        *_histograms(
            ITL_BUCKETS,
            ("vllm:time_per_output_token_seconds",
             "Histogram of time per output token in seconds.DEPRECATED: Use "
             "vllm:inter_token_latency_seconds instead.", _OLD),
            ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
            ("vllm:request_time_per_output_token_seconds",
             "Histogram of time_per_output_token_seconds per request.", _NEW),
        ),
        *_histograms(
            REQUEST_LATENCY_BUCKETS,
            ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds."),
            ("vllm:request_queue_time_seconds",
             "Histogram of time spent in WAITING phase for request."),
            ("vllm:request_inference_time_seconds",
             "Histogram of time spent in RUNNING phase for request."),
            ("vllm:request_prefill_time_seconds",
             "Histogram of time spent in PREFILL phase for request."),
            ("vllm:request_decode_time_seconds",
             "Histogram of time spent in DECODE phase for request."),
        ),
        MetricSpec("vllm:request_num_preemptions", hist,
                   "Histogram of the number of times a request was preempted.", _NEW,
                   buckets=NUM_PREEMPTIONS_BUCKETS),
    )  # fmt: skip


def cache_config_labels(config: SimConfig) -> dict[str, str]:
    """Labels of `vllm:cache_config_info`: `str()` of CacheConfig fields, plus `engine`."""
    labels = {
        "block_size": str(config.block_size),
        "cache_dtype": "auto",
        "calculate_kv_scales": "False",
        "cpu_offload_gb": "0",
        "enable_prefix_caching": "True",
        "engine": "0",
        "gpu_memory_utilization": str(config.gpu_memory_utilization),
        "is_attention_free": "False",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(config.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "sliding_window": "None",
    }
    if config.metrics_version == "0.33":
        concurrency = config.kv_capacity_tokens / config.max_model_len
        labels |= {
            "kv_cache_size_tokens": str(config.kv_capacity_tokens),
            "kv_cache_max_concurrency": f"{concurrency:.2f}",
            "kv_cache_memory_bytes": "None",
            "kv_offloading_size": "None",
            "prefix_caching_hash_algo": "sha256",
        }
    else:
        labels |= {"prefix_caching_hash_algo": "builtin", "swap_space": "4"}
    return labels


class VllmMetrics:
    """A per-server registry of vLLM's metrics; implements the engine's `StatsObserver`."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._children: dict[str, Any] = {}
        self._families: dict[str, Any] = {}
        self._http = HttpMetrics(self.registry)
        base = {"model_name": config.served_model_name, "engine": "0"}
        self._base = base
        if config.disable_log_stats:
            return  # as in vLLM: no stat logger, so no vllm:* metrics at all
        version = config.metrics_version
        for spec in metric_specs(config.max_model_len):
            if version not in spec.versions:
                continue
            labels = (*BASE, *spec.extra_labels)
            family: Any
            if spec.kind == "gauge":
                family = Gauge(spec.name, spec.help, labels, registry=self.registry)
            elif spec.kind == "counter":
                family = Counter(spec.name, spec.help, labels, registry=self.registry)
            else:
                family = Histogram(
                    spec.name, spec.help, labels, buckets=spec.buckets, registry=self.registry
                )
            self._families[spec.name] = family
            if not spec.extra_labels:
                self._children[spec.name] = family.labels(**base)
        success = self._families["vllm:request_success"]
        for reason in FINISH_REASONS[version]:
            success.labels(finished_reason=reason, **base)
        if version == "0.33":
            for reason in ("capacity", "deferred"):
                self._families["vllm:num_requests_waiting_by_reason"].labels(reason=reason, **base)
            sleep = self._families["vllm:engine_sleep_state"]
            for sleep_state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
                sleep.labels(sleep_state=sleep_state, **base).set(value)
            rejections = Counter(
                "vllm:admission_rejections",
                "Number of admission attempts rejected by a queue limit, by reason.",
                ("model_name", "reason"),
                registry=self.registry,
            )
            for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
                rejections.labels(model_name=config.served_model_name, reason=reason)
        info_labels = cache_config_labels(config)
        info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            tuple(sorted(info_labels)),
            registry=self.registry,
        )
        info.labels(**info_labels).set(1)

    # ---- helpers --------------------------------------------------------------------------

    def _inc(self, name: str, amount: float = 1.0) -> None:
        child = self._children.get(name)
        if child is not None and amount > 0:
            child.inc(amount)

    def _observe(self, name: str, value: float, times: int = 1) -> None:
        child = self._children.get(name)
        if child is not None:
            for _ in range(times):
                child.observe(value)

    def _set(self, name: str, value: float) -> None:
        child = self._children.get(name)
        if child is not None:
            child.set(value)

    # ---- StatsObserver --------------------------------------------------------------------

    def on_scheduled(self, prompt_tokens: int, prefix_hit_tokens: int) -> None:
        """A request got its first prefill: prompt and prefix-cache counters."""
        self._inc("vllm:prompt_tokens", prompt_tokens)
        self._inc("vllm:prompt_tokens_cached", prefix_hit_tokens)
        for prefix in ("vllm:", "vllm:gpu_"):
            self._inc(f"{prefix}prefix_cache_queries", prompt_tokens)
            self._inc(f"{prefix}prefix_cache_hits", prefix_hit_tokens)
        self._observe("vllm:request_prefill_kv_computed_tokens", prompt_tokens - prefix_hit_tokens)

    def on_first_token(self, ttft: float) -> None:
        """A request's first token came out: vLLM observes TTFT then, not when it finishes (a
        request aborted after its first token is in TTFT; one aborted before is not)."""
        self._observe("vllm:time_to_first_token_seconds", ttft)

    def on_tokens(self, count: int, inter_token_latency: float | None) -> None:
        """Tokens generated for one sequence in one simulator tick: `count` vLLM output steps of
        one token each, so `count` inter-token latencies (vllm/v1/metrics/stats.py,
        IterationStats observes one per output step)."""
        self._inc("vllm:generation_tokens", count)
        if inter_token_latency is not None:
            self._observe("vllm:inter_token_latency_seconds", inter_token_latency, count)
            self._observe("vllm:time_per_output_token_seconds", inter_token_latency, count)

    def on_iteration(self, tokens: int) -> None:
        """Tokens produced by one engine step."""
        self._observe("vllm:iteration_tokens_total", tokens)

    def on_preemption(self) -> None:
        """A sequence was preempted because the KV cache was full."""
        self._inc("vllm:num_preemptions")

    def on_finished(self, request: FinishedRequest) -> None:
        """A request ended (stop, length or abort): the per-request histograms.

        An aborted request (its client went away) counts nowhere: vLLM declares
        `finished_reason="abort"` but never increments it, and leaves aborted requests out of
        the per-request histograms (vllm issues #55634, #31503)."""
        if request.finish_reason == "abort":
            return
        if "vllm:request_success" in self._families:
            self._families["vllm:request_success"].labels(
                finished_reason=request.finish_reason, **self._base
            ).inc()
        self._observe("vllm:request_prompt_tokens", request.prompt_tokens)
        self._observe("vllm:request_generation_tokens", request.generation_tokens)
        self._observe("vllm:request_max_num_generation_tokens", request.max_tokens)
        self._observe("vllm:request_params_max_tokens", request.max_tokens)
        self._observe("vllm:request_params_n", 1)
        self._observe("vllm:request_num_preemptions", request.num_preemptions)
        self._observe("vllm:e2e_request_latency_seconds", request.e2e)
        self._observe("vllm:request_queue_time_seconds", request.queue)
        self._observe("vllm:request_inference_time_seconds", request.inference)
        self._observe("vllm:request_prefill_time_seconds", request.prefill)
        self._observe("vllm:request_decode_time_seconds", request.decode)
        if request.generation_tokens > 1:
            tpot = request.decode / (request.generation_tokens - 1)
            self._observe("vllm:request_time_per_output_token_seconds", tpot)

    def on_http(self, answer: HttpAnswer) -> None:
        """One answered HTTP request, as prometheus-fastapi-instrumentator records it."""
        if answer.handler not in _UNINSTRUMENTED and not answer.handler.startswith("/drill"):
            self._http.record(answer)

    # ---- exposition -----------------------------------------------------------------------

    def render(self, state: EngineState) -> bytes:
        """The exposition text, with the gauges set from `state` first."""
        self._set("vllm:num_requests_running", state.running)
        self._set("vllm:num_requests_waiting", state.waiting)
        self._set("vllm:kv_cache_usage_perc", state.kv_usage)
        self._set("vllm:gpu_cache_usage_perc", state.kv_usage)
        by_reason = self._families.get("vllm:num_requests_waiting_by_reason")
        if by_reason is not None:
            by_reason.labels(reason="capacity", **self._base).set(state.waiting)
        payload: bytes = generate_latest(self.registry)
        return payload
