"""The `kube.logs` probe through oncall's Kubernetes client against the simulator, over the
recorded payloads of `fixtures/`: a previous container that died of a CUDA OOM while serving
(Completed, exit 0: vllm issue #48966), one OOM-killed (137), redaction of secrets, bounds, and
the pod JSON readings."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from oncall.probes import kube_log_facts as facts_of
from oncall.probes.context import ProbeContext
from oncall.probes.kube_facts import pod_facts
from oncall.probes.kube_logs import PROBES, LogsParams, logs_equivalent
from oncall.settings.model import KubernetesSettings, Settings
from oncall_drill.kube_sim import KubeSim, SimulatorThread
from tests.harness.waiting import wait_until
from tests.probes.kube_cluster import NS, printing_cluster

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CUDA_OOM_LOG = (FIXTURES / "vllm" / "engine_core_cuda_oom.log").read_bytes()
PATTERN = "OutOfMemoryError|CUDA out of memory|CUDA error: out of memory"
SECRET_LINES = (
    b"INFO args: Namespace(model='qwen', api_key='sk-live-0123456789abcdef0123', port=8000)\n"
    b"DEBUG GET https://bob:hunter2@hub.example.internal/x Authorization: Bearer eyJhbGciOi.x.y\n"
    b"INFO --hf-token hf_abcdefghijklmnopqrstuvwxyz0123 loaded\n"
)


def _recorded(status: Mapping[str, Any]) -> bytes:
    """The first instance of every pod printed the recorded CUDA OOM log (plus secrets); later
    instances print one INFO line."""
    first = int(status.get("restartCount") or 0) == 0
    return SECRET_LINES + CUDA_OOM_LOG if first else b"INFO Application startup complete.\n"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubeSim, SimulatorThread, Settings]]:
    with printing_cluster(tmp_path, _recorded) as (sim, server, settings, _):
        yield sim, server, settings


async def run(settings: Settings, **params: Any) -> dict[str, Any]:
    (probe,) = PROBES
    async with ProbeContext(settings) as ctx:
        facts = await probe.run(ctx, probe.params(**params))
    json.dumps(facts)
    return facts


def _die(sim: KubeSim, server: SimulatorThread, name: str, *, oom_killed: bool) -> None:
    if oom_killed:
        server.call(lambda: sim.oom_kill(NS, name, "vllm"))
    else:
        server.call(lambda: sim.container_exited(NS, name, "vllm", reason="Completed", exit_code=0))
    wait_until(
        lambda: server.call(lambda: len(sim.ready_pods(NS))) == 2, within=10, what="the restart"
    )


async def test_a_gpu_oom_in_the_previous_log(
    cluster: tuple[KubeSim, SimulatorThread, Settings],
) -> None:
    sim, server, settings = cluster
    names = sorted(p["metadata"]["name"] for p in server.call(lambda: sim.ready_pods(NS)))
    _die(sim, server, names[1], oom_killed=False)
    # No pod named: the one whose container terminated last.
    facts = await run(settings, selector="app=vllm", container="vllm", pattern=PATTERN)
    assert (facts["pod"], facts["container"], facts["found"]) == (names[1], "vllm", True)
    assert (facts["terminated_reason"], facts["terminated_exit_code"]) == ("Completed", 0)
    assert (facts["memory_limit"], facts["memory_limit_bytes"]) == ("64Gi", 64 * 2**30)
    assert facts["match"] is not None
    assert (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in facts["match"]
    )
    assert facts["match_count"] == 1
    assert "EngineDeadError: EngineCore encountered an issue" in facts["last_error_line"]
    assert facts["line_count"] == len((SECRET_LINES + CUDA_OOM_LOG).splitlines())
    text = "\n".join(facts["lines"])
    for secret in ("sk-live-0123456789abcdef0123", "hunter2", "bob:", "eyJhbGciOi", "hf_abcdef"):
        assert secret not in text
    assert "https://********@hub.example.internal/x" in text  # oncall.redaction.MASK
    # The current instance printed no OOM; a tail of 3 previous lines keeps only the end.
    current = await run(settings, pod=names[1], previous=False, pattern=PATTERN)
    assert (current["match"], current["terminated_reason"]) == (None, None)
    short = await run(settings, pod=names[1], tail_lines=3)
    assert short["lines"][-1].endswith("Finished server process [1]")
    assert short["line_count"] == 3
    cut = await run(settings, pod=names[1], limit_bytes=1024)
    assert cut["truncated"] is True
    assert cut["bytes"] <= 1024


async def test_oom_killed_and_no_previous_container(
    cluster: tuple[KubeSim, SimulatorThread, Settings],
) -> None:
    sim, server, settings = cluster
    names = sorted(p["metadata"]["name"] for p in server.call(lambda: sim.ready_pods(NS)))
    never = await run(settings, pod=names[0], pattern=PATTERN)
    assert (never["found"], never["lines"], never["match"]) == (False, [], None)
    assert never["reason"] == f"container vllm of pod {names[0]} has no previous instance"
    # No log read: the log's facts are absent (a null match is not "no OOM in the log").
    assert never["absent"] == dict.fromkeys(
        ("lines", "line_count", "match", "match_count", "last_error_line"),
        f"no log read: container vllm of pod {names[0]} has no previous instance",
    )
    _die(sim, server, names[0], oom_killed=True)
    facts = await run(settings, pod=names[0], pattern=PATTERN)
    assert (facts["terminated_reason"], facts["terminated_exit_code"]) == ("OOMKilled", 137)
    assert facts["absent"] == {}  # the log was read
    assert facts["memory_limit"] == "64Gi"
    nobody = await run(settings, selector="app=nothing")
    assert (nobody["pod"], nobody["found"]) == (None, False)
    assert nobody["reason"] == "no pod -l app=nothing has a terminated container"
    missing = await run(settings, pod=names[0], container="sidecar")
    assert missing["reason"] == f"pod {names[0]} has no container sidecar"


def test_the_recorded_pod_reads_as_oom_killed_with_its_limit() -> None:
    pod = json.loads((FIXTURES / "kubernetes" / "pod_vllm_oomkilled.json").read_text())
    terminated = facts_of.termination(pod, "vllm", previous=True)
    assert terminated is not None
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    assert facts_of.termination(pod, "vllm", previous=False) is None
    assert facts_of.memory_limit(pod, "vllm") == "64Gi"
    latest = facts_of.latest_terminated([pod], "vllm")
    assert latest is not None
    assert latest["metadata"]["uid"] == pod["metadata"]["uid"]
    assert facts_of.latest_terminated([pod], "other") is None
    assert pod_facts(pod, datetime.now(UTC))["last_termination_reason"] == "OOMKilled"


@pytest.mark.parametrize(
    ("line", "kept", "gone"),
    [
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: ********", "dXNlcjpwYXNz"),
        ('{"token": "abc123", "n": 1}', '"token": "********"', "abc123"),
        ("redis://:s3cret@redis:6379/0", "redis://********@redis", "s3cret"),
        ("--api-key=k-123 --max-num-seqs 256", "--max-num-seqs 256", "k-123"),
        ("max_num_batched_tokens=8192 tokens/s", "max_num_batched_tokens=8192", "***"),
    ],
)
def test_redaction(line: str, kept: str, gone: str) -> None:
    redacted = facts_of.redact_line(line)
    assert kept in redacted
    assert gone not in redacted


def test_quantities_params_and_equivalent() -> None:
    assert facts_of.quantity_bytes("64Gi") == 64 * 2**30
    assert facts_of.quantity_bytes("512M") == 512 * 10**6
    assert facts_of.quantity_bytes("1e9") == 10**9
    assert facts_of.quantity_bytes("lots") is None
    with pytest.raises(ValidationError, match="not a regular expression"):
        LogsParams(pattern="(unclosed")
    with pytest.raises(ValidationError):
        LogsParams(tail_lines=0)
    ctx = ProbeContext(Settings(kubernetes=KubernetesSettings(namespace="llm")))
    assert logs_equivalent(ctx, LogsParams(pod="vllm-1", container="vllm")) == (
        "kubectl logs vllm-1 -n llm -c vllm --previous --tail=200 --limit-bytes=262144"
    )
