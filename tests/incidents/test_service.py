"""The service side against a real redis-server: a refresh's firing instances and serve's
verdicts become one incident in the store, `membership` names it for every instance, a
resolved storm closes after `close_after`, and a Redis that does not answer keeps the last
incidents known (with the error) instead of failing the refresh."""

from __future__ import annotations

import time
from typing import Any

import redis

from oncall.model.alerts import AlertInstance, AlertRule, RuleStatus
from oncall.service.incidents import IncidentsView, instance_key
from oncall.settings import Settings
from tests.harness.servers import RunningServer


def firing(name: str, since: float, **labels: str) -> RuleStatus:
    rule = AlertRule(name=name, expr="x > 1", group="g", file="f.yaml", line=1, for_s=60)
    inst = AlertInstance(name, "firing", labels, 2.0, since, None, 0.0, since, "prometheus")
    return RuleStatus(rule=rule, source="prometheus", state="firing", instances=(inst,))


def quiet(name: str) -> RuleStatus:
    """The rule after its alert resolved: inactive, no instance."""
    rule = AlertRule(name=name, expr="x > 1", group="g", file="f.yaml", line=1, for_s=60)
    return RuleStatus(rule=rule, source="prometheus", state="inactive", instances=())


def verdict(alert: str, kv: str, **labels: str) -> dict[str, Any]:
    return {
        "status": "checked", "context": "", "alert": alert, "ran_at": time.time(),
        "labels": {"alertname": alert, **labels},
        "steps": [
            {"id": "deployment", "probe": "kube.deployment", "status": "ok",
             "params": {"name": "vllm"}, "facts": {"name": "vllm"}},
            {"id": "kv_cache", "probe": "vllm.rates", "status": kv, "params": {}, "facts": {}},
        ],
    }  # fmt: skip


def settings_for(url: str, **incidents: float) -> Settings:
    return Settings.model_validate(
        {"redis": {"url": url}, "kubernetes": {"namespace": "ai"}, "incidents": incidents}
    )


async def test_a_refresh_makes_one_incident_and_names_it_for_each_instance(
    redis_srv: RunningServer,
) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    view = IncidentsView(settings_for(redis_srv.url, close_after=60))
    other = IncidentsView(settings_for(redis_srv.url))  # a second app, reading
    try:
        now = time.time()
        statuses = [firing("LLMHighP99Latency", now - 90, namespace="ai"),
                    firing("VllmKVCacheSaturated", now - 80, pod="vllm-0"),
                    firing("GatewayDown", now - 70)]  # fmt: skip
        verdicts = [verdict("LLMHighP99Latency", "fail", namespace="ai"),
                    verdict("VllmKVCacheSaturated", "fail", pod="vllm-0")]  # fmt: skip
        found = await view.update(statuses, verdicts, now=now)
        assert len(found) == 2
        kv = next(i for i in found if len(i.members) == 2)
        why = "grouped: kv_cache fails on Deployment ai/vllm in 2 of 2 checklists"
        assert kv.explanation == why
        names = view.membership()
        assert names[instance_key("", "LLMHighP99Latency", {"namespace": "ai"})] == kv.id
        assert names[instance_key("", "VllmKVCacheSaturated", {"pod": "vllm-0"})] == kv.id
        assert names[instance_key("", "GatewayDown", {})] != kv.id
        stored = {i.id for i in await other.store.recent() if i.ongoing}
        assert stored == {i.id for i in found}
        # The storm is over: resolved now, open until close_after has passed, then closed.
        over = [quiet(s.rule.name) for s in statuses]
        still = await view.update(over, [], now=now + 1)
        assert len(still) == 2 and all(m.resolved_at == now + 1 for m in still[0].members)
        assert await view.update(over, [], now=now + 61) == []
        assert all(i.closed_at == now + 61 for i in await other.store.recent())
    finally:
        await view.aclose()
        await other.aclose()


async def test_redis_not_answering_keeps_the_last_incidents(redis_srv: RunningServer) -> None:
    redis.Redis.from_url(redis_srv.url).flushdb()
    view = IncidentsView(settings_for(redis_srv.url))
    try:
        now = time.time()
        found = await view.update([firing("A", now - 90)], [])
        assert len(found) == 1 and view.error is None
        dead = IncidentsView(settings_for("redis://127.0.0.1:9/0"))  # nothing listens there
        dead.incidents = found
        assert await dead.update([firing("A", now - 90)], []) == found
        assert dead.error is not None and dead.error.reason == "refused"
        await dead.aclose()
    finally:
        await view.aclose()
