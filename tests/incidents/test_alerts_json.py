"""`oncall alerts -o json` names each firing instance's incident (and the alert's), from the
grouping of that refresh kept in a real redis-server; an alert in no incident says null."""

from __future__ import annotations

import json
import time

import redis

from oncall.cli.alerts_cmd import render_json
from oncall.service.alerts import AlertsReport
from oncall.service.incidents import IncidentsView
from tests.harness.servers import RunningServer
from tests.incidents.test_service import firing, settings_for, verdict


async def test_json_names_the_incident_of_each_instance(redis_srv: RunningServer) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    view = IncidentsView(settings_for(redis_srv.url))
    try:
        now = time.time()
        statuses = [firing("LLMHighP99Latency", now - 90, namespace="ai"),
                    firing("VllmKVCacheSaturated", now - 80, pod="vllm-0")]  # fmt: skip
        quiet = firing("Quiet", now)
        quiet = type(quiet)(quiet.rule, "prometheus", "inactive", ())
        found = await view.update(
            [*statuses, quiet],
            [verdict("LLMHighP99Latency", "fail", namespace="ai"),
             verdict("VllmKVCacheSaturated", "fail", pod="vllm-0")],
            now=now,
        )  # fmt: skip
        report = AlertsReport([*statuses, quiet], now, "http://127.0.0.1:9090",
                              incidents=view.membership())  # fmt: skip
        body = json.loads(render_json(report))
        by_name = {a["name"]: a for a in body["alerts"]}
        (incident,) = found
        assert by_name["LLMHighP99Latency"]["incident"] == incident.id
        assert by_name["VllmKVCacheSaturated"]["instances"][0]["incident"] == incident.id
        assert by_name["Quiet"]["incident"] is None
    finally:
        await view.aclose()
