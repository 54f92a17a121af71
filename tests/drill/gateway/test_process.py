"""`python -m oncall_drill.gateway_sim` as a real process: serves, refuses non-loopback URLs."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.drill.gateway.conftest import DB
from tests.drill.gateway.helpers import MODEL, Proc, module_process, run_module
from tests.harness.servers import RunningServer


async def test_gateway_process_serves_chat_and_metrics(
    tmp_path: Path, redis_srv: RunningServer, upstreams: tuple[Proc, Proc]
) -> None:
    args = [
        "--redis-url", f"redis://127.0.0.1:{redis_srv.port}/{DB}",
        "--vllm-url", upstreams[0].url,
        "--vllm-url", upstreams[1].url,
        "--model", MODEL,
        "--seed", "3",
    ]  # fmt: skip
    with module_process(tmp_path, "oncall_drill.gateway_sim", *args) as gateway:
        async with httpx.AsyncClient(trust_env=False, timeout=10) as http:
            response = await http.post(f"{gateway.url}/chat", json={"prompt": "How do I log in?"})
            assert response.status_code == 200, response.text
            metrics = await http.get(f"{gateway.url}/metrics")
    assert 'aigw_requests_total{code="200"} 1.0' in metrics.text
    assert gateway.proc.returncode == 0  # SIGTERM stops it cleanly


def test_gateway_refuses_non_loopback_upstreams() -> None:
    result = run_module(
        "oncall_drill.gateway_sim",
        "--port",
        "1",
        "--redis-url",
        "redis://127.0.0.1:6379/0",
        "--vllm-url",
        "http://10.0.0.8:8000",
        "--model",
        MODEL,
    )
    assert result.returncode == 2
    assert "loopback" in result.stderr
