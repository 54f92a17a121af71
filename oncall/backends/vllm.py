"""vLLM OpenAI-compatible server client (httpx, async): health, version, models, /metrics facts.

Curl equivalents (backends.md §1.1; only `/v1/*` needs the API key):

    curl -s -o /dev/null -w '%{http_code}' http://VLLM:8000/health  # 200; 503 (0.10: 500) dead
    curl -s http://VLLM:8000/version                                 # {"version": "0.33.0"}
    curl -s -H 'Authorization: Bearer KEY' http://VLLM:8000/v1/models
    curl -s http://VLLM:8000/metrics                                 # Prometheus text

Every call is bounded by the client's timeout as a whole, and every failure becomes a
`BackendError` with reason "refused", "timeout", "auth" (401/403: a wrong key, or a proxy in
front), "http <status>" or "bad payload" (an SSO proxy's login page included). `/metrics` is
parsed with prometheus_client's parser; series are summed (max for KV usage) over the `engine`
label and grouped by `model_name`; both the 0.33 names and the 0.10 names (backends.md §1.5)
are read, and facts the server does not expose (`--disable-log-stats`) are listed in `missing`.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from oncall.backends.answer_size import MIB
from oncall.backends.http import HttpBackend, status_reason
from oncall.errors import BackendError

BACKEND = "vllm"

#: Scalar facts -> exposed sample names, preferred first; how they combine over `engine`.
GAUGES: dict[str, tuple[tuple[str, ...], str]] = {
    "running": (("vllm:num_requests_running",), "sum"),
    "waiting": (("vllm:num_requests_waiting",), "sum"),
    "kv_cache_usage": (("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), "max"),
    "preemptions_total": (("vllm:num_preemptions_total",), "sum"),
    "generation_tokens_total": (("vllm:generation_tokens_total",), "sum"),
    "prompt_tokens_total": (("vllm:prompt_tokens_total",), "sum"),
    "request_success_total": (("vllm:request_success_total",), "sum"),
}
#: Histogram facts -> family names, preferred first.
HISTOGRAMS: dict[str, tuple[str, ...]] = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds",),
}
FACTS = (*GAUGES, *HISTOGRAMS)


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Prometheus' `histogram_quantile` over cumulative (upper bound, count) buckets.

    Linear interpolation inside the bucket holding the rank, the lower bound of the first
    bucket being 0; a rank in the +Inf bucket gives the largest finite upper bound. None when
    there are no observations or no +Inf bucket (Prometheus answers NaN there).
    """
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]) or ordered[-1][0] < 0:
        return None
    if math.isnan(q):
        return None
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    # Counts must not decrease (a scrape racing an update can break that); keep them monotonic.
    fixed: list[tuple[float, float]] = []
    for bound, count in ordered:
        fixed.append((bound, max(count, fixed[-1][1]) if fixed else count))
    observations = fixed[-1][1]
    if observations <= 0:
        return None
    rank = q * observations
    index = next(i for i, (_, count) in enumerate(fixed) if count >= rank)
    if index == len(fixed) - 1:
        return fixed[-2][0]
    if index == 0 and fixed[0][0] <= 0:
        return fixed[0][0]
    start, end, count = 0.0, fixed[index][0], fixed[index][1]
    if index > 0:
        start = fixed[index - 1][0]
        count -= fixed[index - 1][1]
        rank -= fixed[index - 1][1]
    if count <= 0:
        return end
    return start + (end - start) * (rank / count)


Buckets = dict[float, float]
"""Cumulative histogram buckets: upper bound -> count of observations at or below it."""


def bucket_increase(before: Buckets | None, after: Buckets | None) -> Buckets | None:
    """What was observed between two scrapes of a histogram (`increase()` per bucket).

    After a counter reset (a count went down or a bucket vanished: the server restarted) the
    whole of `after` counts as new, as Prometheus does; None when `after` has no histogram.
    """
    if after is None:
        return None
    if before is None or any(after.get(bound, -1.0) < count for bound, count in before.items()):
        return dict(after)
    return {bound: count - before.get(bound, 0.0) for bound, count in after.items()}


def sum_buckets(many: Iterable[Buckets | None]) -> Buckets:
    """Buckets of several histograms added per upper bound, as `sum by (le)` does."""
    total: Buckets = {}
    for buckets in many:
        for bound, count in (buckets or {}).items():
            total[bound] = total.get(bound, 0.0) + count
    return total


@dataclass(frozen=True)
class Health:
    """The answer of `GET /health`: ok only on an empty 200 (vLLM's; a 200 with a body is a
    "bad payload"); 503 (500 on 0.10) means the engine died."""

    ok: bool
    status: int
    latency_s: float


@dataclass(frozen=True)
class Quantiles:
    """p50/p90/p99 in seconds; None where the histogram has no observations yet."""

    p50: float | None
    p90: float | None
    p99: float | None


@dataclass(frozen=True)
class ModelMetrics:
    """Facts of one served model, summed (KV usage: maxed) over engines; None if not exposed."""

    model_name: str
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None  # fraction 0-1, despite the "perc" in the name
    preemptions_total: float | None = None
    generation_tokens_total: float | None = None
    prompt_tokens_total: float | None = None
    request_success_total: float | None = None
    ttft: Quantiles | None = None
    itl: Quantiles | None = None
    e2e: Quantiles | None = None


@dataclass(frozen=True)
class VllmMetrics:
    """One `/metrics` scrape of one instance, per model_name.

    `metric_version` is "0.10" when the pre-0.11 names (`vllm:gpu_cache_usage_perc`) are
    exposed, "0.33" when only the new ones are, "unknown" with neither. `missing` names the
    facts (see FACTS) that no model exposed. `buckets` holds the cumulative histogram buckets
    (fact of HISTOGRAMS -> upper bound -> count) summed over models and engines, so a caller
    can take any quantile, or one over the difference of two scrapes.
    """

    instance: str
    models: dict[str, ModelMetrics]
    metric_version: str
    missing: list[str] = field(default_factory=list)
    buckets: dict[str, Buckets] = field(default_factory=dict)

    @property
    def generation_tokens_total(self) -> float | None:
        """Generated tokens over every model; None when no model exposes the counter."""
        values = [m.generation_tokens_total for m in self.models.values()]
        known = [v for v in values if v is not None]
        return sum(known) if known else None


def token_rate(first: VllmMetrics, second: VllmMetrics, seconds: float) -> float | None:
    """Generated tokens per second between two scrapes; None if unknown or the counter reset."""
    before, after = first.generation_tokens_total, second.generation_tokens_total
    if before is None or after is None or seconds <= 0 or after < before:
        return None
    return (after - before) / seconds


def _combine(values: Sequence[float], how: str) -> float:
    return max(values) if how == "max" else sum(values)


def parse_metrics(text: str, instance: str) -> VllmMetrics:
    """Facts from a Prometheus exposition text; raises ValueError if the text is not one."""
    # (sample name, model) -> values over engines and other labels
    scalars: dict[tuple[str, str], list[float]] = defaultdict(list)
    # (family, model) -> upper bound -> cumulative count summed over engines
    buckets: dict[tuple[str, str], dict[float, float]] = defaultdict(lambda: defaultdict(float))
    names: set[str] = set()
    # Imported here: prometheus_client's package loads its whole exposition side (≈ 0.1 s of
    # CPU), and only `vllm.metrics` parses a scrape; a check of `vllm.rates` steps does not.
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names.add(sample.name)
            model = sample.labels.get("model_name")
            if model is None:
                continue
            if family.type == "histogram" and sample.name == f"{family.name}_bucket":
                bound = float(sample.labels["le"])
                buckets[(family.name, model)][bound] += sample.value
            else:
                scalars[(sample.name, model)].append(sample.value)
    models = sorted({model for _, model in scalars} | {model for _, model in buckets})
    per_model: dict[str, ModelMetrics] = {}
    summed: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for model in models:
        facts: dict[str, Any] = {}
        for fact, (candidates, how) in GAUGES.items():
            for name in candidates:
                if (name, model) in scalars:
                    facts[fact] = _combine(scalars[(name, model)], how)
                    break
        for fact, families in HISTOGRAMS.items():
            for name in families:
                if (name, model) in buckets:
                    pairs = list(buckets[(name, model)].items())
                    for bound, count in pairs:
                        summed[fact][bound] += count
                    facts[fact] = Quantiles(
                        *(histogram_quantile(q, pairs) for q in (0.5, 0.9, 0.99))
                    )
                    break
        per_model[model] = ModelMetrics(model_name=model, **facts)
    missing = [fact for fact in FACTS if all(getattr(m, fact) is None for m in per_model.values())]
    if "vllm:gpu_cache_usage_perc" in names:
        version = "0.10"
    elif "vllm:kv_cache_usage_perc" in names:
        version = "0.33"
    else:
        version = "unknown"
    totals = {fact: dict(by_bound) for fact, by_bound in summed.items()}
    return VllmMetrics(instance, per_model, version, missing, totals)


class VllmClient(HttpBackend):
    """One connection pool to one vLLM server; use as `async with VllmClient(...) as v`."""

    BACKEND = BACKEND
    #: /metrics is tens to hundreds of KB (histograms per model); /version, /v1/models less.
    MAX_ANSWER_BYTES = 16 * MIB

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(url, timeout=timeout, transport=transport)
        self._api_key = api_key

    async def _request(self, path: str) -> httpx.Response:
        """GET a path under the timeout; transport failures become BackendError."""
        headers = {}
        if self._api_key and path.startswith("/v1"):
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = self._http.get(path, headers=headers)
        return await self._exchange(request)

    def _refused(self, response: httpx.Response) -> BackendError:
        status = response.status_code
        return self._error(status_reason(status), response.reason_phrase, http_status=status)

    async def _json(self, path: str) -> Any:
        response = await self._request(path)
        if response.status_code >= 400:
            raise self._refused(response)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            snippet = response.text[:80].replace("\n", " ")
            raise self._error("bad payload", f"not JSON: {snippet!r}") from exc

    async def health(self) -> Health:
        """`GET /health`; any HTTP answer is a Health, only no answer raises."""
        started = time.perf_counter()
        response = await self._request("/health")
        latency = time.perf_counter() - started
        # vLLM's API key guards only /v1: a 401/403 here, or a page, is something in front of
        # the server (an SSO proxy) and says nothing about the engine. Not "unhealthy": unknown.
        if response.status_code in (401, 403):
            raise self._refused(response)
        if "html" in response.headers.get("content-type", ""):
            kind = response.headers["content-type"]
            raise self._error("bad payload", f"/health answered {response.status_code} {kind!r}")
        # vLLM's own 200 is empty (`Response(status_code=200)`, serve/instrumentator/health.py;
        # backends.md §1.1). A 200 with a body ("OK", `{"status": "up"}`, a catch-all page) is
        # something else answering for it: it says nothing of the engine, so unknown.
        body = response.content.strip()
        if response.status_code == 200 and body:
            snippet = body[:40].decode("utf-8", errors="replace")
            raise self._error(
                "bad payload",
                f"/health answered 200 with a {len(response.content)}-byte body ({snippet!r}); "
                "vLLM's is empty",
            )
        return Health(response.status_code == 200, response.status_code, latency)

    async def version(self) -> str:
        """The server's vLLM version, e.g. "0.33.0"."""
        body = await self._json("/version")
        if not isinstance(body, dict) or not isinstance(body.get("version"), str):
            raise self._error("bad payload", "version response has no version string")
        return str(body["version"])

    async def models(self) -> list[str]:
        """Served model ids (`/v1/models`)."""
        body = await self._json("/v1/models")
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or not all(
            isinstance(item, dict) and isinstance(item.get("id"), str) for item in data
        ):
            raise self._error("bad payload", "models response has no data list of ids")
        return [str(item["id"]) for item in data]

    async def metrics(self) -> VllmMetrics:
        """One `GET /metrics`, parsed into per-model facts."""
        response = await self._request("/metrics")
        if response.status_code >= 400:
            raise self._refused(response)
        kind = response.headers.get("content-type", "")
        if "html" in kind or "json" in kind:
            raise self._error("bad payload", f"metrics served as {kind!r}")
        try:
            return parse_metrics(response.text, self.url)
        except (ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
            snippet = response.text[:80].replace("\n", " ")
            raise self._error("bad payload", f"not Prometheus text ({exc}): {snippet!r}") from exc
