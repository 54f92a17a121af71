"""The write path's clients come from `backends/from_settings.py` like the read path's: a
remediation's verification (`set-degradation-level` reads `aigw_degradation_level` through
`Clients.prometheus()`) sends `prometheus.headers`, so a tenant-scoped Mimir/Thanos answers for
the right tenant. A header-checking proxy in front of a real Prometheus stands in for Mimir's
tenant middleware (dskit `AuthenticateUser`: 401 `no org id` without `X-Scope-OrgID`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from pydantic import SecretStr

from oncall.errors import BackendError
from oncall.remediation.clients import Clients
from oncall.settings.model import PrometheusSettings, Settings
from tests.drill.gateway.helpers import serve_app
from tests.harness.servers import RunningServer

TENANT = "llm-serving"
NO_ORG_ID = (
    Path(__file__).resolve().parents[2] / "fixtures" / "mimir" / "no_org_id.txt"
).read_bytes()


def tenant_proxy(upstream: str, seen: list[str | None]) -> web.Application:
    """Forwards GET/POST /api/v1/* to the real Prometheus when `X-Scope-OrgID` is TENANT;
    answers as Mimir does without it (401 `no org id`), records each request's tenant."""

    async def forward(request: web.Request) -> web.Response:
        tenant = request.headers.get("X-Scope-OrgID")
        seen.append(tenant)
        if tenant is None:
            return web.Response(status=401, body=NO_ORG_ID, content_type="text/plain")
        if tenant != TENANT:  # another tenant: a tenant with no series
            return web.json_response(
                {"status": "success", "data": {"resultType": "vector", "result": []}}
            )
        body = await request.read()
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.request(
                request.method,
                f"{upstream}{request.path}",
                params=request.query,
                data=body,
                headers={"Content-Type": request.headers.get("Content-Type", "")},
            ) as answer,
        ):
            return web.Response(
                status=answer.status,
                body=await answer.read(),
                content_type=answer.content_type,
            )

    app = web.Application()
    app.router.add_route("*", "/api/v1/{api:.*}", forward)
    return app


@pytest.fixture
async def proxy(prometheus_srv: RunningServer) -> AsyncIterator[tuple[str, list[str | None]]]:
    seen: list[str | None] = []
    async with serve_app(tenant_proxy(prometheus_srv.url, seen)) as url:
        yield url, seen


def clients(url: str, headers: dict[str, str]) -> Clients:
    secret = {name: SecretStr(value) for name, value in headers.items()}
    return Clients.from_settings(
        Settings(prometheus=PrometheusSettings(url=url, timeout=3.0, headers=secret))
    )


async def test_verification_reads_through_the_configured_tenant(
    proxy: tuple[str, list[str | None]],
) -> None:
    url, seen = proxy
    async with clients(url, {"X-Scope-OrgID": TENANT}).prometheus() as prom:
        samples = await prom.query("vector(2)")
    assert [s.value for s in samples] == [2.0]  # the real Prometheus answered
    assert seen == [TENANT]


async def test_without_the_header_the_proxy_refuses_and_another_tenant_reads_nothing(
    proxy: tuple[str, list[str | None]],
) -> None:
    url, seen = proxy
    async with clients(url, {}).prometheus() as prom:
        with pytest.raises(BackendError, match="401"):
            await prom.query("vector(2)")
    async with clients(url, {"X-Scope-OrgID": "someone-else"}).prometheus() as prom:
        assert await prom.query("vector(2)") == []
    assert seen == [None, "someone-else"]
