"""Stuck detection of a hung EngineCore (vllm issue #39863): /health 200, gauges frozen,
counters still. `vllm.metrics` on the recorded payload served unchanged and on a hung
simulator; `vllm.rates` through a real Prometheus scraping a hung and a healthy pod."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oncall.probes.context import ProbeContext
from tests.drill.vllm.helpers import SimProcess, completion_body, sim_factory
from tests.harness.faults import http_stub
from tests.harness.servers import RunningServer
from tests.harness.waiting import eventually
from tests.probes.test_vllm_probes import BASE_ARGS, MODEL, run, settings

HUNG = Path(__file__).resolve().parents[2] / "fixtures" / "vllm" / "metrics_0.33_hung_engine.txt"


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    with sim_factory(tmp_path, *BASE_ARGS) as factory:
        yield factory


async def _hung(client: httpx.AsyncClient, sim: SimProcess) -> bool:
    state: dict[str, Any] = (await client.get(f"{sim.url}/drill/state")).json()
    return bool(state["fault"] == "engine-hung")


async def _running(client: httpx.AsyncClient, sim: SimProcess) -> bool:
    state: dict[str, Any] = (await client.get(f"{sim.url}/drill/state")).json()
    return bool(state["running"] >= 1 and state["generation_tokens"] > 0)


def _generate(client: httpx.AsyncClient, sim: SimProcess) -> asyncio.Task[httpx.Response]:
    """A long request (two minutes at 50 tokens/s), so the engine has a step to hang in."""
    body = completion_body(6000, prompt=sim.url) | {"model": MODEL}
    return asyncio.create_task(client.post(f"{sim.url}/v1/completions", json=body))


async def test_the_recorded_payload_served_twice_is_stalled() -> None:
    with http_stub(200, HUNG.read_bytes(), "text/plain; version=0.0.4") as url:
        async with ProbeContext(settings(url)) as ctx:
            facts = await run(ctx, "vllm.metrics", interval=0.2)
    (server,) = facts["servers"]
    assert (server["running"], server["waiting"], server["tokens_per_s"]) == (87, 14, 0.0)
    assert server["stalled"] is True
    assert facts["stalled_count"] == 1


async def test_metrics_probe_tells_a_hung_engine_from_a_busy_one(
    sims: Callable[..., SimProcess],
) -> None:
    busy, hung = sims(), sims()
    async with httpx.AsyncClient(timeout=30) as client:
        tasks = [_generate(client, busy), _generate(client, hung)]
        await client.post(f"{hung.url}/drill/fault", json={"fault": "engine-hung"})
        await eventually(lambda: _hung(client, hung), within=10, what="the engine hung")
        await eventually(lambda: _running(client, busy), within=10, what="the busy one running")
        assert (await client.get(f"{hung.url}/health")).status_code == 200
        async with ProbeContext(settings(busy.url, hung.url)) as ctx:
            facts = await run(ctx, "vllm.metrics", interval=0.3)
        for task in tasks:
            task.cancel()
    by_url = {server["url"]: server for server in facts["servers"]}
    assert by_url[busy.url]["stalled"] is False
    assert by_url[busy.url]["tokens_per_s"] > 0
    assert by_url[hung.url]["stalled"] is True
    assert by_url[hung.url]["running"] == 1
    assert facts["stalled_count"] == 1


async def test_rates_probe_names_the_stalled_pod(
    sims: Callable[..., SimProcess], start_prometheus: Callable[..., RunningServer]
) -> None:
    busy, hung = sims(), sims()
    static = [
        {"targets": [f"127.0.0.1:{busy.port}"], "labels": {"pod": "vllm-busy"}},
        {"targets": [f"127.0.0.1:{hung.port}"], "labels": {"pod": "vllm-hung"}},
    ]
    prometheus = start_prometheus(scrape_configs=[{"job_name": "vllm", "static_configs": static}])
    async with httpx.AsyncClient(timeout=60) as client:
        tasks = [_generate(client, busy), _generate(client, hung)]
        await client.post(f"{hung.url}/drill/fault", json={"fault": "engine-hung"})
        await eventually(lambda: _hung(client, hung), within=10, what="the engine hung")
        seen: dict[str, Any] = {}
        async with ProbeContext(settings(prometheus=prometheus.url)) as ctx:

            async def stalled() -> bool:
                seen.update(await run(ctx, "vllm.rates", window="4s", selector='job="vllm"'))
                # Both rated: the hung pod standing still, the busy one generating.
                return bool(seen["stalled_pods"]) and (seen["tokens_per_s"] or 0.0) > 0

            await eventually(stalled, within=30, what="Prometheus to rate both pods")
        for task in tasks:
            task.cancel()
    assert seen["stalled_pods"] == ["vllm-hung"]
