"""The load generator: mix proportions, curves, bounds (requests, seconds, in flight),
loopback-only targets, and the command line — against an in-process stub gateway."""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from oncall_drill.gateway_sim.prompts import check_prompt
from oncall_drill.loadgen import (
    KINDS,
    MAX_DURATION_S,
    MAX_IN_FLIGHT,
    MAX_REQUESTS,
    MIX,
    LoadConfig,
    MixGenerator,
    NotLoopbackError,
    run_load,
)
from oncall_drill.loadgen.curve import arrival_times, rate_at
from tests.drill.gateway.helpers import (
    MODEL,
    REPO_ROOT,
    module_process,
    scrape,
    serve_app,
    vllm_sim,
)
from tests.harness.servers import RunningServer


@dataclass
class StubGateway:
    """Answers /chat like the gateway's prompt checks would; records what it saw."""

    delay: float = 0.0
    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    async def chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)  # the simulated service time
        finally:
            self.in_flight -= 1
        reason = check_prompt(body["prompt"], 4000)
        if reason:
            return web.json_response({"reason": reason}, status=400)
        return web.json_response({"answer": "ok"})


@pytest.fixture
async def stub() -> AsyncIterator[StubGateway]:
    gateway = StubGateway()
    app = web.Application()
    app.router.add_post("/chat", gateway.chat)
    async with serve_app(app) as url:
        gateway.url = url
        yield gateway


def test_mix_proportions_with_a_fixed_seed() -> None:
    mix = MixGenerator(seed=42)
    draws = 20_000
    counts = Counter(mix.next().kind for _ in range(draws))
    assert set(counts) == set(KINDS)
    for kind, weight in MIX.items():
        assert counts[kind] / draws == pytest.approx(weight, abs=0.01), kind
    assert sum(MIX.values()) == pytest.approx(1.0)


def test_multi_step_scenarios_are_sessions() -> None:
    mix = MixGenerator(seed=5)
    sessions = set()
    for _ in range(30):
        turns = mix.turns("multi_step")
        assert 2 <= len(turns) <= 4
        assert len({t.session for t in turns}) == 1
        sessions.add(turns[0].session)
    assert len(sessions) == 30
    assert all(t.session is None for t in mix.turns("short"))


def test_curves_shape_the_arrivals() -> None:
    counts = {c: len(list(arrival_times(c, 10, 2.0))) for c in ("constant", "ramp", "spike")}
    assert counts["constant"] == 20
    assert counts["ramp"] < counts["constant"] < counts["spike"]
    assert rate_at("spike", 10, 1.0, 2.0) == 50
    assert rate_at("ramp", 10, 0.0, 2.0) == pytest.approx(1.0)
    assert all(t < 2.0 for t in arrival_times("spike", 10, 2.0))
    with pytest.raises(ValueError, match="curve"):
        rate_at("sawtooth", 10, 0, 1)


async def test_run_stops_at_max_requests(stub: StubGateway) -> None:
    config = LoadConfig(url=stub.url, rate=200, duration_s=5, max_requests=25, seed=1)
    summary = await run_load(config)
    assert summary.sent == 25 == len(stub.bodies)
    assert summary.stopped_by == "max_requests"
    assert summary.elapsed_s < 2.0
    assert sum(summary.by_status.values()) == 25
    assert sum(summary.by_kind.values()) == 25
    assert Counter(b["kind"] for b in stub.bodies) == summary.by_kind


async def test_run_stops_at_its_duration(stub: StubGateway) -> None:
    config = LoadConfig(url=stub.url, rate=20, duration_s=0.5, max_requests=1000, seed=2)
    summary = await run_load(config)
    assert summary.stopped_by == "duration"
    assert summary.scenarios_by_kind.total() == 10  # 20/s for 0.5 s
    assert summary.elapsed_s < 1.5
    result = summary.to_dict()
    latency = result["latency_ms"]
    assert latency["p50"] <= latency["p95"] <= latency["p99"]
    assert result["answered"] == summary.sent


async def test_in_flight_is_bounded(stub: StubGateway) -> None:
    stub.delay = 0.2
    config = LoadConfig(
        url=stub.url, rate=100, duration_s=0.6, max_requests=1000, max_in_flight=3, seed=3
    )
    summary = await run_load(config)
    assert 2 <= stub.max_in_flight <= 3
    assert summary.throttled > 0
    assert summary.sent == len(stub.bodies)


async def test_a_hung_service_cannot_stretch_the_run(stub: StubGateway) -> None:
    stub.delay = 30
    config = LoadConfig(url=stub.url, rate=10, duration_s=0.3, max_requests=50, timeout_s=0.5)
    summary = await run_load(config)
    assert summary.elapsed_s < 0.3 + 0.5 + 0.5
    assert summary.by_status["error"] >= 1
    assert set(summary.by_status) == {"error"}
    assert summary.latencies_s == []


def test_hard_caps_apply_whatever_is_asked() -> None:
    config, notes = LoadConfig(
        url="http://127.0.0.1:9",
        rate=1e9,
        duration_s=1e9,
        max_requests=10**9,
        max_in_flight=10**6,
    ).normalized()
    assert config.max_requests == MAX_REQUESTS
    assert config.duration_s == MAX_DURATION_S
    assert config.max_in_flight == MAX_IN_FLIGHT
    assert config.rate <= 1000
    assert len(notes) == 4


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.7:8080",
        "http://example.com:80",
        "http://0.0.0.0:8080",
        "https://127.0.0.1:8443",
        "http://127.0.0.1",
        "ftp://127.0.0.1:21",
    ],
)
async def test_non_loopback_targets_are_refused(url: str) -> None:
    with pytest.raises(NotLoopbackError):
        await run_load(LoadConfig(url=url, rate=1, duration_s=1, max_requests=1))


async def test_loopback_forms_are_accepted(stub: StubGateway) -> None:
    port = stub.url.rsplit(":", 1)[1]
    for url in (f"http://localhost:{port}", f"http://127.0.0.1:{port}/"):
        summary = await run_load(LoadConfig(url=url, rate=50, duration_s=1, max_requests=1))
        assert summary.sent == 1


async def test_command_line_prints_a_summary(stub: StubGateway) -> None:
    argv = ["--url", stub.url, "--rate", "100", "--duration", "2", "--max-requests", "40"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oncall_drill.loadgen", *argv, "--seed", "9", "--curve", "spike",
        cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    summary = json.loads(stdout)
    assert summary["sent"] == 40 == len(stub.bodies)
    assert summary["stopped_by"] == "max_requests"
    assert sum(summary["by_status"].values()) == 40
    assert set(summary["latency_ms"]) == {"p50", "p95", "p99"}


async def test_command_line_refuses_a_remote_target() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oncall_drill.loadgen", "--url", "http://8.8.8.8:80",
        "--rate", "1", "--duration", "1", "--max-requests", "1",
        cwd=REPO_ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, stderr = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 2
    assert b"loopback" in stderr


async def test_end_to_end_through_the_real_gateway(
    tmp_path: Path, redis_srv: RunningServer
) -> None:
    """Gateway and vLLM simulator processes: exactly the mix's bad prompts are rejected."""
    seed, requests = 11, 60
    with (
        vllm_sim(tmp_path) as vllm,
        module_process(
            tmp_path,
            "oncall_drill.gateway_sim",
            "--redis-url", f"redis://127.0.0.1:{redis_srv.port}/6",
            "--vllm-url", vllm.url,
            "--model", MODEL,
        ) as gateway,
    ):  # fmt: skip
        config = LoadConfig(
            url=gateway.url, rate=200, duration_s=20, max_requests=requests, seed=seed
        )
        summary = await run_load(config)
        async with httpx.AsyncClient(trust_env=False) as http:
            metrics = await scrape(http, gateway.url)
    expected: Counter[str] = Counter()
    replay = MixGenerator(seed)
    sent = 0
    while sent < requests:  # bounded: every scenario has at least one turn
        scenario = replay.next()
        for turn in scenario.turns[: requests - sent]:
            expected[check_prompt(turn.prompt, 4000) or "ok"] += 1
            sent += 1
    assert summary.sent == requests
    assert summary.by_status["400"] == requests - expected["ok"]
    assert summary.by_status["200"] == expected["ok"]
    for reason in ("empty", "low_quality"):
        assert metrics.value("aigw_prompt_rejections_total", reason=reason) == expected[reason]
    assert metrics.value("aigw_requests_total") == requests
