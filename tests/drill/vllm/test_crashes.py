"""A GPU out-of-memory while serving (CUDA OOM traceback, exit 0: vllm issue #48966) and a
hung EngineCore (/health 200, gauges frozen, counters stopped), as vLLM behaves (vllm issues
#19186, #13582, #39863)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest
import yaml

from oncall.probes.kube_log_facts import last_error_line, last_match, log_lines
from tests.drill.vllm.conftest import Starter
from tests.drill.vllm.helpers import completion_body, metrics_text, sample_value
from tests.harness.waiting import eventually

ROOT = Path(__file__).resolve().parents[3]
RECORDED = ROOT / "fixtures" / "vllm" / "engine_core_cuda_oom.log"


SIGNATURES = [
    "EngineCore encountered a fatal error.",
    "torch.OutOfMemoryError",
    "AsyncLLM output_handler failed.",
    "vllm.v1.engine.exceptions.EngineDeadError",
]


def _signatures(log: str) -> list[str]:
    """The SIGNATURES lines of a log, in order, once each (vLLM's prefix taken off)."""
    found = []
    for line in log.splitlines():
        text = re.sub(r"^.*?\] ", "", line)
        for signature in SIGNATURES:
            if text.startswith(signature) and signature not in found:
                found.append(signature)
    return found


def runbook_pattern(name: str) -> re.Pattern[str]:
    """A pattern of the LLMOutOfMemory checklist: `cuda_oom` (the signature it looks for),
    `consequence` (the error lines it skips)."""
    runbook = yaml.safe_load((ROOT / "runbooks" / "LLMOutOfMemory.yaml").read_text())
    return re.compile(runbook["vars"][name])


def verdict(text: str) -> tuple[str | None, str | None]:
    """(the CUDA OOM line, the last error line) as the checklist reads a log tail."""
    lines = log_lines(text, 2000)
    error = last_error_line(lines, runbook_pattern("consequence"))
    return last_match(lines, runbook_pattern("cuda_oom"))[0], error


def test_the_recorded_log_reads_as_a_gpu_oom() -> None:
    match, error = verdict(RECORDED.read_text())
    assert match is not None
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in match
    assert error is not None
    assert "torch.OutOfMemoryError" in error  # the cause, not the EngineDeadError after it


async def test_gpu_oom_logs_the_traceback_and_exits_0(sim_factory: Starter) -> None:
    sim = sim_factory("--death-exit-seconds", "0.5")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        running = asyncio.create_task(client.post("/v1/completions", json=completion_body(2000)))
        await eventually(
            lambda: _running(client),
            within=10,
            what="a running request before the OOM",
            interval=0.02,
        )
        assert (await client.post("/drill/fault", json={"fault": "gpu-oom"})).json()["dead"]
        assert (await running).status_code == 500
        assert (await client.get("/health")).status_code == 503
    assert await asyncio.to_thread(sim.proc.wait, 10) == 0
    log = sim.log()
    match, error = verdict(log)
    assert match is not None
    assert "GPU 0 has a total capacity of 79.19 GiB" in match
    assert error is not None
    assert "torch.OutOfMemoryError" in error
    # The signature lines of the recorded log, in the same order.
    recorded, ours = _signatures(RECORDED.read_text()), _signatures(log)
    assert recorded == ours == SIGNATURES
    assert "EngineCore encountered an issue. See stack trace" in log
    # The output handler's, then the one request in flight's; not a causeless death line.
    assert log.count("EngineDeadError") == 2


async def test_engine_death_without_oom_reads_as_another_crash(sim_factory: Starter) -> None:
    sim = sim_factory("--death-exit-seconds", "0.2")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        await client.post("/drill/fault", json={"fault": "engine-death"})
    assert await asyncio.to_thread(sim.proc.wait, 10) == 0
    match, error = verdict(sim.log())
    assert match is None
    assert error is not None
    assert "EngineCore encountered an issue" in error


async def _running(client: httpx.AsyncClient) -> bool:
    state = (await client.get("/drill/state")).json()
    return bool(state["running"] >= 1)


async def test_hung_engine_answers_health_but_freezes_gauges_and_counters(
    sim_factory: Starter,
) -> None:
    sim = sim_factory("--speed", "5")
    async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
        # Nothing runs yet: the hang waits for a step that runs a request, as a core hangs
        # inside a forward pass.
        armed = (await client.post("/drill/fault", json={"fault": "engine-hung"})).json()
        assert (armed["fault"], armed["hang_armed"]) == ("none", True)
        long = asyncio.create_task(client.post("/v1/completions", json=completion_body(5000)))
        hung = await eventually(
            lambda: _hung(client), within=10, what="the core hanging", interval=0.02
        )
        assert hung is not None
        assert hung["running"] == 1
        before = metrics_text(sim.url)
        tokens = sample_value(before, "vllm:generation_tokens_total")
        assert tokens > 0
        assert sample_value(before, "vllm:num_requests_running") == 1
        with pytest.raises(httpx.ReadTimeout):  # a new request waits for ever
            await client.post("/v1/completions", json=completion_body(5), timeout=1.0)
        assert (await client.get("/health")).status_code == 200
        assert (await client.get("/version")).status_code == 200
        assert (await client.get("/v1/models")).status_code == 200
        after = metrics_text(sim.url)
        assert sample_value(after, "vllm:generation_tokens_total") == tokens
        assert sample_value(after, "vllm:num_requests_running") == 1  # frozen
        assert sample_value(after, "vllm:num_requests_waiting") == 0  # frozen, though one waits
        assert sample_value(after, "vllm:request_success_total", finished_reason="abort") == 0
        assert not long.done()
        cleared = (await client.post("/drill/fault", json={"fault": "none"})).json()
        assert cleared["fault"] == "none"

        async def advancing() -> bool:
            text = metrics_text(sim.url)
            return sample_value(text, "vllm:generation_tokens_total") > tokens

        await eventually(advancing, within=10, what="tokens again after the hang", interval=0.02)
        long.cancel()


async def _hung(client: httpx.AsyncClient) -> dict[str, object] | None:
    state: dict[str, object] = (await client.get("/drill/state")).json()
    return state if state["fault"] == "engine-hung" else None
