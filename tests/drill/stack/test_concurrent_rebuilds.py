"""Acceptance 3 of issue 12: two `oncall remediate rebuild-pod` processes, one per pod of the
2-replica vLLM Deployment, confirmed at the same moment — at most one proceeds, and the Ready
count (sampled every 100 ms by this test) never drops to 0.

Real processes on real pseudo-terminals: first two of the same identity (two terminals of one
operator: per-process Lease holders), then two identities (the drill's operator and peer
kubeconfig users). The Deployment's Lease, the replica re-check and the PodDisruptionBudget
each stop the second; whichever stops it, it changes nothing and is audited as refused.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.drill.stack.conftest import Drill
from tests.drill.stack.remediation_helpers import NS, records, vllm_pods
from tests.harness.waiting import wait_until

SAMPLE_S = 0.1
TIMEOUT_S = 240.0


def _ready(pod: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


class ReadySampler(threading.Thread):
    """Counts Ready vLLM pods every 100 ms until stopped (bounded by TIMEOUT_S)."""

    def __init__(self, kubeconfig: Path) -> None:
        super().__init__(daemon=True)
        self.kubeconfig = kubeconfig
        self.counts: list[int] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        core = client.CoreV1Api(api)
        try:
            for _ in range(int(TIMEOUT_S / SAMPLE_S)):
                pods = core.list_namespaced_pod(NS, label_selector="app=vllm", _request_timeout=5)
                self.counts.append(sum(1 for p in pods.items if _ready(p)))
                if self.stopping.wait(SAMPLE_S):
                    break
        finally:
            api.close()


def _spawn(drill: Drill, audit: Path, pod: str, context: str | None) -> tuple[Any, int]:
    args = ["--config", str(drill.directory / "oncall.yaml"), "--set", f"audit.path={audit}",
            "--set", "guards.rate_limit_actions=100"]  # fmt: skip
    if context:
        args += ["--set", f"kubernetes.context={context}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONCALL_")}
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "oncall", *args, "remediate", "rebuild-pod", pod],
        stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    return proc, master


def _both(drill: Drill, tmp: Path, pods: list[str], contexts: list[str | None]) -> list[str]:
    """Run both, type both confirmations once both prompts are up; each one's output."""
    runs = [_spawn(drill, tmp / f"audit-{i}.jsonl", pod, contexts[i]) for i, pod in enumerate(pods)]
    outputs = [b"", b""]
    open_ = [True, True]
    typed = False
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while any(open_) and time.monotonic() < deadline:
            masters = [m for (_p, m), o in zip(runs, open_, strict=True) if o]
            ready, _, _ = select.select(masters, [], [], 0.2)
            for i, (proc, master) in enumerate(runs):
                if master in ready:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:
                        chunk = b""
                    outputs[i] += chunk
                    open_[i] = bool(chunk)
                elif proc.poll() is not None:
                    open_[i] = False  # exited, and nothing left to read
            if not typed and all(b"to confirm" in out for out in outputs):
                for (_proc, master), pod in zip(runs, pods, strict=True):
                    os.write(master, pod.encode() + b"\n")
                typed = True
        for proc, _master in runs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for proc, master in runs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            with contextlib.suppress(OSError):
                os.close(master)
    assert typed, [o.decode("utf-8", "replace") for o in outputs]
    return [o.decode("utf-8", "replace").replace("\r\n", "\n") for o in outputs]


def _ready_pods(drill: Drill) -> list[str]:
    return sorted(
        p["metadata"]["name"] for p in vllm_pods(drill) if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (p.get("status") or {}).get("conditions") or [])
    )  # fmt: skip


def _two_ready_pods(drill: Drill) -> list[str]:
    seen: list[list[str]] = []

    def two() -> bool:
        seen.append(_ready_pods(drill))
        return len(seen[-1]) == 2

    # Bounded: an earlier rebuild's replacement may still be starting.
    wait_until(two, within=120, what="the drill's vLLM Deployment with 2 Ready pods")
    return seen[-1]


@pytest.mark.parametrize(
    "contexts", [(None, None), (None, "oncall-drill-peer")], ids=["same identity", "two identities"]
)
def test_two_concurrent_rebuilds_of_one_deployment_leave_a_ready_replica(
    drill: Drill, tmp_path: Path, contexts: tuple[str | None, str | None]
) -> None:
    pods = _two_ready_pods(drill)
    sampler = ReadySampler(drill.directory / "kubeconfig")
    sampler.start()
    try:
        outputs = _both(drill, tmp_path, pods, list(contexts))
    finally:
        sampler.stopping.set()
        sampler.join(timeout=10)
    # The promise first: the service kept a Ready replica the whole time.
    assert sampler.counts, "the sampler saw nothing"
    assert min(sampler.counts) >= 1, (sampler.counts, outputs)
    logs = [records(tmp_path / f"audit-{i}.jsonl") for i in range(2)]
    started = [i for i, log in enumerate(logs) if any(r["transition"] == "started" for r in log)]
    assert len(started) <= 1, outputs
    assert len(started) == 1, outputs  # the lifecycle is deterministic: one wins the Lease
    loser = 1 - started[0]
    assert logs[loser][-1]["transition"] == "refused", outputs[loser]
    assert "refused (" in outputs[loser]
    assert "verified:" in outputs[started[0]], outputs[started[0]]
    # Each process had its own holder and its own authenticated identity in the audit.
    actors = [log[0]["actor"] for log in logs]
    assert actors[0]["pid"] != actors[1]["pid"]
    expected = ["oncall-operator", "oncall-peer" if contexts[1] else "oncall-operator"]
    assert [a["kube_user"] for a in actors] == expected
