"""The `vllm.rates` probe: fleet-wide vLLM rates and latency quantiles, asked of Prometheus.

    curl -s http://PROMETHEUS:9090/api/v1/query \
        --data-urlencode 'query=sum(rate(vllm:generation_tokens_total[1m]))'

Behind a Kubernetes Service each direct scrape of `/metrics` may reach another pod, so rates
taken between two scrapes (`vllm.metrics`) mix pods; Prometheus scrapes every pod itself and
its `rate()` and `histogram_quantile()` over the summed buckets see the whole fleet. Both the
0.33 and the 0.10 metric names are read (backends.md §1.5). Part of `oncall.probes.vllm`'s
PROBES.
"""

from __future__ import annotations

import math

from pydantic import Field

from oncall.probes.absence import missing_reason, presence_query, present_names, with_alternates
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext
from oncall.probes.prometheus import curl_query, prometheus_client

#: PromQL durations: 30s, 1m, 1h30m, 500ms.
DURATION = r"^([0-9]+(ms|s|m|h|d|w|y))+$"


class RatesParams(ProbeParams):
    window: str = Field("1m", pattern=DURATION, description="PromQL range, e.g. 1m or 5m.")
    quantile: float = Field(0.99, ge=0, le=1, description="Latency quantile, e.g. 0.99.")
    selector: str = Field("", description='Extra label matchers, e.g. namespace="ai".')


def rate_queries(params: RatesParams) -> dict[str, str]:
    """fact -> PromQL. Only the ITL and KV-usage names changed between 0.10 and 0.33; each
    server's series come from one name, the newer where it exposes both."""

    def s(name: str) -> str:
        return f"{name}{{{params.selector}}}" if params.selector else name

    w, q = params.window, repr(params.quantile)

    def quantile(family: str, *older: str) -> str:
        """The quantile of `family`, or of an older name on servers that lack it: one family
        per server (its scrape target, `job` and `instance`). A plain `or` would merge both
        where a server exposes both (vLLM 0.10-0.12): after rate() drops the names, bucket
        series whose `le` differ all survive it, and the quantile mixes two histograms."""
        rates = f"rate({s(family + '_bucket')}[{w}])"
        preferred = rates
        for name in older:
            fallback = f"rate({s(name + '_bucket')}[{w}])"
            rates += f" or ({fallback} unless on (job, instance) {preferred})"
        return f"histogram_quantile({q}, sum by (le) ({rates}))"

    return {
        "tokens_per_s": f"sum(rate({s('vllm:generation_tokens_total')}[{w}]))",
        "preemptions_per_s": f"sum(rate({s('vllm:num_preemptions_total')}[{w}]))",
        "running": f"sum({s('vllm:num_requests_running')})",
        "waiting": f"sum({s('vllm:num_requests_waiting')})",
        "kv_cache_usage": (
            f"max({s('vllm:kv_cache_usage_perc')} or {s('vllm:gpu_cache_usage_perc')})"
        ),
        "ttft_s": quantile("vllm:time_to_first_token_seconds"),
        "itl_s": quantile("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "e2e_s": quantile("vllm:e2e_request_latency_seconds"),
    }


FACT_LABEL = "oncall_fact"

#: fact -> the metrics it is read from (any one will do: the 0.33 and the 0.10 names).
SOURCES: dict[str, tuple[str, ...]] = {
    "tokens_per_s": ("vllm:generation_tokens_total",),
    "preemptions_per_s": ("vllm:num_preemptions_total",),
    "running": ("vllm:num_requests_running",),
    "waiting": ("vllm:num_requests_waiting",),
    "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "ttft_s": ("vllm:time_to_first_token_seconds_bucket",),
    "itl_s": (
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:time_per_output_token_seconds_bucket",
    ),
    "e2e_s": ("vllm:e2e_request_latency_seconds_bucket",),
    "busiest_pod": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
}
#: stalled_pods compares the token counters with the queue: it needs both.
STALLED_SOURCES = (("vllm:generation_tokens_total",), ("vllm:num_requests_running",))
ABSENT_FACTS = frozenset({*SOURCES, "stalled_pods"})


def _presence(params: RatesParams) -> str:
    """The metrics' series matching the selector, and their other names' anywhere (Ray
    Serve's series have no `pod` label of the vLLM Deployment to match)."""
    names = list(dict.fromkeys(name for names in SOURCES.values() for name in names))
    others = [name for name in with_alternates(names) if name not in names]
    return f"{presence_query(names, params.selector)} or {presence_query(others)}"


def absent_facts(params: RatesParams, present: set[str]) -> dict[str, str]:
    """fact -> why it has no series (`oncall.probes.absence`); empty when every fact has."""
    absent: dict[str, str] = {}
    for fact, names in SOURCES.items():
        reason = missing_reason(names, present, params.selector)
        if reason is not None:
            absent[fact] = reason
    for names in STALLED_SOURCES:
        reason = missing_reason(names, present, params.selector)
        if reason is not None:
            absent.setdefault("stalled_pods", reason)
    return absent


def batched_query(params: RatesParams) -> str:
    """Every query of `rate_queries` in one: each result tagged with its fact's name and the
    results joined with `or` (their label sets differ by the tag), so one request answers all."""
    parts = [
        f'label_replace(({expr}), "{FACT_LABEL}", "{name}", "", "")'
        for name, expr in rate_queries(params).items()
    ]
    parts.append(f'label_replace(({busiest_query(params)}), "{FACT_LABEL}", "busiest_pod", "", "")')
    parts.append(f'label_replace(({stalled_query(params)}), "{FACT_LABEL}", "stalled_pod", "", "")')
    parts.append(f'label_replace(({_presence(params)}), "{FACT_LABEL}", "present", "", "")')
    return " or ".join(parts)


def stalled_query(params: RatesParams) -> str:
    """Pods whose token counters did not move over the window while requests ran or waited:
    a hung EngineCore, whose API server keeps /health at 200 and its gauges frozen (vllm
    issue #39863). A counter Prometheus has fewer than two samples of is not judged."""
    selector = f"{{{params.selector}}}" if params.selector else ""
    w = params.window
    moved = " + ".join(
        f"sum by (pod) (rate({name}{selector}[{w}]))"
        for name in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total")
    )
    queued = " + ".join(
        f"sum by (pod) ({name}{selector})"
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
    )
    return f"({moved}) == 0 and on (pod) ({queued}) > 0"


def busiest_query(params: RatesParams) -> str:
    """The pod with the fullest KV cache (its `pod` label, as Kubernetes discovery sets it)."""
    selector = f"{{{params.selector}}}" if params.selector else ""
    kv = f"vllm:kv_cache_usage_perc{selector} or vllm:gpu_cache_usage_perc{selector}"
    return f"topk(1, max by (pod) ({kv}))"


async def run_rates(ctx: ProbeContext, params: RatesParams) -> Facts:
    """`curl -s PROMETHEUS/api/v1/query --data-urlencode 'query=…'`: one batched query.

    Facts: tokens_per_s (sum of rate(vllm:generation_tokens_total[window])), preemptions_per_s,
    running, waiting (sums of the gauges), kv_cache_usage (max, 0.33 or 0.10 name), ttft_s,
    itl_s, e2e_s (histogram_quantile over the fleet's summed bucket rates). None where
    Prometheus has no series or the answer is NaN (no observations in the window).
    busiest_pod: the `pod` label of the series with the fullest KV cache (None without one),
    the pod to rebuild when its cache is full or fragmented. stalled_pods: the `pod` labels
    whose token counters stood still over the window while requests ran or waited (a hung
    engine: /health is still 200), sorted; empty when none. absent: fact -> why, for each
    fact whose metrics have no series (matching the selector), naming another name that has
    (`ray_vllm:` under Ray Serve); empty when every fact has series. A fact with series and
    no value (no traffic in the window: no quantile) is None and not absent."""
    client = await prometheus_client(ctx)
    samples = await client.query(batched_query(params))
    facts: Facts = dict.fromkeys([*rate_queries(params), "busiest_pod"])
    stalled: set[str] = set()
    present: set[str] = set()
    for sample in samples:
        name = sample.labels.get(FACT_LABEL)
        if name == "present":
            present.update(present_names([sample.labels]))
        elif name == "busiest_pod":
            facts[name] = sample.labels.get("pod")
        elif name == "stalled_pod":
            stalled.add(sample.labels.get("pod", ""))
        elif name in facts and math.isfinite(sample.value):
            facts[name] = sample.value
    facts["stalled_pods"] = sorted(stalled)
    facts["absent"] = absent_facts(params, present)
    return facts


def rates_equivalent(ctx: ProbeContext, params: RatesParams) -> str:
    # One readable query per fact; the probe itself sends them batched in one request.
    return "\n".join(
        curl_query(ctx.settings.prometheus, expr) for expr in rate_queries(params).values()
    )


RATES = Probe(
    name="vllm.rates",
    backend="prometheus",
    summary="Fleet tokens/s, preemptions/s, queue, KV cache and latency via Prometheus.",
    params=RatesParams,
    run=run_rates,
    equivalent=rates_equivalent,
    absent_facts=ABSENT_FACTS,
)
