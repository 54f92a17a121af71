"""Under load: the batch limit holds, requests queue, and a small KV cache preempts."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from tests.drill.vllm.conftest import Starter
from tests.drill.vllm.helpers import completion_body, sample_value

PROMPT = " ".join(f"word{i}" for i in range(20))


async def _flood(
    url: str, count: int, max_tokens: int, prompt: str = "hello world"
) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        return await asyncio.gather(
            *(
                client.post(
                    "/v1/completions", json=completion_body(max_tokens, prompt=f"{prompt} {i}")
                )
                for i in range(count)
            )
        )


async def _watch(
    url: str, done: asyncio.Event, within: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """Sample /drill/state and /metrics until `done` (bounded by time and count)."""
    states: list[dict[str, Any]] = []
    scrapes: list[str] = []
    deadline = time.monotonic() + within
    async with httpx.AsyncClient(base_url=url, timeout=5) as client:
        for i in range(2000):
            if done.is_set() or time.monotonic() > deadline:
                break
            states.append((await client.get("/drill/state")).json())
            if i % 3 == 0:
                scrapes.append((await client.get("/metrics")).text)
            await asyncio.sleep(0.01)
    return states, scrapes


async def test_flood_never_runs_more_than_max_num_seqs(sim_factory: Starter) -> None:
    sim = sim_factory("--max-num-seqs=4", "--speed", "4", "--kv-capacity-tokens", "100000")
    done = asyncio.Event()
    watcher = asyncio.create_task(_watch(sim.url, done, within=20))
    responses = await _flood(sim.url, count=16, max_tokens=30)
    done.set()
    states, scrapes = await watcher
    assert [r.status_code for r in responses] == [200] * 16
    assert all(r.json()["usage"]["completion_tokens"] == 30 for r in responses)
    assert states, "the watcher saw nothing"
    assert max(s["running"] for s in states) == 4
    assert max(s["waiting"] for s in states) > 0
    running = [sample_value(text, "vllm:num_requests_running") for text in scrapes]
    waiting = [sample_value(text, "vllm:num_requests_waiting") for text in scrapes]
    assert max(running) <= 4
    assert max(waiting) > 0


async def test_small_kv_cache_preempts_but_every_request_completes(sim_factory: Starter) -> None:
    sim = sim_factory(
        "--max-num-seqs",
        "8",
        "--kv-capacity-tokens",
        "256",
        "--speed",
        "8",
        "--tokens-per-second",
        "100",
    )
    responses = await _flood(sim.url, count=8, max_tokens=100, prompt=PROMPT)
    assert [r.status_code for r in responses] == [200] * 8
    assert all(r.json()["choices"][0]["finish_reason"] == "length" for r in responses)
    async with httpx.AsyncClient(base_url=sim.url, timeout=5) as client:
        text = (await client.get("/metrics")).text
        state = (await client.get("/drill/state")).json()
    preemptions = sample_value(text, "vllm:num_preemptions_total")
    assert preemptions > 0
    assert state["preemptions"] == preemptions
    assert sample_value(text, "vllm:request_num_preemptions_sum") == preemptions
    assert sample_value(text, "vllm:request_success_total", finished_reason="length") == 8
    assert (state["running"], state["waiting"], state["kv_used_tokens"]) == (0, 0, 0)


async def test_large_kv_cache_does_not_preempt(sim_factory: Starter) -> None:
    sim = sim_factory("--max-num-seqs", "8", "--kv-capacity-tokens", "4096", "--speed", "8")
    responses = await _flood(sim.url, count=8, max_tokens=100, prompt=PROMPT)
    assert [r.status_code for r in responses] == [200] * 8
    async with httpx.AsyncClient(base_url=sim.url, timeout=5) as client:
        text = (await client.get("/metrics")).text
    assert sample_value(text, "vllm:num_preemptions_total") == 0
