"""vLLM probes: health, models, load and latency of every configured server, and fleet rates.

    curl -s -o /dev/null -w '%{http_code}\\n' http://VLLM:8000/health
    curl -s -H "Authorization: Bearer $VLLM_API_KEY" http://VLLM:8000/v1/models
    curl -s http://VLLM:8000/metrics

`vllm.health`, `vllm.models` and `vllm.metrics` ask every URL of `settings.vllm.urls` at once,
each through its own shared `VllmClient`, and report each server in `servers` next to the
aggregates. A server that does not answer is listed with its `error`; only when none answers
does the probe raise (the step becomes unknown). `vllm.rates` (in `vllm_rates`, listed here)
asks Prometheus instead: behind a Kubernetes Service each direct scrape may reach another pod,
while Prometheus scrapes each. Metric names of vLLM 0.10 and 0.33 are both read (backends.md
§1.5). The API key never appears in an equivalent: it says `$VLLM_API_KEY`.
"""

from __future__ import annotations

import asyncio
import math
import shlex
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import Field

from oncall.backends import from_settings
from oncall.backends.vllm import (
    HISTOGRAMS,
    Buckets,
    VllmClient,
    VllmMetrics,
    bucket_increase,
    histogram_quantile,
    sum_buckets,
    token_rate,
)
from oncall.errors import BackendError
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext
from oncall.probes.vllm_rates import RATES

BACKEND = "vllm"
T = TypeVar("T")

#: Backend facts -> the probe facts they feed; the others are not probe facts.
PROBE_FACT = {
    "running": "running",
    "waiting": "waiting",
    "kv_cache_usage": "kv_cache_usage",
    "preemptions_total": "preemptions_total",
    "generation_tokens_total": "tokens_per_s",
    "ttft": "ttft_s",
    "itl": "itl_s",
    "e2e": "e2e_s",
}


class NoParams(ProbeParams):
    pass


class MetricsParams(ProbeParams):
    interval: float = Field(
        1.0, ge=0, le=60, description="Seconds between the two scrapes; 0 scrapes once."
    )
    quantile: float = Field(0.99, ge=0, le=1, description="Latency quantile, e.g. 0.99.")


async def vllm_client(ctx: ProbeContext, url: str) -> VllmClient:
    """The run's shared client of one vLLM server."""
    return await ctx.client(
        f"vllm:{url}", lambda: from_settings.vllm_client(ctx.settings.vllm, url)
    )


async def _each_server(
    ctx: ProbeContext, ask: Callable[[VllmClient], Awaitable[T]]
) -> list[tuple[str, T | BackendError]]:
    """`ask` every configured server at once; a server's BackendError is its answer."""
    urls = ctx.settings.vllm.urls
    if not urls:
        raise BackendError(BACKEND, "settings.vllm.urls", "not configured", "no vLLM URL is set")

    async def one(url: str) -> T | BackendError:
        try:
            return await ask(await vllm_client(ctx, url))
        except BackendError as exc:
            return exc

    answers = await asyncio.gather(*(one(url) for url in urls))
    return list(zip(urls, answers, strict=True))


def _raise_if_none_answered(answers: list[tuple[str, Any]]) -> None:
    errors = [answer for _, answer in answers if isinstance(answer, BackendError)]
    if len(errors) < len(answers):
        return
    if len(errors) == 1:
        raise errors[0]
    reasons = {error.reason for error in errors}
    reason = reasons.pop() if len(reasons) == 1 else "unreachable"
    detail = "; ".join(f"{error.target}: {error.reason}" for error in errors)
    raise BackendError(BACKEND, ", ".join(url for url, _ in answers), reason, detail)


# ---- vllm.health ---------------------------------------------------------------------------


async def _health_of(client: VllmClient) -> Facts:
    health, version = await asyncio.gather(
        client.health(), client.version(), return_exceptions=True
    )
    if isinstance(health, BaseException):
        raise health
    if isinstance(version, BaseException) and not isinstance(version, BackendError):
        raise version
    return {
        "healthy": health.ok,
        "status": health.status,
        "version": version if isinstance(version, str) else None,
        "latency_ms": health.latency_s * 1000.0,
        "error": None if health.ok else f"http {health.status}",
    }


async def run_health(ctx: ProbeContext, _params: NoParams) -> Facts:
    """`curl -s -o /dev/null -w '%{http_code}' URL/health; curl -s URL/version` for each URL.

    Facts: servers [{url, healthy, status (HTTP status; None without an answer), version
    (None if unavailable), latency_ms, error (None when healthy; "http 503" for a dead engine,
    "refused", "timeout", …)}], healthy_count, total, all_healthy. Raises only when no server
    answered at all."""
    answers = await _each_server(ctx, _health_of)
    _raise_if_none_answered(answers)
    no_answer = dict.fromkeys(("healthy", "status", "version", "latency_ms"))
    servers = [
        {"url": url, **no_answer, "healthy": False, "error": answer.reason}
        if isinstance(answer, BackendError)
        else {"url": url, **answer}
        for url, answer in answers
    ]
    healthy = sum(1 for server in servers if server["healthy"])
    return {
        "servers": servers,
        "healthy_count": healthy,
        "total": len(servers),
        "all_healthy": healthy == len(servers),
    }


# ---- vllm.models ---------------------------------------------------------------------------


async def run_models(ctx: ProbeContext, _params: NoParams) -> Facts:
    """`curl -s -H "Authorization: Bearer $VLLM_API_KEY" URL/v1/models` for each URL.

    Facts: servers [{url, models (served ids), error}], models (sorted union). Raises only when
    no server answered."""
    answers = await _each_server(ctx, lambda client: client.models())
    _raise_if_none_answered(answers)
    servers: list[Facts] = []
    union: set[str] = set()
    for url, answer in answers:
        if isinstance(answer, BackendError):
            servers.append({"url": url, "models": [], "error": answer.reason})
        else:
            servers.append({"url": url, "models": answer, "error": None})
            union.update(answer)
    return {"servers": servers, "models": sorted(union)}


# ---- vllm.metrics --------------------------------------------------------------------------


@dataclass(frozen=True)
class Scrapes:
    """One server's scrapes: `first` is None with interval 0; `seconds` lie between the two."""

    first: VllmMetrics | None
    last: VllmMetrics
    seconds: float


async def _timed_scrape(client: VllmClient) -> tuple[VllmMetrics, float]:
    started = time.monotonic()
    scraped = await client.metrics()
    return scraped, (started + time.monotonic()) / 2


async def _scrapes_of(client: VllmClient, interval: float) -> Scrapes:
    if interval <= 0:
        return Scrapes(None, await client.metrics(), 0.0)
    first, first_at = await _timed_scrape(client)
    # The interval is the measurement itself: counters are compared `interval` apart.
    await asyncio.sleep(interval)
    last, last_at = await _timed_scrape(client)
    return Scrapes(first, last, last_at - first_at)


def _quantile(
    q: float, deltas: list[Buckets | None], totals: list[Buckets | None]
) -> tuple[float | None, str | None]:
    """(value, window): over the interval's increases if anything was observed in between,
    else over everything since the servers started; (None, None) without observations."""
    interval = sum_buckets(deltas)
    if interval.get(math.inf, 0.0) > 0:
        return histogram_quantile(q, interval.items()), "interval"
    value = histogram_quantile(q, sum_buckets(totals).items())
    return value, None if value is None else "since start"


def _window_of(windows: Iterable[str | None]) -> str | None:
    seen = {window for window in windows if window is not None}
    if len(seen) > 1:
        return "mixed"
    return seen.pop() if seen else None


def _known(values: Iterable[float | None], combine: Callable[[list[float]], float]) -> Any:
    present = [value for value in values if value is not None]
    return combine(present) if present else None


def _server_facts(url: str, scrapes: Scrapes, quantile: float) -> Facts:
    last, models = scrapes.last, scrapes.last.models.values()
    facts: Facts = {"url": url, "error": None, "metric_names": last.metric_version}
    facts["running"] = _known((m.running for m in models), sum)
    facts["waiting"] = _known((m.waiting for m in models), sum)
    facts["kv_cache_usage"] = _known((m.kv_cache_usage for m in models), max)
    facts["preemptions_total"] = _known((m.preemptions_total for m in models), sum)
    facts["tokens_per_s"] = (
        None if scrapes.first is None else token_rate(scrapes.first, last, scrapes.seconds)
    )
    windows = []
    for name in HISTOGRAMS:
        after = last.buckets.get(name)
        delta = (
            None
            if scrapes.first is None
            else bucket_increase(scrapes.first.buckets.get(name), after)
        )
        facts[f"{name}_s"], window = _quantile(quantile, [delta], [after])
        windows.append(window)
    facts["quantile_window"] = _window_of(windows)
    facts["missing"] = [PROBE_FACT[fact] for fact in last.missing if fact in PROBE_FACT]
    facts["stalled"] = _stalled(facts)
    return facts


def _stalled(facts: Facts) -> bool | None:
    """No token between the scrapes while requests run or wait: a hung EngineCore (its API
    server still answers /health and /metrics, the gauges frozen; vllm issue #39863)."""
    rate, running, waiting = facts["tokens_per_s"], facts["running"], facts["waiting"]
    if rate is None or (running is None and waiting is None):
        return None
    return bool(rate == 0 and (running or 0) + (waiting or 0) > 0)


def _failed_server(url: str, error: BackendError) -> Facts:
    facts: Facts = {"url": url, "error": error.reason, "metric_names": None}
    facts.update(dict.fromkeys(PROBE_FACT.values()))
    facts.update(quantile_window=None, missing=[], stalled=None)
    return facts


def _metric_names(versions: Iterable[str]) -> str:
    known = {version for version in versions if version != "unknown"}
    if len(known) > 1:
        return "mixed"
    return known.pop() if known else "unknown"


async def run_metrics(ctx: ProbeContext, params: MetricsParams) -> Facts:
    """`curl -s URL/metrics; sleep INTERVAL; curl -s URL/metrics` for each URL.

    Facts: servers [{url, error, metric_names, running, waiting, kv_cache_usage,
    preemptions_total, tokens_per_s, ttft_s, itl_s, e2e_s, quantile_window, missing, stalled
    (no token between the scrapes while requests run or wait: a hung engine; None without two
    scrapes)}] and over
    the servers that answered: running, waiting, preemptions_total (sums), kv_cache_usage (max),
    tokens_per_s (sum of generated tokens/s between the scrapes; None with interval 0),
    ttft_s / itl_s / e2e_s (the quantile of the summed buckets: their increase over the interval
    when it saw observations, else their totals since start), quantile_windows ({ttft_s: …}
    "interval" | "since start" | None), quantile_window (the one value they share, "mixed"
    otherwise, None with no histogram), missing (facts no server exposes, e.g. all of them with
    --disable-log-stats), absent (each of `missing` -> why, for `oncall.checklist.absence`),
    metric_names ("0.33" | "0.10" | "mixed" | "unknown"), answered, total,
    stalled_count (servers that answered and are stalled).
    Values from the last scrape; seconds end in _s. Raises only when no server answered."""
    answers = await _each_server(ctx, lambda client: _scrapes_of(client, params.interval))
    _raise_if_none_answered(answers)
    servers: list[Facts] = []
    good: list[Scrapes] = []
    for url, answer in answers:
        if isinstance(answer, BackendError):
            servers.append(_failed_server(url, answer))
        else:
            servers.append(_server_facts(url, answer, params.quantile))
            good.append(answer)
    answered = [server for server in servers if server["error"] is None]
    facts: Facts = {"servers": servers}
    for name in ("running", "waiting", "preemptions_total", "tokens_per_s"):
        facts[name] = _known((server[name] for server in answered), sum)
    facts["kv_cache_usage"] = _known((server["kv_cache_usage"] for server in answered), max)
    windows: dict[str, str | None] = {}
    for name in HISTOGRAMS:
        totals = [scrapes.last.buckets.get(name) for scrapes in good]
        deltas = [
            bucket_increase(scrapes.first.buckets.get(name), scrapes.last.buckets.get(name))
            for scrapes in good
            if scrapes.first is not None
        ]
        facts[f"{name}_s"], windows[f"{name}_s"] = _quantile(params.quantile, deltas, totals)
    facts["quantile_window"] = _window_of(windows.values())
    facts["quantile_windows"] = windows
    facts["missing"] = [
        fact
        for fact in PROBE_FACT.values()
        if all(fact in server["missing"] for server in answered)
    ]
    facts["absent"] = {
        fact: f"none of the {len(answered)} vLLM servers that answered exposes it in /metrics "
        "(--disable-log-stats, or other names: Ray Serve's ray_vllm:*)"
        for fact in facts["missing"]
    }
    facts["metric_names"] = _metric_names(scrapes.last.metric_version for scrapes in good)
    facts["answered"] = len(answered)
    facts["total"] = len(servers)
    facts["stalled_count"] = sum(1 for server in answered if server["stalled"])
    return facts


# ---- equivalents ---------------------------------------------------------------------------


def _url(url: str, path: str) -> str:
    return shlex.quote(url.rstrip("/") + path)


def health_equivalent(ctx: ProbeContext, _params: NoParams) -> str:
    code = shlex.quote("%{http_code}\\n")
    return "\n".join(
        f"curl -s -o /dev/null -w {code} {_url(url, '/health')}; curl -s {_url(url, '/version')}"
        for url in ctx.settings.vllm.urls
    )


def models_equivalent(ctx: ProbeContext, _params: NoParams) -> str:
    # Double quotes on purpose: the shell fills in the key, which never appears here.
    header = ' -H "Authorization: Bearer $VLLM_API_KEY"' if ctx.settings.vllm.api_key else ""
    return "\n".join(f"curl -s{header} {_url(url, '/v1/models')}" for url in ctx.settings.vllm.urls)


def metrics_equivalent(ctx: ProbeContext, params: MetricsParams) -> str:
    lines = []
    for url in ctx.settings.vllm.urls:
        scrape = f"curl -s {_url(url, '/metrics')}"
        lines.append(
            scrape if params.interval <= 0 else f"{scrape}; sleep {params.interval:g}; {scrape}"
        )
    return "\n".join(lines)


PROBES = (
    Probe(
        name="vllm.health",
        backend="vllm",
        summary="Health and version of every vLLM server.",
        params=NoParams,
        run=run_health,
        equivalent=health_equivalent,
    ),
    Probe(
        name="vllm.models",
        backend="vllm",
        summary="Models served by every vLLM server.",
        params=NoParams,
        run=run_models,
        equivalent=models_equivalent,
    ),
    Probe(
        name="vllm.metrics",
        backend="vllm",
        summary="Running, waiting, KV cache, preemptions, tokens/s, TTFT/ITL/e2e per server.",
        params=MetricsParams,
        run=run_metrics,
        equivalent=metrics_equivalent,
        # Two scrapes `interval` apart, each bounded by the vLLM timeout.
        timeout=10.0,
        absent_facts=frozenset(PROBE_FACT.values()),
    ),
    RATES,
)
