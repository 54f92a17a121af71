"""The HTTP families of vLLM's API server, as prometheus-fastapi-instrumentator records them.

vLLM instruments its FastAPI app with the instrumentator's defaults (`metrics.default()`):
`http_requests_total` (method, status grouped as 2xx/4xx/5xx, handler), the request and
response size summaries by handler, and two latency histograms. Names, help texts, labels and
buckets follow trallnag/prometheus-fastapi-instrumentator v8.0.2 `metrics.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, Summary


@dataclass(frozen=True)
class HttpAnswer:
    """One answered request: its route template, method, status, seconds and body sizes."""

    handler: str
    method: str
    status: int
    seconds: float
    request_bytes: int
    response_bytes: int


class HttpMetrics:
    """The families prometheus-fastapi-instrumentator's `metrics.default()` registers on vLLM's
    API server (v8.0.2 `metrics.py`: names, help texts, labels, buckets), statuses grouped."""

    HIGHR_BUCKETS = (
        0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5,
        10, 30, 60,
    )  # fmt: skip

    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "http_requests", "Total number of requests by method, status and handler.",
            ("method", "status", "handler"), registry=registry,
        )  # fmt: skip
        sizes = "by handler. Only value of header is respected. Otherwise ignored. "
        self.in_size = Summary(
            "http_request_size_bytes", f"Content length of incoming requests {sizes}"
            "No percentile calculated. ", ("handler",), registry=registry,
        )  # fmt: skip
        self.out_size = Summary(
            "http_response_size_bytes", f"Content length of outgoing responses {sizes}"
            "No percentile calculated. ", ("handler",), registry=registry,
        )  # fmt: skip
        self.highr = Histogram(
            "http_request_duration_highr_seconds",
            "Latency with many buckets but no API specific labels. Made for more accurate "
            "percentile calculations. ", buckets=self.HIGHR_BUCKETS, registry=registry,
        )  # fmt: skip
        self.lowr = Histogram(
            "http_request_duration_seconds",
            "Latency with only few buckets by handler. Made to be only used if aggregation by "
            "handler is important. ", ("method", "handler"), buckets=(0.1, 0.5, 1),
            registry=registry,
        )  # fmt: skip

    def record(self, answer: HttpAnswer) -> None:
        status = f"{answer.status // 100}xx"
        self.total.labels(method=answer.method, status=status, handler=answer.handler).inc()
        self.in_size.labels(handler=answer.handler).observe(answer.request_bytes)
        self.out_size.labels(handler=answer.handler).observe(answer.response_bytes)
        self.highr.observe(answer.seconds)
        self.lowr.labels(method=answer.method, handler=answer.handler).observe(answer.seconds)
