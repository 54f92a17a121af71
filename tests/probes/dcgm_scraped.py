"""A real Prometheus that has scraped dcgm-exporter payloads, read through the GPU probe.

Shared by the fixture-file layouts test (tests/probes) and the simulated exporter's layouts
test (tests/drill/gpu): both start Prometheus, wait until every job's target has been scraped,
and then ask `oncall.probes.gpu` for one node's devices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from oncall.probes.context import ProbeContext
from oncall.probes.gpu import DevicesParams, run_devices
from oncall.settings.model import GpuSettings, PrometheusSettings, Settings
from tests.harness.servers import RunningServer
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
