"""The aiohttp application of the simulated AI gateway.

`build_app(settings)` returns an application whose `GATEWAY_KEY` entry is the `Gateway`.
Routes:

* `POST /chat` `{"prompt": str, "kind"?: str, "session"?: str}` — degradation level (Redis,
  every request) → level 3: static page; prompt checks (400 + reason); level 2: FAQ answer;
  forced unavailability (503); response cache (Redis; not for session turns, whose answers
  depend on the conversation); vector search (level 0 only); the LLM (503 on failure); cache set
  with the configured TTL. Every answer carries `X-Degradation-Level`.
* `GET /metrics`, `GET /health`;
* drill only: `GET|POST /drill/config` (see `DrillConfig`), `POST /drill/reset` (configuration
  back to the start values, cache and session keys deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError

from oncall_drill.gateway_sim.answers import STATIC_PAGE, faq_answer
from oncall_drill.gateway_sim.config import (
    CACHE_PREFIX,
    DEGRADATION_KEY,
    MAX_LEVEL,
    SESSION_PREFIX,
    ConfigError,
    DrillConfig,
    GatewaySettings,
)
from oncall_drill.gateway_sim.latency import draw_seconds
from oncall_drill.gateway_sim.metrics import CONTENT_TYPE, GatewayMetrics
from oncall_drill.gateway_sim.prompts import check_prompt
from oncall_drill.gateway_sim.upstream import LlmUpstreams, UpstreamError

ROUTE = "/chat"
#: Every endpoint, declared at its handler.
ROUTES = web.RouteTableDef()
SESSION_TTL_SECONDS = 1800
#: Turns of a session kept (user + assistant messages).
SESSION_KEEP = 10
#: Keys deleted per SCAN batch by /drill/reset, and the most batches (bounded).
RESET_SCAN_COUNT = 500
RESET_MAX_BATCHES = 1000
SYSTEM_PROMPT = "You are the support assistant. Answer briefly."


@dataclass
class Outcome:
    """What the pipeline decided: status, JSON body or HTML page."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)
    html: str | None = None


class Gateway:
    """State shared by the handlers: settings, drill config, metrics, clients."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.settings = settings
        self.initial_config = DrillConfig()
        self.config = self.initial_config
        self.metrics = GatewayMetrics()
        self.rng = random.Random(settings.seed)  # noqa: S311 - simulation, not crypto
        self.last_level = 0
        self._warned: set[str] = set()
        timeout = settings.redis_timeout_seconds
        self.redis: aioredis.Redis = aioredis.Redis.from_url(
            settings.redis_url,
            decode_responses=True,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )
        self.upstreams = LlmUpstreams(settings.vllm_urls, settings.model)

    async def aclose(self) -> None:
        """Close the Redis and HTTP connection pools."""
        await self.upstreams.aclose()
        await self.redis.aclose()

    def warn_once(self, kind: str, message: str) -> None:
        """Log a recurring problem once per kind, on stderr."""
        if kind not in self._warned:
            self._warned.add(kind)
            print(f"WARNING {message}", file=sys.stderr, flush=True)

    async def read_level(self) -> int:
        """The degradation level from Redis: missing = 0; unreadable Redis = the last level."""
        try:
            raw = await self.redis.get(DEGRADATION_KEY)
        except RedisError as exc:
            self.warn_once("level", f"cannot read {DEGRADATION_KEY}: {exc}; keeping the level")
            return self.last_level
        if raw is None:
            level = 0
        else:
            try:
                level = int(str(raw).strip())
            except ValueError:
                level = -1
            if not 0 <= level <= MAX_LEVEL:
                self.warn_once("bad-level", f"{DEGRADATION_KEY}={raw!r} is not 0..3; using 0")
                level = 0
        self.last_level = level
        return level

    async def cache_get(self, key: str) -> str | None:
        """A cached answer, or None (a miss; an unreachable cache behaves like misses)."""
        try:
            value = await self.redis.get(key)
        except RedisError as exc:
            self.warn_once("cache", f"response cache unavailable: {exc}")
            value = None
        result = "miss" if value is None else "hit"
        self.metrics.cache_lookups.labels(result=result).inc()
        return None if value is None else str(value)

    async def cache_set(self, key: str, answer: str) -> None:
        with contextlib.suppress(RedisError):
            await self.redis.set(key, answer, ex=self.config.cache_ttl_seconds)

    async def history(self, session: str) -> list[dict[str, str]]:
        try:
            items = await self.redis.lrange(SESSION_PREFIX + session, 0, -1)
        except RedisError:
            return []
        out: list[dict[str, str]] = []
        for item in items:
            with contextlib.suppress(ValueError, TypeError):
                message = json.loads(item)
                out.append({"role": str(message["role"]), "content": str(message["content"])})
        return out

    async def remember(self, session: str, prompt: str, answer: str) -> None:
        key = SESSION_PREFIX + session
        turns = [
            json.dumps({"role": "user", "content": prompt}),
            json.dumps({"role": "assistant", "content": answer}),
        ]
        with contextlib.suppress(RedisError):
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, *turns)
                pipe.ltrim(key, -SESSION_KEEP, -1)
                pipe.expire(key, SESSION_TTL_SECONDS)
                await pipe.execute()

    async def delete_drill_keys(self) -> int:
        """Delete cache and session keys (bounded SCAN); returns how many went."""
        deleted = 0
        for prefix in (CACHE_PREFIX, SESSION_PREFIX):
            cursor = 0
            for _ in range(RESET_MAX_BATCHES):
                cursor, keys = await self.redis.scan(
                    cursor, match=f"{prefix}*", count=RESET_SCAN_COUNT
                )
                if keys:
                    deleted += int(await self.redis.delete(*keys))
                if cursor == 0:
                    break
        return deleted

    async def pipeline(self, level: int, prompt: str, session: str | None) -> Outcome:
        """Everything between reading the level and answering."""
        if level >= 3:
            return Outcome(200, html=STATIC_PAGE)
        cfg = self.config
        reason = check_prompt(prompt, self.settings.max_prompt_chars)
        extra = cfg.extra_rejection_rate
        if reason is None and extra and self.rng.random() < extra:
            reason = "policy"
        if reason is not None:
            self.metrics.rejections.labels(reason=reason).inc()
            return Outcome(400, {"error": "prompt rejected", "reason": reason})
        if level == 2:
            entry = faq_answer(prompt)
            return Outcome(200, {"source": "faq", "faq_id": entry.id, "answer": entry.answer})
        if cfg.unavailable_fraction and self.rng.random() < cfg.unavailable_fraction:
            return Outcome(503, {"error": "service unavailable", "detail": "forced by the drill"})
        cache_key = None if session else CACHE_PREFIX + hashlib.sha256(prompt.encode()).hexdigest()
        for _ in range(cfg.cache_penetration_lookups):
            await self.cache_get(f"{CACHE_PREFIX}absent:{self.rng.getrandbits(64):016x}")
        if cache_key is not None:
            cached = await self.cache_get(cache_key)
            if cached is not None:
                return Outcome(200, {"source": "cache", "answer": cached})
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        if level == 0:
            seconds = draw_seconds(
                self.rng,
                cfg.vector_search_distribution,
                cfg.vector_search_p50_seconds,
                cfg.vector_search_p999_seconds,
            )
            await asyncio.sleep(seconds)
            self.metrics.vector_duration.observe(seconds)
            messages.append({"role": "system", "content": "Context: 3 retrieved passages."})
        if session:
            messages.extend(await self.history(session))
        messages.append({"role": "user", "content": prompt})
        started = time.monotonic()
        try:
            answer = await self.upstreams.chat(
                messages,
                max_tokens=cfg.llm_max_tokens,
                timeout_seconds=cfg.llm_timeout_seconds,
                ignore_eos=cfg.llm_ignore_eos,
            )
        except UpstreamError as exc:
            return Outcome(503, {"error": "upstream unavailable", "detail": str(exc)})
        finally:
            self.metrics.llm_duration.observe(time.monotonic() - started)
        if cache_key is not None:
            await self.cache_set(cache_key, answer.text)
        if session:
            await self.remember(session, prompt, answer.text)
        source = "rag+llm" if level == 0 else "llm"
        return Outcome(200, {"source": source, "answer": answer.text, "upstream": answer.upstream})


GATEWAY_KEY = web.AppKey("gateway_sim", Gateway)


def _gw(request: web.Request) -> Gateway:
    return request.app[GATEWAY_KEY]


async def _parse_chat(request: web.Request) -> tuple[str, str | None] | str:
    """(prompt, session) from the body, or the reason it is malformed."""
    try:
        body = await request.json()
    except ValueError:
        return "request body is not valid JSON"
    if not isinstance(body, dict) or not isinstance(body.get("prompt"), str):
        return 'expected {"prompt": str, "kind"?: str, "session"?: str}'
    session = body.get("session")
    if session is not None and (not isinstance(session, str) or len(session) > 128):
        return "session must be a string of at most 128 characters"
    return body["prompt"], session or None


@ROUTES.post(ROUTE)
async def chat(request: web.Request) -> web.Response:
    """`POST /chat`: the whole pipeline, measured."""
    gw = _gw(request)
    started = time.monotonic()
    level = await gw.read_level()
    gw.metrics.level.set(level)
    parsed = await _parse_chat(request)
    if isinstance(parsed, str):
        outcome = Outcome(400, {"error": parsed})
    else:
        outcome = await gw.pipeline(level, *parsed)
    outcome.body["level"] = level
    gw.metrics.requests.labels(code=str(outcome.status)).inc()
    if outcome.status == 503:
        gw.metrics.unavailable.inc()
    headers = {"X-Degradation-Level": str(level)}
    if outcome.html is not None:
        response = web.Response(
            text=outcome.html, content_type="text/html", status=outcome.status, headers=headers
        )
    else:
        response = web.json_response(outcome.body, status=outcome.status, headers=headers)
    gw.metrics.request_duration.labels(route=ROUTE, level=str(level)).observe(
        time.monotonic() - started
    )
    return response


@ROUTES.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    """Prometheus exposition text."""
    return web.Response(body=_gw(request).metrics.render(), headers={"Content-Type": CONTENT_TYPE})


@ROUTES.get("/health")
async def health(request: web.Request) -> web.Response:
    """Liveness: the process answers."""
    return web.json_response({"status": "ok"})


@ROUTES.get("/drill/config")
async def get_config(request: web.Request) -> web.Response:
    """The current drill configuration."""
    return web.json_response(_gw(request).config.as_dict())


@ROUTES.post("/drill/config")
async def post_config(request: web.Request) -> web.Response:
    """Change some drill fields; 400 with every problem if any is wrong (nothing changes)."""
    gw = _gw(request)
    try:
        payload = await request.json()
    except ValueError:
        return web.json_response({"errors": ["request body is not valid JSON"]}, status=400)
    try:
        gw.config = gw.config.updated(payload)
    except ConfigError as exc:
        return web.json_response({"errors": exc.problems}, status=400)
    return web.json_response(gw.config.as_dict())


@ROUTES.post("/drill/reset")
async def reset(request: web.Request) -> web.Response:
    """Configuration back to its start values; cache and session keys deleted."""
    gw = _gw(request)
    gw.config = gw.initial_config
    try:
        deleted = await gw.delete_drill_keys()
    except RedisError as exc:
        return web.json_response(
            {"config": gw.config.as_dict(), "error": f"redis: {exc}"}, status=502
        )
    return web.json_response({"config": gw.config.as_dict(), "deleted_keys": deleted})


def build_app(settings: GatewaySettings) -> web.Application:
    """The application of one simulated gateway; `app[GATEWAY_KEY]` is its `Gateway`."""
    app = web.Application()
    gateway = Gateway(settings)
    app[GATEWAY_KEY] = gateway

    async def clients(app: web.Application) -> AsyncIterator[None]:
        yield
        await gateway.aclose()

    app.cleanup_ctx.append(clients)
    app.add_routes(ROUTES)
    return app
