"""A real Prometheus that has scraped dcgm-exporter payloads, read through the GPU probe.

Shared by the fixture-file layouts test (tests/probes) and the simulated exporter's layouts
test (tests/drill/gpu): both start Prometheus, wait until every job's target has been scraped,
and then ask `oncall.probes.gpu` for one node's devices. Recorded payload files (dcgm-exporter's
or any other exporter's) are served and scraped by `files_scraped`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from oncall.probes.context import ProbeContext
from oncall.probes.gpu import DevicesParams, run_devices
from oncall.settings.model import GpuSettings, PrometheusSettings, Settings
from tests.drill.gateway.helpers import serve_app
from tests.harness.servers import RunningServer, prometheus_server
from tests.harness.waiting import eventually


@dataclass
class Scraped:
    """Prometheus holding the scraped series."""

    prom: RunningServer

    async def devices(self, node: str) -> list[dict[str, Any]]:
        """The GPU probe's devices of `node`, read from this Prometheus (source dcgm)."""
        settings = Settings(
            prometheus=PrometheusSettings(url=self.prom.url), gpu=GpuSettings(source="dcgm")
        )
        async with ProbeContext(settings) as ctx:
            facts = await run_devices(ctx, DevicesParams(node=node))
        devices: list[dict[str, Any]] = facts["devices"]
        return devices


async def wait_scraped(
    http: httpx.AsyncClient, prom: RunningServer, query: str, expected: int, what: str
) -> Scraped:
    """Poll until the instant `query` (one number) reads `expected`, then the `Scraped` of prom."""

    async def settled() -> bool:
        response = await http.get(f"{prom.url}/api/v1/query", params={"query": query})
        result = response.json()["data"]["result"]
        return bool(result) and result[0]["value"][1] == str(expected)

    await eventually(settled, within=30, what=what)
    return Scraped(prom)


def text_files_app(files: Mapping[str, Path]) -> web.Application:
    """An app answering `/<key>` with the text of `files[key]`, as an exporter's /metrics."""
    texts = {f"/{key}": path.read_text(encoding="utf-8") for key, path in files.items()}

    async def serve(request: web.Request) -> web.Response:
        return web.Response(text=texts[request.path], content_type="text/plain")

    app = web.Application()
    for route in texts:
        app.router.add_get(route, serve)
    return app


@asynccontextmanager
async def files_scraped(
    directory: Path,
    files: Mapping[str, Path],
    jobs: Callable[[str], list[dict[str, Any]]],
    what: str,
) -> AsyncIterator[Scraped]:
    """A real Prometheus (its data under `directory`) once it has scraped `files`, served as
    `text_files_app` does: `jobs(host:port)` are its scrape configs, and every job's target is
    up before it is yielded."""
    async with (
        serve_app(text_files_app(files)) as url,
        httpx.AsyncClient(trust_env=False, timeout=5) as http,
    ):
        scrape_configs = jobs(url.removeprefix("http://"))
        with prometheus_server(directory, scrape_configs=scrape_configs) as prom:
            yield await wait_scraped(http, prom, "count(up == 1)", len(scrape_configs), what=what)
