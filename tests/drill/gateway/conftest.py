"""Fixtures of the gateway tests: two real vLLM simulators, Redis, an in-process gateway."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest
import redis.asyncio as aioredis

from oncall_drill.gateway_sim.config import GatewaySettings
from oncall_drill.gateway_sim.server import GATEWAY_KEY, Gateway, build_app
from tests.drill.gateway.helpers import MODEL, Proc, serve_app, vllm_sim
from tests.harness.servers import RunningServer

#: The gateway tests use their own Redis database, flushed before each test.
DB = 5
MAX_PROMPT_CHARS = 200


@pytest.fixture(scope="package")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Proc]]:
    directory = tmp_path_factory.mktemp("vllm")
    with vllm_sim(directory) as first, vllm_sim(directory) as second:
        yield first, second


@dataclass
class RunningGateway:
    url: str
    gateway: Gateway
    http: httpx.AsyncClient
    redis: aioredis.Redis

    async def chat(self, prompt: str, **extra: str) -> httpx.Response:
        return await self.http.post(f"{self.url}/chat", json={"prompt": prompt, **extra})

    async def set_level(self, level: int | None) -> None:
        if level is None:
            await self.redis.delete("ai-gateway:degradation-level")
        else:
            await self.redis.set("ai-gateway:degradation-level", str(level))

    async def configure(self, **fields: object) -> httpx.Response:
        return await self.http.post(f"{self.url}/drill/config", json=fields)


@pytest.fixture
async def redis_db(redis_srv: RunningServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis(port=redis_srv.port, db=DB, decode_responses=True)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.flushdb()
        await client.aclose()


GatewayFactory = Callable[[tuple[str, ...]], contextlib.AbstractAsyncContextManager[RunningGateway]]


@pytest.fixture
def gateway_to(redis_srv: RunningServer, redis_db: aioredis.Redis) -> GatewayFactory:
    """Factory: `async with gateway_to(urls) as gw:` a gateway with these upstream URLs."""

    @contextlib.asynccontextmanager
    async def make(urls: tuple[str, ...]) -> AsyncIterator[RunningGateway]:
        settings = GatewaySettings(
            redis_url=f"redis://127.0.0.1:{redis_srv.port}/{DB}",
            vllm_urls=urls,
            model=MODEL,
            max_prompt_chars=MAX_PROMPT_CHARS,
            seed=1,
        )
        app = build_app(settings)
        async with serve_app(app) as url, httpx.AsyncClient(trust_env=False, timeout=10) as http:
            yield RunningGateway(url, app[GATEWAY_KEY], http, redis_db)

    return make


@pytest.fixture
async def gateway(
    gateway_to: GatewayFactory, upstreams: tuple[Proc, Proc]
) -> AsyncIterator[RunningGateway]:
    """A gateway in this test's event loop; upstreams: the two simulators; seed 1."""
    async with gateway_to(tuple(u.url for u in upstreams)) as running:
        yield running
