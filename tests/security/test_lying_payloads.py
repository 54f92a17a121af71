"""Issue 29 item 9 (read side): JSON, or a 200, that is not the backend's answer is `bad payload`
(the step `unknown` with the reason), never a finding.

- The Kubernetes API answering `{"hello": "world"}` (a proxy or a liar in front of it): the
  Deployment read as "0/1 ready" before; a list whose items have no `metadata` likewise.
  kubectl decodes by `kind`; oncall now reads an object only if it has the kind asked for and
  a name, a list only if it is the `KindList` with `items` that have `metadata`.
- vLLM's `/health` answering 200 with a body: real vLLM answers an empty 200
  (`Response(status_code=200)` in `vllm/entrypoints/serve/instrumentator/health.py`; the
  drill's simulator the same), so a body ("OK", `{"status": "ok"}`, a catch-all page) is
  something else answering for the server, which says nothing of the engine: unknown. The
  empty 200 is still healthy and a 503 still an unhealthy engine (the controls).

Real loopback HTTP servers (tests/harness/faults.py), oncall's own clients, the real engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oncall.model.checklist_events import StepResult
from oncall.service.checklists import load_checked, stream_checklist
from oncall.settings.model import Settings
from tests.harness.faults import http_stub, kubeconfig_for

HELLO = json.dumps({"hello": "world"}).encode()


def runbook(folder: Path, probe: str, params: str, expect: str) -> Path:
    path = folder / "Liar.yaml"
    path.write_text(
        "alert: Liar\ntitle: a lying backend\nsteps:\n"
        f"  - {{id: read, title: read it, probe: {probe}, params: {params},"
        f" expect: '{expect}', timeout: 10s}}\n"
    )
    return path


async def step_of(settings: Settings, path: Path) -> StepResult:
    events = [e async for e in stream_checklist(settings, load_checked(path), {"name": "Liar"})]
    (result,) = [e for e in events if isinstance(e, StepResult)]
    return result


def kube_settings(tmp_path: Path, url: str) -> Settings:
    config = kubeconfig_for(tmp_path / "kubeconfig", url)
    return Settings.model_validate({"kubernetes": {"kubeconfig": str(config), "timeout": "5s"}})


DEPLOYMENT = ("kube.deployment", "{name: vllm}", "facts.ready_replicas == facts.replicas")
PODS = ("kube.pods", "{selector: app=vllm}", "facts.ready == facts.count")
KUBE_LIES = {
    "object": (DEPLOYMENT, HELLO, "expected a Deployment, got an object with keys 'hello'"),
    "list items": (
        PODS,
        json.dumps({"kind": "PodList", "items": [{"hello": "world"}]}).encode(),
        "expected a PodList, got 'PodList'",
    ),
    "list kind": (
        PODS,
        json.dumps({"kind": "Deployment", "metadata": {"name": "x"}, "items": []}).encode(),
        "expected a PodList, got 'Deployment'",
    ),
}


@pytest.mark.parametrize("lie", list(KUBE_LIES))
async def test_a_kubernetes_answer_that_is_not_the_object_is_a_bad_payload(
    tmp_path: Path, lie: str
) -> None:
    (probe, params, expect), body, said = KUBE_LIES[lie]
    with http_stub(200, body, "application/json") as url:
        settings = kube_settings(tmp_path, url)
        result = await step_of(settings, runbook(tmp_path, probe, params, expect))
    assert result.status == "unknown", result
    assert result.reason is not None and "bad payload" in result.reason, result.reason
    assert said in result.reason


@pytest.mark.parametrize(
    ("status", "kind", "body", "verdict"),
    [
        (200, "text/plain", b"OK", "bad payload"),
        (200, "application/json", b'{"status": "ok"}', "bad payload"),
        (200, "application/json", HELLO, "bad payload"),
        (200, "text/plain", b"", "ok"),  # what vLLM answers
        (503, "text/plain", b"", "fail"),  # a dead engine (vLLM >= 0.11)
    ],
    ids=["200 OK text", "200 status json", "200 hello", "empty 200", "503"],
)
async def test_vllm_health_is_an_empty_200(
    tmp_path: Path, status: int, kind: str, body: bytes, verdict: str
) -> None:
    with http_stub(status, body, kind) as url:
        settings = Settings.model_validate({"vllm": {"urls": [url], "timeout": "5s"}})
        path = runbook(tmp_path, "vllm.health", "{}", "facts.all_healthy")
        result = await step_of(settings, path)
    if verdict == "bad payload":
        assert result.status == "unknown", result
        assert result.reason is not None and "bad payload" in result.reason, result.reason
        assert "vLLM's is empty" in result.reason
    else:
        assert result.status == verdict, result
