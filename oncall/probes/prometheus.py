"""Prometheus probe: any instant query.

curl -s 'http://PROMETHEUS:9090/api/v1/query' --data-urlencode 'query=EXPR'
"""

from __future__ import annotations

import math
import shlex

from pydantic import Field

from oncall.backends import from_settings
from oncall.backends.prometheus import PrometheusClient
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext


class QueryParams(ProbeParams):
    query: str = Field(description="PromQL instant query.")


async def prometheus_client(ctx: ProbeContext) -> PrometheusClient:
    """The run's shared Prometheus client (also used by the DCGM path of the GPU probe)."""
    return await ctx.client(
        "prometheus", lambda: from_settings.prometheus_client(ctx.settings.prometheus)
    )


async def run_query(ctx: ProbeContext, params: QueryParams) -> Facts:
    """Facts: `value` (the first sample's value, None when the result is empty), `count`,
    `samples` ([{labels, value}], in Prometheus' order)."""
    client = await prometheus_client(ctx)
    samples = await client.query(params.query)
    # NaN (an empty histogram's quantile, 0/0) is "no value": None, which JSON and CEL both take.
    rows = [
        {"labels": dict(s.labels), "value": None if math.isnan(s.value) else s.value}
        for s in samples
    ]
    return {"value": rows[0]["value"] if rows else None, "count": len(rows), "samples": rows}


def query_equivalent(ctx: ProbeContext, params: QueryParams) -> str:
    url = ctx.settings.prometheus.url.rstrip("/") + "/api/v1/query"
    return f"curl -s {shlex.quote(url)} --data-urlencode {shlex.quote('query=' + params.query)}"


PROBES = (
    Probe(
        name="prometheus.query",
        backend="prometheus",
        summary="Any PromQL instant query.",
        params=QueryParams,
        run=run_query,
        equivalent=query_equivalent,
    ),
)
