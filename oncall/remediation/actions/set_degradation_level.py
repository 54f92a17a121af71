"""set-degradation-level: the service's degradation level, 0 normal … 3 static page.

Plan: the current level from the configured store (a Redis key or a ConfigMap key); the value
read is the plan's precondition, compared again just before the write.

Command-line equivalents: `redis-cli GET KEY` / `redis-cli SET KEY LEVEL` (or a ConfigMap merge
patch), then the gateway's own `aigw_degradation_level` through Prometheus.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from oncall.errors import BackendError
from oncall.model.action_params import SetDegradationLevelParams
from oncall.model.write_path import Plan, Precondition, Target
from oncall.remediation.action import Action, PlanError, Say
from oncall.remediation.clients import Clients

LEVELS = {0: "normal", 1: "RAG off, base LLM only", 2: "LLM off, FAQ answers", 3: "static page"}
LEVEL_SEEN_TIMEOUT_S = 30.0
#: The precondition: the store still holds the value read when planning (None: not set).
STORED = "stored level"


async def current_level(clients: Clients) -> str | None:
    """The degradation level as the configured store holds it now (None: not set)."""
    settings = clients.settings
    if settings.degradation.store == "redis":
        return await clients.redis_client().get(settings.degradation.redis_key)
    kube = await clients.kube_writer()
    cm = await kube.get_configmap(settings.kubernetes.namespace, settings.degradation.configmap)
    value = (cm.get("data") or {}).get(settings.degradation.configmap_key)
    return None if value is None else str(value)


def stored_level(raw: str | None, where: str) -> tuple[int, str | None]:
    """The level the gateway serves at for a stored value, and a note for the person when the
    value is not a plain level: the gateway reads a missing key, or a value outside 0-3, as
    level 0 (as the drill's gateway does: oncall_drill/gateway_sim/server.py `read_level`)."""
    if raw is None:
        return 0, f"{where} is not set: the gateway serves level 0"
    text = raw.strip()
    if text.isascii() and text.isdigit() and int(text) in LEVELS:
        return int(text), None
    shown = repr(raw) if len(raw) <= 40 else f"{raw[:37]!r}…"
    return 0, f"{where} holds {shown}, not a level 0-3: the gateway serves level 0"


def _level(plan: Plan) -> int:
    return int(plan.params["level"])


class SetDegradationLevel(Action[SetDegradationLevelParams]):
    name = "set-degradation-level"
    params = SetDegradationLevelParams

    async def plan(self, params: SetDegradationLevelParams, clients: Clients) -> Plan:
        settings = clients.settings.degradation
        namespace = clients.settings.kubernetes.namespace
        before = await current_level(clients)
        if settings.store == "redis":
            where = f"Redis key {settings.redis_key}"
            target = Target("RedisKey", settings.redis_key)
            request: dict[str, Any] = {"command": ["SET", settings.redis_key, str(params.level)]}
        else:
            where = f"ConfigMap {namespace}/{settings.configmap} key {settings.configmap_key}"
            target = Target("ConfigMap", settings.configmap, namespace)
            request = {
                "method": "PATCH",
                "path": f"/api/v1/namespaces/{namespace}/configmaps/{settings.configmap}",
                "body": {"data": {settings.configmap_key: str(params.level)}},
            }
        old, note = stored_level(before, where)
        if old == params.level:
            raise PlanError(f"the degradation level is already {params.level} ({LEVELS[old]})")
        return Plan(
            action=self.name,
            params=params.model_dump(),
            target=target,
            before=f"level {old} ({LEVELS[old]})"
            + (", not set" if before is None else ", not a level" if note else ""),
            after=f"level {params.level} ({LEVELS[params.level]})",
            request=request,
            dangerous=params.level >= 2,
            confirm_word=target.name if params.level >= 2 else "yes",
            undo={"level": old},
            # The value as stored is for the re-check (the precondition), not for people: a
            # note only when it is not a plain level, saying what the gateway makes of it.
            notes=() if note is None else (note,),
            preconditions=(Precondition(STORED, before),),
        )

    async def dry_run(self, plan: Plan, clients: Clients) -> Any:
        target = plan.target
        if target.kind == "ConfigMap":
            kube = await clients.kube_writer()
            data = {clients.settings.degradation.configmap_key: str(_level(plan))}
            await kube.patch_configmap(target.namespace or "", target.name, data, dry_run=True)
            return {"server": "patch accepted (dry run)"}
        return {
            "current": await current_level(clients),
            "note": "Redis has no dry run: value read back",
        }

    async def changed_since_plan(self, plan: Plan, clients: Clients) -> str | None:
        expected = plan.expected(STORED)
        now = await current_level(clients)
        if expected is not None and now == expected.expected:
            return None
        return f"the level changed to {now!r} meanwhile"

    async def execute(self, plan: Plan, clients: Clients) -> dict[str, Any]:
        target = plan.target
        level = str(_level(plan))
        if target.kind == "ConfigMap":
            kube = await clients.kube_writer()
            data = {clients.settings.degradation.configmap_key: level}
            await kube.patch_configmap(target.namespace or "", target.name, data, dry_run=False)
        else:
            await clients.redis_writer().set(target.name, level)
        return {"set": target.name, "level": int(level)}

    async def verify(
        self, plan: Plan, clients: Clients, result: dict[str, Any], say: Say
    ) -> tuple[bool, str]:
        wanted = _level(plan)
        stored = await current_level(clients)
        if stored != str(wanted):
            return False, f"read back {stored!r}, not {wanted}"
        say(f"stored level {wanted}; waiting for the gateway to report it")
        deadline = time.monotonic() + LEVEL_SEEN_TIMEOUT_S
        async with clients.prometheus() as prom:
            while True:  # bounded by the deadline: the gauge changes at the next request + scrape
                try:
                    samples = await prom.query("max(aigw_degradation_level)")
                except BackendError as exc:
                    return False, f"stored level {wanted}; the service's level unknown: {exc}"
                if samples and samples[0].value == wanted:
                    return True, f"stored level {wanted}; the gateway reports level {wanted}"
                if time.monotonic() >= deadline:
                    seen = samples[0].value if samples else None
                    return False, f"stored level {wanted}; the gateway still reports {seen}"
                await asyncio.sleep(1.0)


ACTION = SetDegradationLevel()
