"""Faults: engine death, hang, stuck model, slow start, and startup failures."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

import httpx
import pytest

from oncall_drill.netutil import port_accepts, wait_for_port
from tests.drill.vllm.conftest import Starter
from tests.drill.vllm.helpers import completion_body, metrics_text, sample_value
from tests.harness.waiting import eventually


async def _state(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/drill/state")
    response.raise_for_status()
    state: dict[str, Any] = response.json()
    return state


async def _state_running(client: httpx.AsyncClient, count: int) -> bool:
    running: int = (await _state(client))["running"]
    return running >= count


async def _stream_lines(client: httpx.AsyncClient, body: dict[str, Any]) -> list[str]:
    async with client.stream("POST", "/v1/completions", json=body) as response:
        assert response.status_code == 200
        return [line async for line in response.aiter_lines() if line]


@pytest.mark.parametrize(("version", "dead_health"), [("0.33", 503), ("0.10", 500)])
async def test_engine_death(sim_factory: Starter, version: str, dead_health: int) -> None:
    sim = sim_factory("--metrics-version", version, "--death-exit-seconds", "1.0")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        plain = asyncio.create_task(client.post("/v1/completions", json=completion_body(2000)))
        streamed = asyncio.create_task(
            _stream_lines(client, completion_body(2000, prompt="other", stream=True))
        )
        await eventually(
            lambda: _state_running(client, 2), within=10, what="two running requests", interval=0.02
        )
        injected = await client.post("/drill/fault", json={"fault": "engine-death"})
        died_at = time.monotonic()
        assert injected.json()["dead"] is True
        failed = await plain
        assert failed.status_code == 500
        assert failed.json()["error"]["type"] == "InternalServerError"
        lines = await streamed
        assert lines[-1] == "data: [DONE]"
        assert json.loads(lines[-2].removeprefix("data: "))["error"]["code"] == 500
        assert (await client.get("/health")).status_code == dead_health
        late = await client.post("/v1/completions", json=completion_body(5))
        assert late.status_code == 500
        revive = await client.post("/drill/fault", json={"fault": "none"})
        assert revive.status_code == 409
    code = await asyncio.to_thread(sim.proc.wait, 10)
    assert code == 0  # a death after start-up exits 0, as vLLM's does (vllm issue #48966)
    assert time.monotonic() - died_at < 5
    assert not port_accepts(sim.port)
    assert "EngineCore encountered an issue" in sim.log()


async def test_hang_accepts_connections_but_answers_nothing(sim_factory: Starter) -> None:
    sim = sim_factory()
    async with httpx.AsyncClient(base_url=sim.url, timeout=5) as client:
        assert (await client.post("/drill/fault", json={"fault": "hang"})).json()["fault"] == "hang"
        for path in ("/health", "/metrics", "/v1/models"):
            with pytest.raises(httpx.ReadTimeout):
                await client.get(path, timeout=0.3)
        pending = asyncio.create_task(client.get("/health", timeout=10))
        assert port_accepts(sim.port)
        assert (await _state(client))["fault"] == "hang"
        assert not pending.done()
        await client.post("/drill/fault", json={"fault": "none"})
        assert (await pending).status_code == 200  # the held request is finally answered
        assert (await client.get("/health")).status_code == 200


async def test_stuck_model_generates_under_five_tokens_per_second(sim_factory: Starter) -> None:
    sim = sim_factory("--speed", "10")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        healthy = await client.post("/v1/completions", json=completion_body(5))
        assert healthy.status_code == 200
        text = metrics_text(sim.url)
        healthy_itl = sample_value(text, "vllm:inter_token_latency_seconds_sum") / 4
        assert healthy_itl < 0.05
        state = (await client.post("/drill/fault", json={"fault": "stuck"})).json()
        assert state["per_seq_tokens_per_second"] < 5
        stuck = await client.post("/v1/completions", json=completion_body(5, prompt="again"))
        assert stuck.status_code == 200
        text = metrics_text(sim.url)
        itl_sum = sample_value(text, "vllm:inter_token_latency_seconds_sum")
        itl_count = sample_value(text, "vllm:inter_token_latency_seconds_count")
        assert itl_count == 8
        stuck_itl = (itl_sum - healthy_itl * 4) / 4
        assert stuck_itl > 0.2  # fewer than 5 tokens per second
        state = (await client.post("/drill/fault", json={"fault": "none"})).json()
        assert state["per_seq_tokens_per_second"] == 50


def test_slow_start_refuses_connections_while_loading(sim_factory: Starter) -> None:
    started = time.monotonic()
    sim = sim_factory("--load-seconds", "1.5", wait=False)
    assert not port_accepts(sim.port)
    assert wait_for_port(sim.port, timeout=15)
    assert time.monotonic() - started >= 1.5
    assert sim.proc.poll() is None
    assert httpx.get(f"{sim.url}/health", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ("--kv-capacity-tokens", "1000", "--max-model-len", "4096"),
            1,
            "larger than the available KV",
        ),
        (("--max-num-seqs", "lots"), 2, "--max-num-seqs: invalid value 'lots'"),
    ],
)
def test_startup_failures_exit(
    sim_factory: Starter, args: tuple[str, ...], code: int, message: str
) -> None:
    sim = sim_factory(*args, wait=False)
    try:
        assert sim.proc.wait(timeout=15) == code
    except subprocess.TimeoutExpired:
        pytest.fail(f"the simulator kept running: {sim.log()}")
    assert message in sim.log()
