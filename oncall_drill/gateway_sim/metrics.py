"""The gateway's Prometheus metrics, in a per-process registry (names fixed by the alert rules).

Exposed (prometheus_client adds `_total` to counters, `_bucket`/`_sum`/`_count` to histograms):

* `aigw_request_duration_seconds{route,level}` histogram, fine around 1–1.2 s (P95/P99 alerts);
* `aigw_llm_request_duration_seconds` histogram of end-to-end upstream LLM calls (P99 > 1.2 s);
* `aigw_vector_search_duration_seconds` histogram, fine around 0.2 s (P99.9 > 200 ms);
* `aigw_requests_total{code}`, `aigw_unavailable_responses_total` (503s),
  `aigw_prompt_rejections_total{reason}`, `aigw_cache_lookups_total{result=hit|miss}`;
* `aigw_degradation_level` gauge: the level the last request was served at.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from oncall_drill.gateway_sim.prompts import REASONS

CONTENT_TYPE = CONTENT_TYPE_LATEST

REQUEST_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.05, 1.1, 1.15, 1.2, 1.3, 1.5, 2.0, 2.5, 3.0, 5.0, 10.0, 30.0,
)  # fmt: skip
VECTOR_BUCKETS = (
    0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.125, 0.15, 0.175, 0.19, 0.2,
    0.21, 0.225, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
)  # fmt: skip


class GatewayMetrics:
    """All gateway metrics in one registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        self.request_duration = Histogram(
            "aigw_request_duration_seconds",
            "Time to answer a client request, by route and degradation level.",
            ["route", "level"],
            buckets=REQUEST_BUCKETS,
            registry=reg,
        )
        self.llm_duration = Histogram(
            "aigw_llm_request_duration_seconds",
            "End-to-end latency of calls to the LLM (vLLM) upstream, failures included.",
            buckets=REQUEST_BUCKETS,
            registry=reg,
        )
        self.vector_duration = Histogram(
            "aigw_vector_search_duration_seconds",
            "Latency of the vector-search (retrieval) step.",
            buckets=VECTOR_BUCKETS,
            registry=reg,
        )
        self.requests = Counter(
            "aigw_requests",
            "Client requests answered, by HTTP status code.",
            ["code"],
            registry=reg,
        )
        self.unavailable = Counter(
            "aigw_unavailable_responses",
            "Client requests answered 503 (service unavailable).",
            registry=reg,
        )
        self.rejections = Counter(
            "aigw_prompt_rejections", "Prompts rejected, by reason.", ["reason"], registry=reg
        )
        self.cache_lookups = Counter(
            "aigw_cache_lookups", "Response-cache lookups, by result.", ["result"], registry=reg
        )
        self.level = Gauge(
            "aigw_degradation_level",
            "Degradation level of the last request: 0 normal, 1 no RAG, 2 FAQ, 3 static.",
            registry=reg,
        )
        # Pre-create the label sets the alerts divide by, so rates exist from the start.
        for reason in REASONS:
            self.rejections.labels(reason=reason)
        for result in ("hit", "miss"):
            self.cache_lookups.labels(result=result)

    def render(self) -> bytes:
        """The exposition text."""
        return generate_latest(self.registry)
