"""Prometheus probe: any instant query.

curl -s 'http://PROMETHEUS:9090/api/v1/query' --data-urlencode 'query=EXPR'
"""

from __future__ import annotations

import math
import re
import shlex

from pydantic import Field

from oncall.backends import from_settings
from oncall.backends.prometheus import PrometheusClient
from oncall.probes.absence import (
    SELECTOR_LABEL,
    present_names,
    selectors_of,
    selectors_query,
    selectors_reason,
)
from oncall.probes.base import Facts, Probe, ProbeParams
from oncall.probes.context import ProbeContext
from oncall.settings.model import PrometheusSettings


class QueryParams(ProbeParams):
    query: str = Field(description="PromQL instant query.")


async def prometheus_client(ctx: ProbeContext) -> PrometheusClient:
    """The run's shared Prometheus client (also used by the DCGM path of the GPU probe)."""
    return await ctx.client(
        "prometheus", lambda: from_settings.prometheus_client(ctx.settings.prometheus)
    )


QUERY_FACTS = frozenset({"value", "count", "samples"})


async def run_query(ctx: ProbeContext, params: QueryParams) -> Facts:
    """Facts: `value` (the first sample's value, None when the result is empty), `count`,
    `samples` ([{labels, value}], in Prometheus' order), `absent`: when the result is empty
    and a selector of the query matches no series now, {value, count, samples: why} (with
    another name of the metric that has series: `ray_vllm:` for `vllm:`); else empty. An
    empty result over series that exist (`up == 0` with every target up) is not absent."""
    client = await prometheus_client(ctx)
    samples = await client.query(params.query)
    # NaN (an empty histogram's quantile, 0/0) is "no value": None, which JSON and CEL both take.
    rows = [
        {"labels": dict(s.labels), "value": None if math.isnan(s.value) else s.value}
        for s in samples
    ]
    absent: dict[str, str] = {}
    if not rows:
        reason = await _why_empty(client, params.query)
        if reason is not None:
            absent = dict.fromkeys(sorted(QUERY_FACTS), reason)
    return {
        "value": rows[0]["value"] if rows else None,
        "count": len(rows),
        "samples": rows,
        "absent": absent,
    }


async def _why_empty(client: PrometheusClient, query: str) -> str | None:
    """One more query, only after an empty result: which of its selectors match nothing."""
    selectors = selectors_of(query)
    if not selectors:
        return None
    rows = [s.labels for s in await client.query(selectors_query(selectors))]
    matched = {int(labels[SELECTOR_LABEL]) for labels in rows if SELECTOR_LABEL in labels}
    return selectors_reason(selectors, matched, present_names(rows))


def _variable(header: str) -> str:
    """The shell variable a reader sets to a header's value: X-Scope-OrgID →
    PROMETHEUS_HEADER_X_SCOPE_ORGID."""
    return "PROMETHEUS_HEADER_" + re.sub(r"[^A-Za-z0-9]", "_", header).upper()


def curl_query(settings: PrometheusSettings, query: str) -> str:
    """`curl -s URL/api/v1/query --data-urlencode 'query=…'` with the headers oncall sends
    (its bearer token, `prometheus.headers` such as Mimir's X-Scope-OrgID): without them a
    tenant-scoped Prometheus answers 401 or another tenant's data. Each value is a shell
    variable the reader sets (`$PROMETHEUS_TOKEN`, `$PROMETHEUS_HEADER_X_SCOPE_ORGID`): they
    are secrets, never printed."""
    url = shlex.quote(settings.url.rstrip("/") + "/api/v1/query")
    headers = ' -H "Authorization: Bearer $PROMETHEUS_TOKEN"' if settings.bearer_token else ""
    for name in settings.headers:
        # The name quoted on its own: an RFC 9110 token may hold `$` or a backquote.
        headers += f' -H {shlex.quote(name + ": ")}"${_variable(name)}"'
    return f"curl -s{headers} {url} --data-urlencode {shlex.quote('query=' + query)}"


def query_equivalent(ctx: ProbeContext, params: QueryParams) -> str:
    return curl_query(ctx.settings.prometheus, params.query)


PROBES = (
    Probe(
        name="prometheus.query",
        backend="prometheus",
        summary="Any PromQL instant query.",
        params=QueryParams,
        run=run_query,
        equivalent=query_equivalent,
        absent_facts=QUERY_FACTS,
    ),
)
