"""Threat: one person meets the two-person rule alone (issue 12, item 1).

Against the drill's Kubernetes API (SelfSubjectReview) and a real redis-server: the identity
that counts is the Kubernetes username, so `USER=mallory` on the requester's own kubeconfig is
still the requester; an approval needs a terminal and a typed confirmation of the requester's
preview, is refused in read-only mode, is audited in the approver's log too, and dies with
its requester's process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from oncall.remediation.executor import Remediator
from oncall.settings import Settings
from oncall_drill.kube_sim.kubeconfig import PEER_CONTEXT
from tests.drill.kube.conftest import NS, Cluster


def _config(tmp: Path, cluster: Cluster, redis_url: str, name: str, context: str | None) -> Path:
    doc: dict[str, Any] = {
        "kubernetes": {"kubeconfig": str(cluster.kubeconfig), "namespace": NS},
        "redis": {"url": redis_url},
        "audit": {"path": str(tmp / f"{name}.jsonl"), "kube_events": False},
        "guards": {"two_person": ["rebuild-pod"]},
    }
    if context:
        doc["kubernetes"]["context"] = context
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class Parties(NamedTuple):
    """A Ready vLLM pod, and the configs of its two people: the requester (the operator's
    kubeconfig context) and the peer (another Kubernetes user); each audits to its own log."""

    pod: str
    requester: Path
    peer: Path


@pytest.fixture
def parties(drill: Cluster, redis_url: str, tmp_path: Path) -> Parties:
    pod = drill.ready_pods(2)[0].metadata.name
    me = _config(tmp_path, drill, redis_url, "requester", None)
    return Parties(pod, me, _config(tmp_path, drill, redis_url, "peer", PEER_CONTEXT))


def _settings(path: Path) -> Settings:
    from oncall.settings import load_settings

    return load_settings(config=path).settings


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _request(requester: Remediator, pod: str) -> tuple[str, asyncio.Task[Any]]:
    """The requester plans a rebuild, asks for approval and waits (its heartbeat running)."""
    await requester.identify()
    plan = await requester.plan("rebuild-pod", {"pod": pod})
    preview = await requester.preview(plan)
    action_id = os.urandom(6).hex()  # as new_action_id() makes them
    rule = requester.guards.two_person
    # The stored preview is a decoy: the approver must be shown the live one (docs/audit.md).
    await rule.request(action_id, plan.action, plan.target.label, requester.person,
                       preview="PREVIEW " + plan.summary, confirm_word=pod,
                       target_json=json.dumps(plan.target.as_dict()),
                       params_json=json.dumps(plan.params))  # fmt: skip
    assert preview.plan is plan
    return action_id, asyncio.ensure_future(rule.wait(action_id, timeout_s=30))


@asynccontextmanager
async def _pending(config: Path, pod: str) -> AsyncIterator[tuple[str, asyncio.Task[Any]]]:
    """The requester of `config` asks for a rebuild of `pod` and waits for approval (the
    action's id and the wait); the wait is cancelled on the way out."""
    async with Remediator.from_settings(_settings(config)) as requester:
        action_id, waiting = await _request(requester, pod)
        try:
            yield action_id, waiting
        finally:
            waiting.cancel()


async def _approve_without_terminal(
    config: Path, action_id: str, *extra: str, env: dict[str, str] | None = None
) -> tuple[int | None, str]:
    """`oncall --config CONFIG remediate approve ACTION_ID EXTRA...` with stdin from /dev/null
    (no terminal to type a confirmation on); its exit code and output (stdout and stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "oncall", "--config", str(config), "remediate", "approve",
        action_id, *extra, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode()


async def test_a_spoofed_user_on_the_requesters_credentials_is_the_requester(
    parties: Parties, tmp_path: Path
) -> None:
    pod, me, _peer = parties
    async with _pending(me, pod) as (action_id, waiting):
        # mallory: another $USER, another process, the same kubeconfig user.
        env = {**os.environ, "USER": "mallory", "LOGNAME": "mallory"}
        code, text = await _approve_without_terminal(me, action_id, env=env)
        assert code == 1, text
        assert "refused: self-approval is refused: oncall-operator@" in text
        assert not waiting.done()
    refused = [r for r in _records(tmp_path / "requester.jsonl") if r["transition"] == "refused"]
    assert refused and refused[-1]["guard"] == "two-person"
    assert refused[-1]["actor"]["display_user"] == "mallory"
    assert refused[-1]["actor"]["kube_user"] == "oncall-operator"


async def test_another_identity_without_a_terminal_is_refused_and_audited(
    parties: Parties, tmp_path: Path
) -> None:
    pod, me, peer = parties
    async with _pending(me, pod) as (action_id, waiting):
        for extra in (["--read-only"], []):
            code, out = await _approve_without_terminal(peer, action_id, *extra)
            assert code == 1, out
            if extra:
                assert "refused: read-only" in out or "read-only" in out
            else:
                assert "a typed confirmation needs a terminal" in out
                assert f"rebuild-pod Pod {NS}/{pod}" in out and "PREVIEW" not in out, out
        assert not waiting.done()
    peer_log = _records(tmp_path / "peer.jsonl")
    assert [r["transition"] for r in peer_log] == ["refused", "refused"]
    assert {r["actor"]["kube_user"] for r in peer_log} == {"oncall-peer"}
    assert [r["guard"] for r in peer_log] == ["read-only", "two-person"]


async def test_another_identity_confirming_approves_and_both_logs_say_so(
    parties: Parties, tmp_path: Path
) -> None:
    pod, me, peer = parties
    shown: list[tuple[str, str]] = []

    async def typed(preview: str, word: str) -> bool:
        shown.append((preview, word))
        return True

    async with (
        Remediator.from_settings(_settings(me)) as requester,
        Remediator.from_settings(_settings(peer)) as approver,
    ):
        action_id, waiting = await _request(requester, pod)
        verdict = await approver.approve(action_id, typed)
        waited = await waiting
    assert verdict.ok, verdict
    assert waited.ok and waited.detail["approver"].startswith("oncall-peer@")
    assert shown and shown[0][0].startswith(f"rebuild-pod Pod {NS}/{pod}") and shown[0][1] == pod
    [record] = _records(tmp_path / "peer.jsonl")
    assert record["transition"] == "approved" and record["action_id"] == action_id
    assert record["detail"]["approval_of"].startswith("oncall-operator@")


async def test_a_request_dies_with_its_requester(parties: Parties, tmp_path: Path) -> None:
    pod, me, peer = parties
    # The requester is a real process that asks, then ends (killed, or the terminal closed).
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from oncall.settings import load_settings\n"
        "from oncall.remediation.executor import Remediator\n"
        "async def main():\n"
        "    s = load_settings(config=Path(sys.argv[1])).settings\n"
        "    async with Remediator.from_settings(s) as r:\n"
        "        await r.identify()\n"
        "        await r.guards.two_person.request('dead-1', 'rebuild-pod', sys.argv[2], r.person,"
        " preview='P', confirm_word=sys.argv[2])\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, str(me), pod)
    assert await asyncio.wait_for(proc.wait(), 60) == 0

    async def typed(_preview: str, _word: str) -> bool:
        return True

    async with Remediator.from_settings(_settings(peer)) as approver:
        verdict = await approver.approve("dead-1", typed)
    assert not verdict.ok
    assert "the request died: the requesting process" in verdict.reason
    assert "has ended" in verdict.reason
