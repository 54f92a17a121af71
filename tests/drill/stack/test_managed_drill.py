"""A managed Deployment on the drill (`drill up --managed`): the simulated production-stack
operator owns `ai/vllm`. The preview warns (or refuses, per `guards.managed_workloads`), and
after a verified `set-max-num-seqs` the operator's revert is seen and recorded as `reverted`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli_runner import run_oncall
from tests.drill.stack.conftest import FOR_SCALE, Drill, start_drill
from tests.drill.stack.remediation_helpers import NS, kube_call, records, remediate, transitions

#: Seconds x FOR_SCALE: the operator reverts 30 s after a patch, well after the drill's rollout
#: of two pods (a few seconds) is verified, and well inside the revert watch set below.
OPERATOR_DELAY = 600
WATCH = "guards.revert_watch=90s"


@pytest.fixture(scope="module")
def managed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drill]:
    directory = tmp_path_factory.mktemp("managed")
    running = start_drill(
        directory, "--for-scale", str(FOR_SCALE),
        "--managed", "--operator-delay", str(OPERATOR_DELAY),
    )  # fmt: skip
    try:
        yield running
    finally:
        run_oncall("drill", "down", "--dir", str(directory), timeout=60)


def _cap_arg(drill: Drill) -> str:
    deployment = kube_call(drill, lambda k: k.get_deployment(NS, "vllm"))
    return str(deployment["spec"]["template"]["spec"]["containers"][0]["args"][3])


def test_the_preview_names_the_operator_and_warns(managed: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    run = remediate(managed, audit, "set-max-num-seqs", "vllm", "64", "--dry-run")
    assert "ok      managed: WARN: managed by VLLMRuntime ai/vllm" in run.output, run.output
    assert "reverted at its next reconcile" in run.output
    assert "kubectl edit vllmruntime vllm -n ai" in run.output
    assert transitions(audit) == ["proposed", "declined"]
    managed_note = records(audit)[0]["detail"]["managed"]  # the warning gone past is on record
    assert managed_note["policy"] == "warn"
    assert managed_note["managers"][0]["name"].startswith("VLLMRuntime ai/vllm")
    assert _cap_arg(managed) == "256"


def test_the_refuse_policy_refuses_and_changes_nothing(managed: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    run = remediate(
        managed, audit, "set-max-num-seqs", "vllm", "64",
        sets=["guards.managed_workloads=refuse"], answers=[("to confirm", "vllm")],
    )  # fmt: skip
    assert run.code == 1, run.output
    assert "REFUSED managed: refuse: managed by VLLMRuntime ai/vllm" in run.output, run.output
    assert transitions(audit) == ["proposed", "refused"]
    refused = records(audit)[-1]
    assert refused["guard"] == "managed"
    assert refused["detail"]["policy"] == "refuse"
    assert refused["detail"]["managers"][0]["kind"] == "operator"
    assert _cap_arg(managed) == "256"


def test_the_operators_revert_is_detected_and_recorded(managed: Drill, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    run = remediate(
        managed, audit, "set-max-num-seqs", "vllm", "64",
        sets=[WATCH], answers=[("to confirm", "vllm")], timeout=240,
    )  # fmt: skip
    # Verified first (the operator waits), then the watch sees the revert: exit 1.
    assert "verified: rollout complete; 2 pod(s) run --max-num-seqs 64" in run.output, run.output
    assert "watching ai/vllm for a revert by VLLMRuntime ai/vllm" in run.output
    assert "REVERTED: /spec/template/spec/containers/0/args/3: '64' -> '256'" in run.output
    assert run.code == 1
    assert transitions(audit)[-2:] == ["verified", "reverted"]
    reverted = records(audit)[-1]
    assert reverted["action_id"] == records(audit)[0]["action_id"]
    assert reverted["detail"]["changes"] == [
        {"path": "/spec/template/spec/containers/0/args/3", "set": "64", "now": "256"}
    ]
    assert "VLLMRuntime ai/vllm" in reverted["detail"]["managers"][0]
    assert _cap_arg(managed) == "256"
