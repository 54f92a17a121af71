"""Ops and OpenAI endpoints of a running simulator: status codes and payload shapes."""

from __future__ import annotations

import json
import time

import httpx

from tests.drill.vllm.conftest import Starter
from tests.drill.vllm.helpers import MODEL, SimProcess, completion_body


def test_ops_endpoints(shared_sim: SimProcess) -> None:
    with httpx.Client(base_url=shared_sim.url, timeout=5) as client:
        health = client.get("/health")
        assert (health.status_code, health.content) == (200, b"")
        assert client.get("/ping").status_code == 200
        assert client.get("/version").json() == {"version": "0.33.0"}
        assert client.get("/load").json() == {"server_load": 0}
        state = client.get("/drill/state").json()
        assert state["max_num_seqs"] == 8
        assert state["fault"] == "none"
        assert state["kv_capacity_tokens"] == 8192


def test_models(shared_sim: SimProcess) -> None:
    body = httpx.get(f"{shared_sim.url}/v1/models", timeout=5).json()
    assert body["object"] == "list"
    (card,) = body["data"]
    assert card["id"] == MODEL
    assert card["object"] == "model"
    assert card["owned_by"] == "vllm"
    assert card["root"] == MODEL
    assert card["max_model_len"] == 8192
    assert card["permission"][0]["object"] == "model_permission"


def test_completion(shared_sim: SimProcess) -> None:
    response = httpx.post(
        f"{shared_sim.url}/v1/completions",
        json=completion_body(12, prompt="one two three"),
        timeout=10,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "text_completion"
    assert body["id"].startswith("cmpl-")
    assert body["model"] == MODEL
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "length"
    assert len(choice["text"].split()) == 12
    assert body["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 12,
        "total_tokens": 15,
        "prompt_tokens_details": None,
    }


def test_chat_completion_stops_by_itself_without_ignore_eos(shared_sim: SimProcess) -> None:
    request = {"model": MODEL, "messages": [{"role": "user", "content": "Say something."}]}
    body = httpx.post(f"{shared_sim.url}/v1/chat/completions", json=request, timeout=10).json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["role"] == "assistant"
    words = len(choice["message"]["content"].split())
    assert words == body["usage"]["completion_tokens"] > 0
    assert body["usage"]["prompt_tokens"] > 3  # content plus chat-template tokens


def _sse_payloads(lines: list[str]) -> list[str]:
    assert all(line.startswith("data: ") for line in lines if line), lines
    return [line.removeprefix("data: ") for line in lines if line]


def test_chat_streaming(shared_sim: SimProcess) -> None:
    request = {
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 6,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream(
        "POST", f"{shared_sim.url}/v1/chat/completions", json=request, timeout=10
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        payloads = _sse_payloads(list(response.iter_lines()))
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content_chunks = [c for c in chunks if c["choices"] and "content" in c["choices"][0]["delta"]]
    text = "".join(c["choices"][0]["delta"]["content"] for c in content_chunks)
    assert len(text.split()) == 6
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == "length"
    assert all(reason is None for reason in finish[:-1])
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 6


def test_completion_stream_is_paced_by_token_generation(sim_factory: Starter) -> None:
    # Real time: 25 tokens at 50 tokens/s take about half a second.
    sim = sim_factory("--tokens-per-second", "50", "--speed", "1")
    arrivals: list[float] = []
    texts: list[str] = []
    start = time.monotonic()
    with httpx.stream(
        "POST", f"{sim.url}/v1/completions", json=completion_body(25, stream=True), timeout=10
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                arrivals.append(time.monotonic() - start)
                texts.append(json.loads(line.removeprefix("data: "))["choices"][0]["text"])
    assert len(texts) == 25
    assert arrivals[-1] - arrivals[0] >= 0.4
    assert arrivals[-1] < 5


def test_request_errors(shared_sim: SimProcess) -> None:
    url = shared_sim.url
    with httpx.Client(base_url=url, timeout=5) as client:
        unknown = client.post("/v1/completions", json={"model": "nope", "prompt": "x"})
        assert unknown.status_code == 404
        assert unknown.json()["error"] == {
            "message": "The model `nope` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        too_long = client.post("/v1/completions", json=completion_body(9000))
        assert too_long.status_code == 400
        assert "maximum context length is 8192" in too_long.json()["error"]["message"]
        assert client.post("/v1/chat/completions", content=b"{not json").status_code == 400
        assert client.post("/v1/chat/completions", json={"messages": []}).status_code == 400
        assert client.post("/drill/fault", json={"fault": "meteor"}).status_code == 400


def test_api_key_guards_only_v1(sim_factory: Starter) -> None:
    sim = sim_factory("--api-key", "s3cret")
    with httpx.Client(base_url=sim.url, timeout=5) as client:
        denied = client.get("/v1/models")
        assert (denied.status_code, denied.json()) == (401, {"error": "Unauthorized"})
        allowed = client.get("/v1/models", headers={"Authorization": "Bearer s3cret"})
        assert allowed.status_code == 200
        assert client.get("/health").status_code == 200
        assert client.get("/metrics").status_code == 200
